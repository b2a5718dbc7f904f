"""Assemble snapshot lines (the hits of `SNAPSHOT_PATTERNS`) into structured facts.

Each snapshot kind has a reader below. A reader sees its own kind's hits in input and line order
and keeps the state a paste implies: the GPU section a `Pending : Yes` belongs to, the unit an
`Active:` line describes, the container a `Reason:` line follows. Lines of one kind further apart
than `_GAP` lines, or in another input, start a new snapshot. Values are kept as printed, numbers
as numbers and `unlimited` as the string, so a rule can compare them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from triage.models import Hit

# Lines of one snapshot further apart than this belong to different snapshots (a paste puts a
# block's lines next to each other; a describe's container section spans a few dozen lines).
_GAP = 60

_ULIMIT_ROW = re.compile(
    r"(?P<label>[a-z][a-z -]{2,40}?)\s*\((?:(?P<unit>[a-z0-9 ]+), )?-(?P<flag>[a-zA-Z])\)"
    r"\s+(?P<value>unlimited|[0-9]+)"
)
# ulimit -a flags, named by what they limit (the unit in the name when the shell prints one)
_ULIMIT_KEYS = {
    "c": "core_blocks",
    "d": "data_kb",
    "e": "nice",
    "f": "file_size_blocks",
    "i": "pending_signals",
    "l": "memlock_kb",
    "m": "rss_kb",
    "n": "nofile",
    "p": "pipe_512b",
    "q": "msgqueue_bytes",
    "r": "rtprio",
    "R": "rttime_us",
    "s": "stack_kb",
    "t": "cpu_seconds",
    "u": "nproc",
    "v": "virtual_memory_kb",
    "x": "file_locks",
}
_SMI_ROW = re.compile(
    r"\|\s*(?P<index>[0-9]{1,2})\s+(?P<name>.+?)\s+(?P<pm>On|Off)\s*\|\s*(?P<bus>[0-9A-Fa-f:.]+)\s+(?:On|Off)\s*\|\s*(?P<ecc>\S+)\s*\|"
)
_SMI_MIG = re.compile(r"\|\s+(?P<mig>Enabled|Disabled|N/A)\s+\|\s*$")
_SMI_BUS = re.compile(r"GPU (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9])")
_TOPO_TOKEN = re.compile(r"X|NV[0-9]+|SYS|NODE|PHB|PXB|PIX")
_POD_READY = re.compile(r"^[0-9]+/[0-9]+$")
_NCCL_HOST = re.compile(r"^(?P<host>[^\s:]+):[0-9]+:[0-9]+ \[[0-9]+\]")
_SOCKET_ITEM = re.compile(r"\[[0-9]+\](?P<name>[^:\s]+):(?P<addr>\S+?)<[0-9]+>")
_IB_ITEM = re.compile(r"\[[0-9]+\](?P<device>[^:\s]+):(?P<port>[0-9]+)/(?P<link>[A-Za-z]+)")


def _text(hit: Hit) -> str:
    """The line as pasted, without markdown quoting and bullets."""
    text = hit.line.text or hit.line.raw
    return re.sub(r"^(?:> ?)+", "", text)


def _where(hit: Hit) -> dict[str, Any]:
    return {"input": hit.line.input, "line": hit.line.number}


def _number(value: str) -> int | str:
    return int(value) if value.isdigit() else value


def _blocks(hits: list[Hit]) -> list[list[Hit]]:
    """Consecutive runs of hits in one input with no more than `_GAP` lines between them."""
    blocks: list[list[Hit]] = []
    for hit in hits:
        last = blocks[-1][-1] if blocks else None
        if (
            last
            and last.line.input == hit.line.input
            and hit.line.number - last.line.number <= _GAP
        ):
            blocks[-1].append(hit)
        else:
            blocks.append([hit])
    return blocks


def read_ulimit(hits: list[Hit]) -> dict[str, Any] | None:
    """`ulimit -a`: the first pasted block with at least three rows (one row is not a snapshot)."""
    for block in _blocks(hits):
        limits: dict[str, Any] = {}
        for hit in block:
            m = _ULIMIT_ROW.search(_text(hit))
            if m and m.group("flag") in _ULIMIT_KEYS:
                limits.setdefault(_ULIMIT_KEYS[m.group("flag")], _number(m.group("value")))
        if len(limits) >= 3:
            return {**limits, **_where(block[0])}
    return None


def read_gpus(hits: list[Hit]) -> list[dict[str, Any]]:
    """GPUs from `nvidia-smi -q` sections and from the `nvidia-smi` table, one entry per GPU
    (matched by bus id; the -q value wins where both give one)."""
    gpus: list[dict[str, Any]] = []
    by_bus: dict[str, dict[str, Any]] = {}

    def gpu_for(bus: str, hit: Hit) -> dict[str, Any]:
        key = bus.lower()[
            -12:
        ]  # the table prints 00000000:01:00.0, -q too; older tables 0000:01:00.0
        if key not in by_bus:
            by_bus[key] = {"index": len(gpus), "bus_id": bus, **_where(hit)}
            gpus.append(by_bus[key])
        return by_bus[key]

    current: dict[str, Any] | None = None
    section = ""
    table_row: tuple[dict[str, Any], int] | None = None
    for hit in hits:
        text = _text(hit)
        kind = hit.signature
        if kind == "snapshot.smi_q_gpu":
            m = _SMI_BUS.search(text)
            if m and text.strip().startswith("GPU "):
                current, section = gpu_for(m.group("bus"), hit), ""
            continue
        if kind == "snapshot.smi_row":
            m = _SMI_ROW.search(text)
            if m:
                gpu = gpu_for(m.group("bus"), hit)
                gpu["index"] = int(m.group("index"))
                gpu.setdefault("name", m.group("name").strip())
                gpu.setdefault(
                    "persistence_mode", "Enabled" if m.group("pm") == "On" else "Disabled"
                )
                gpu.setdefault("ecc_uncorrected", _number(m.group("ecc")))
                table_row = (gpu, hit.line.number)
            continue
        if kind == "snapshot.smi_mig":
            m = _SMI_MIG.search(text)
            if m and table_row and hit.line.number == table_row[1] + 2:
                table_row[0].setdefault("mig_mode", m.group("mig"))
            continue
        if current is None or hit.line.input != current["input"]:
            continue
        caps = hit.captures
        if kind == "snapshot.smi_q_section":
            if text.strip() == caps.get("section"):  # a header line, not a field that names it
                section = caps["section"]
            continue
        if kind == "snapshot.smi_q_sub":
            key, value = caps.get("key", ""), caps.get("value", "")
            if section == "MIG Mode" and key == "Current":
                current["mig_mode"] = value
            elif section in ("Remapped Rows", "Retired Pages") and key == "Pending":
                current[
                    "remapped_rows_pending"
                    if section == "Remapped Rows"
                    else "retired_pages_pending"
                ] = value
            continue
        if kind == "snapshot.smi_q_field":
            key, value = caps.get("key", ""), caps.get("value", "").strip()
            if key == "Product Name":
                current["name"] = value
            elif key == "Persistence Mode":
                current["persistence_mode"] = value
            elif key == "Pending Page Blacklist":
                current["retired_pages_pending"] = value
            elif key == "Remapping Failure Occurred":
                current["remapping_failure"] = value
            elif key == "Unrepairable Memory":
                current["unrepairable_memory"] = value
            elif (
                key in ("DRAM Uncorrectable", "Volatile Uncorrectable")
                and "ecc_uncorrected_volatile" not in current
            ):
                current["ecc_uncorrected_volatile"] = _number(value)
            elif key == "Uncorrectable Error" and section == "Remapped Rows":
                current["remapped_rows_uncorrectable"] = _number(value)
            elif key == "Double Bit ECC" and section == "Retired Pages":
                current["retired_pages_dbe"] = _number(value)
            elif key == "Single Bit ECC" and section == "Retired Pages":
                current["retired_pages_sbe"] = _number(value)
    for gpu in gpus:  # one name for the uncorrected-error count, whichever view gave it
        if "ecc_uncorrected_volatile" in gpu:
            gpu["ecc_uncorrected"] = gpu.pop("ecc_uncorrected_volatile")
    return gpus


def read_topology(hits: list[Hit]) -> dict[str, Any] | None:
    """`nvidia-smi topo -m`: the link between every pair of GPUs, and each GPU's CPU affinity."""
    for block in _blocks(hits):
        header = next((h for h in block if h.signature == "snapshot.topo_header"), None)
        if header is None:
            continue
        names = [t for t in _text(header).split() if re.fullmatch(r"GPU[0-9]+", t)]
        links: dict[str, dict[str, str]] = {}
        affinity: dict[str, str] = {}
        for hit in block:
            if hit.signature != "snapshot.topo_row":
                continue
            tokens = _text(hit).split()
            row, cells = tokens[0], tokens[1:]
            if row not in names or len(cells) < len(names):
                continue
            links[row] = {names[i]: cells[i] for i in range(len(names)) if names[i] != row}
            rest = [c for c in cells[len(names) :] if not _TOPO_TOKEN.fullmatch(c)]
            if rest:
                affinity[row] = rest[0]
        if links:
            kinds = {link for peers in links.values() for link in peers.values()}
            return {
                "gpus": names,
                "links": links,
                "nvlink": any(k.startswith("NV") for k in kinds),
                "cpu_affinity": affinity,
                **_where(header),
            }
    return None


