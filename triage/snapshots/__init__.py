"""Read the snapshots users paste as evidence into structured facts.

One job: recognise the output of `ulimit -a`, `nvidia-smi` / `nvidia-smi -q`, `nvidia-smi topo -m`,
`systemctl status`, `kubectl get pods` / `kubectl describe pod` and NCCL's interface lists wherever
they appear in an input (no timestamps; a paste often mixes several with a server log) and turn
them into `report.facts` entries (`ulimit`, `gpus`, `gpu_topology`, `units`, `pods`,
`nccl_interfaces`; docs/report.md). The lines are found by the same single scan as everything else:
`SNAPSHOT_PATTERNS` are fact patterns the engine adds to its table, and `read_snapshots` assembles
their hits, in line order, into facts. Rules on snapshots are ordinary signatures whose decisive
pattern is the snapshot's own line (`max locked memory (kbytes, -l) 64`, `CrashLoopBackOff`, ...).
"""

from triage.snapshots.parse import read_snapshots
from triage.snapshots.patterns import SNAPSHOT_PATTERNS

__all__ = ["SNAPSHOT_PATTERNS", "read_snapshots"]
