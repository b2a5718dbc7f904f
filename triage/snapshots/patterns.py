"""The lines of each snapshot kind, as fact patterns (name, regex) for the engine's single scan.

Every name starts with `snapshot.` so `triage.facts.collect_facts` leaves these hits alone (none
has a `v` group) and `triage.snapshots.parse` knows them. Each pattern carries a literal of its
own kind's output (`(kbytes, -l)`, `Remapped Rows`, `Main PID:`, `CrashLoopBackOff`, ...), so the
scan adds few candidate lines on logs that hold no snapshot. The parser re-reads the matched line
in full; the patterns only have to find it.
"""

from __future__ import annotations

_POD_STATUS = (
    r"(?:Running|Pending|Completed|Succeeded|Failed|Error|CrashLoopBackOff|OOMKilled"
    r"|ImagePullBackOff|ErrImagePull|ContainerCreating|PodInitializing|Terminating|Evicted"
    r"|Unknown|CreateContainerConfigError|CreateContainerError|RunContainerError"
    r"|ContainerStatusUnknown|Init:[A-Za-z0-9:/]+)"
)
_BUS_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9]"

SNAPSHOT_PATTERNS: tuple[tuple[str, str], ...] = (
    # ulimit -a: "max locked memory       (kbytes, -l) 64" (bash and zsh spacing both)
    ("snapshot.ulimit", r"[a-z][a-z -]{2,40}\((?:[a-z0-9 ]+, )?-[a-zA-Z]\) +(?:unlimited|[0-9]+)"),
    # nvidia-smi -q: a GPU's section header, the fields read, the sub-section headers that say
    # which "Current" / "Pending" line is which
    ("snapshot.smi_q_gpu", r"GPU " + _BUS_ID),
    (
        "snapshot.smi_q_field",
        r"(?P<key>Product Name|Persistence Mode|Pending Page Blacklist|Remapping Failure Occurred"
        r"|DRAM Uncorrectable|Double Bit ECC|Single Bit ECC|Uncorrectable Error"
        r"|Volatile Uncorrectable"
        r"|Unrepairable Memory|SRAM Threshold Exceeded) +: (?P<value>[^ ][^\n]{0,80})",
    ),
    (
        "snapshot.smi_q_section",
        r"(?P<section>Remapped Rows|Retired Pages|MIG Mode|ECC Mode|ECC Errors|Driver Model"
        r"|GPU Operation Mode|GPU Reset Status|GPU Virtualization Mode|Inforom Version)",
    ),
    ("snapshot.smi_q_sub", r"(?P<key>Current|Pending|Volatile|Aggregate) +: (?P<value>[A-Za-z/]+)"),
    # the nvidia-smi table: the first row of a GPU (index, name, persistence, bus id, ECC) and the
    # third (MIG mode) that follows it
    ("snapshot.smi_row", r"\| +[0-9]{1,2} +[^|]{1,60}(?:On|Off) *\| *" + _BUS_ID + r" +(?:On|Off)"),
    ("snapshot.smi_mig", r"\| +(?:Enabled|Disabled|N/A) +\|"),
    # nvidia-smi topo -m: the header and each row
    ("snapshot.topo_header", r"GPU0[ \t]+(?:GPU1|NIC0|mlx5_0|CPU Affinity)"),
    ("snapshot.topo_row", r"GPU[0-9]{1,2}[ \t]+(?:X|NV[0-9]+|SYS|NODE|PHB|PXB|PIX)[ \t]"),
    # systemctl status
    (
        "snapshot.unit",
        r"(?P<unit>[A-Za-z0-9][\w@:.\\-]{0,200}\.(?:service|socket|timer|mount|scope))"
        r" - (?P<desc>[^\n]{1,200})",
    ),
    ("snapshot.unit_loaded", r"Loaded: (?P<loaded>loaded|not-found|masked|error|bad-setting)"),
    (
        "snapshot.unit_active",
        r"Active: (?P<active>active|inactive|activating|deactivating|failed|reloading)"
        r"(?: \((?P<sub>[a-z -]+)\))?(?: \(Result: (?P<result>[a-z-]+)\))?",
    ),
    (
        "snapshot.unit_main",
        r"Main PID: (?P<pid>[0-9]+) \((?:code=(?P<code>[a-z]+), status=(?P<status>[^)]{1,60})"
        r"|(?P<comm>[^)]{1,60}))\)",
    ),
    # kubectl get pods (plain, -A, -o wide, single-space pastes)
    ("snapshot.pod_row", r"[0-9]+/[0-9]+ +" + _POD_STATUS + r" +[0-9]+"),
    # kubectl describe pod
    ("snapshot.describe_name", r"Name:[ \t]{2,}(?P<name>[a-z0-9][-a-z0-9.]{1,252})"),
    (
        "snapshot.describe_state",
        r"(?P<which>Last State|State):[ \t]+(?P<state>Running|Waiting|Terminated)",
    ),
    ("snapshot.describe_reason", r"Reason:[ \t]+(?P<reason>[A-Za-z]+)"),
    ("snapshot.describe_exit", r"Exit Code:[ \t]+(?P<code>-?[0-9]+)"),
    ("snapshot.describe_restarts", r"Restart Count:[ \t]+(?P<count>[0-9]+)"),
    # NCCL's interface lists (2.4 onwards, and the 2.3 "NET : Using interface" lines)
    ("snapshot.nccl_socket", r"NET/Socket : Using (?P<list>\[0\][^\n]{1,2000})"),
    (
        "snapshot.nccl_ib",
        r"NET/IB : Using (?P<list>\[0\][^;\n]{1,2000})(?:; OOB (?P<oob>[^ \n]+))?",
    ),
    ("snapshot.nccl_ib_none", r"NET/IB : No device found"),
    ("snapshot.nccl_net_old", r"NET : Using interface (?P<name>[^ :]+):(?P<addr>[^ <]+)"),
    ("snapshot.nccl_bootstrap", r"Bootstrap ?: Using (?P<name>[^ :]+):(?P<addr>[^ <]+)"),
)