def read_units(hits: list[Hit]) -> list[dict[str, Any]]:
    """`systemctl status`: one entry per unit header, with the Loaded / Active / Main PID lines
    that follow it (within a few lines, before the next header)."""
    units: list[dict[str, Any]] = []
    unit: dict[str, Any] | None = None
    for hit in hits:
        caps = hit.captures
        if hit.signature == "snapshot.unit":
            head = _text(hit).lstrip()
            if not head or head[0] not in "●○×*↻":
                continue  # "foo.service - ..." inside a journal message is not a status header
            unit = {
                "unit": caps["unit"],
                "description": caps.get("desc", "").strip(),
                **_where(hit),
            }
            units.append(unit)
            continue
        if unit is None or hit.line.input != unit["input"] or hit.line.number - unit["line"] > 12:
            continue
        if hit.signature == "snapshot.unit_loaded":
            unit.setdefault("loaded", caps["loaded"])
        elif hit.signature == "snapshot.unit_active":
            unit.setdefault("active", caps["active"])
            if caps.get("sub"):
                unit.setdefault("sub", caps["sub"])
            if caps.get("result"):
                unit.setdefault("result", caps["result"])
        elif hit.signature == "snapshot.unit_main":
            unit.setdefault("main_pid", int(caps["pid"]))
            if caps.get("code"):
                unit.setdefault("exit_code_kind", caps["code"])
                unit.setdefault("exit_status", caps.get("status", ""))
    return units


