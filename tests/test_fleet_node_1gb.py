"""`triage node-check` on a 1 GiB kernel log: memory stays bounded and the window is respected.

Runs in CI with the rest of the suite. Cost, measured on the shared 2-core development machine:
about 20 s in all: writing the file (one healthy dmesg excerpt of the corpus, repeated) takes 2-5 s,
the first check compiles the pattern database into the test's private cache (about 8 s, once), and
each check of the 1 GiB file then takes about 2 s, reading only its last 8 MiB. The file is deleted
at the end. Deselect it with `--deselect tests/test_fleet_node_1gb.py` when iterating.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEALTHY = ROOT / "corpus" / "healthy" / "dmesg-nvrm-open-module-580-load-h200.log"
SIZE = 1 << 30
# Real message forms, as the knowledge base's examples quote them.
XID48_LINE = "[ 12.000001] NVRM: Xid (PCI:0000:3b:00): 48, pid=1234, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.\n"
XID79_LINE = "[ 99999.000001] NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus.\n"


# Runs the check as its only child and reports the child's peak RSS. A child forked straight from
# pytest would count the pages it shared with this (large) process before exec in its peak.
_LAUNCHER = """
import resource, subprocess, sys
status = subprocess.call(sys.argv[1:], stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
sys.exit(status)
"""


def _run(*args: str) -> tuple[int, str, float, int]:
    """Exit status, stdout, wall seconds and peak RSS (KiB) of one node-check process."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, sys.executable, "-m", "triage", "node-check", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    wall = time.perf_counter() - start
    return proc.returncode, proc.stdout, wall, int(proc.stderr.split()[-1])


def test_one_gigabyte_kernel_log_bounded_memory_and_window(tmp_path: Path) -> None:
    big = tmp_path / "kern.log"
    block = HEALTHY.read_bytes()
    block *= (1 << 20) // len(block)
    try:
        with big.open("wb") as fh:
            fh.write(XID48_LINE.encode())  # at the very start: far outside the window
            written = len(XID48_LINE)
            while written < SIZE:
                fh.write(block)
                written += len(block)
            fh.write(XID79_LINE.encode())  # at the end: inside it
        assert big.stat().st_size > SIZE

        # the first check compiles the pattern database into the (test's private) cache: that
        # costs more memory once, so it is not what is compared
        _run(str(HEALTHY))
        small_status, _, small_wall, small_rss = _run(str(HEALTHY))
        assert small_status == 0

        status, out, wall, rss = _run(str(big))
        assert status == 1, out
        assert out == "gpu-fallen-off-the-bus: Xid 79 on 0000:44:00\n"
        # the Xid 48 at the start is outside the window: its family stays OK
        status48, out48, _, _ = _run("--family", "memory-ecc", str(big))
        assert (status48, out48) == (0, "OK: no memory-ecc failure in the window\n")
        print(
            f"1 GiB log: {wall:.2f} s, peak RSS {rss / 1024:.0f} MiB; "
            f"corpus log: {small_wall:.2f} s, {small_rss / 1024:.0f} MiB"
        )
        # bounded: the 1 GiB file costs its 8 MiB window, not its size
        assert rss < small_rss + 64 * 1024, (rss, small_rss)
        assert rss < 160 * 1024, rss
    finally:
        big.unlink(missing_ok=True)