def read_pods(hits: list[Hit]) -> list[dict[str, Any]]:
    """`kubectl get pods` rows and `kubectl describe pod` container states, merged by pod name."""
    pods: list[dict[str, Any]] = []
    by_name: dict[str, dict[str, Any]] = {}

    def pod_for(name: str, hit: Hit) -> dict[str, Any]:
        if name not in by_name:
            by_name[name] = {"name": name, **_where(hit)}
            pods.append(by_name[name])
        return by_name[name]

    described: dict[str, Any] | None = None
    which = ""
    for hit in hits:
        text = _text(hit)
        kind = hit.signature
        caps = hit.captures
        if kind == "snapshot.pod_row":
            tokens = text.split()
            ready = next((i for i, t in enumerate(tokens) if _POD_READY.match(t)), None)
            if ready is None or ready == 0 or ready + 2 >= len(tokens):
                continue
            name = tokens[ready - 1].removeprefix("pod/")
            pod = pod_for(name, hit)
            pod["ready"] = tokens[ready]
            pod["status"] = tokens[ready + 1]
            restarts = tokens[ready + 2]
            if restarts.isdigit():
                pod["restarts"] = int(restarts)
            if ready >= 2 and not tokens[0].startswith(("pod/",)) and ready == 2:
                pod["namespace"] = tokens[0]
            continue
        if kind == "snapshot.describe_name":
            if text.lstrip().startswith("Name:"):
                described, which = pod_for(caps["name"], hit), ""
            continue
        if described is None or hit.line.input != described["input"]:
            # a container state pasted without its pod's Name: line still describes one pod
            if kind == "snapshot.describe_state":
                described = pod_for("<described pod>", hit)
            else:
                continue
        if kind == "snapshot.describe_state":
            which = "last" if caps.get("which") == "Last State" else "state"
            described[f"{which}_state" if which == "last" else "state"] = caps["state"]
        elif kind == "snapshot.describe_reason" and which:
            described.setdefault(
                "last_reason" if which == "last" else "state_reason", caps["reason"]
            )
        elif kind == "snapshot.describe_exit" and which:
            described.setdefault(
                "exit_code" if which == "last" else "state_exit_code", int(caps["code"])
            )
        elif kind == "snapshot.describe_restarts":
            described.setdefault("restarts", int(caps["count"]))
    return pods


def read_nccl_interfaces(hits: list[Hit]) -> dict[str, Any] | None:
    """NCCL's network lists: socket interfaces, IB/RoCE devices, the OOB and bootstrap interface
    (each once, with the hosts that printed it), and whether it found no IB device."""
    out: dict[str, Any] = {}
    hosts: set[str] = set()

    def add(key: str, item: dict[str, Any]) -> None:
        items: list[dict[str, Any]] = out.setdefault(key, [])
        if item not in items:
            items.append(item)

    for hit in hits:
        text = _text(hit)
        m = _NCCL_HOST.match(text)
        if m:
            hosts.add(m.group("host"))
        caps = hit.captures
        kind = hit.signature
        if kind == "snapshot.nccl_socket":
            for item in _SOCKET_ITEM.finditer(caps.get("list", "")):
                add("socket", {"name": item.group("name"), "address": item.group("addr")})
        elif kind == "snapshot.nccl_net_old":
            add("socket", {"name": caps["name"], "address": caps["addr"]})
        elif kind == "snapshot.nccl_ib":
            for item in _IB_ITEM.finditer(caps.get("list", "")):
                add(
                    "ib",
                    {
                        "device": item.group("device"),
                        "port": int(item.group("port")),
                        "link": item.group("link"),
                    },
                )
            if caps.get("oob"):
                out.setdefault("oob", caps["oob"].split("<")[0])
        elif kind == "snapshot.nccl_ib_none":
            out["ib_device_found"] = False
        elif kind == "snapshot.nccl_bootstrap":
            out.setdefault("bootstrap", f"{caps['name']}:{caps['addr']}")
        out.setdefault("input", hit.line.input)
        out.setdefault("line", hit.line.number)
    if not out:
        return None
    if hosts:
        out["hosts"] = sorted(hosts)
    return out


def read_snapshots(hits: Iterable[Hit]) -> dict[str, Any]:
    """The snapshot facts of a run from its fact hits (other facts' hits are ignored)."""
    mine = sorted(
        (h for h in hits if h.signature.startswith("snapshot.")),
        key=lambda h: (h.line.input, h.line.number),
    )
    if not mine:
        return {}

    def of(*prefixes: str) -> list[Hit]:
        return [h for h in mine if h.signature.startswith(prefixes)]

    facts: dict[str, Any] = {}
    ulimit = read_ulimit(of("snapshot.ulimit"))
    if ulimit:
        facts["ulimit"] = ulimit
    gpus = read_gpus(of("snapshot.smi"))
    if gpus:
        facts["gpus"] = gpus
    topology = read_topology(of("snapshot.topo"))
    if topology:
        facts["gpu_topology"] = topology
    units = read_units(of("snapshot.unit"))
    if units:
        facts["units"] = units
    pods = read_pods(of("snapshot.pod", "snapshot.describe"))
    if pods:
        facts["pods"] = pods
    nccl = read_nccl_interfaces(of("snapshot.nccl"))
    if nccl:
        facts["nccl_interfaces"] = nccl
    return facts
