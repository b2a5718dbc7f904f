"""Peak memory and wall time of `triage` on each hostile input of the reliability audit.

    python fuzz/hostile_limits.py [--timeout S] [--only NAME[,NAME...]] [--bomb-gib N]

Each input is generated in a temporary directory (nothing is downloaded, nothing is kept), then
`python -m triage --no-history -f json` runs on it in its own process group under a time limit;
the parent reads the child's peak RSS from `wait4` (the kernel's rusage, so the process
substitution's `zcat` counts too). Inputs are built in a separate process, so that the measuring
process stays small (a child's peak includes what its parent held when it forked). It prints one Markdown row per input: exit status, peak RSS,
wall time, and what came out (a report, a refusal, the limit). A measurement, not a test: the
numbers depend on the machine; docs/robustness.md quotes a run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "vllm-kv-cache-oom.log"
MIB = 1 << 20


@dataclass
class Case:
    name: str
    what: str
    make: Callable[[Path], list[str]]  # writes the input, returns the triage arguments
    stdin: Callable[[Path], Path | None] = lambda _d: None  # file to feed on stdin, if any
    shell: bool = False  # run through bash (process substitution)
    timeout: float | None = None  # endless inputs: the run is expected to reach its limit
    writer: Callable[[Path], None] | None = None  # started in a thread (a FIFO's writer)
    extra: list[str] = field(default_factory=list)


def _journal_lines(text: str) -> list[str]:
    return [
        json.dumps({"MESSAGE": line, "SYSLOG_IDENTIFIER": "vllm", "_PID": "4242"})
        for line in text.splitlines()
    ]


def _nested_json(d: Path) -> list[str]:
    lines = _journal_lines(EXAMPLE.read_text())
    deep = '{"MESSAGE":' + "[" * 3000 + "]" * 3000 + "}"
    (d / "j.log").write_text("\n".join([deep, *lines[:10], deep, *lines[10:]]) + "\n")
    return [str(d / "j.log")]


def _fifo(d: Path) -> list[str]:
    os.mkfifo(d / "fifo")
    return [str(d / "fifo")]


def _fifo_writer(d: Path) -> None:
    with open(d / "fifo", "wb") as fh:
        fh.write(EXAMPLE.read_bytes())


def _procsub(d: Path) -> list[str]:
    (d / "x.log.gz").write_bytes(gzip.compress(EXAMPLE.read_bytes()))
    return [f"<(zcat {d / 'x.log.gz'})"]


def _long_line(d: Path) -> list[str]:
    with open(d / "long.log", "wb") as fh:
        block = b"A" * MIB
        for _ in range(200):
            fh.write(block)
        fh.write(b" " + EXAMPLE.read_bytes().splitlines()[-1] + b"\n")
    return [str(d / "long.log")]


def _gzip_bomb(d: Path, gib: int) -> Path:
    """`gib` GiB of zeros as one gzip file: members of 64 MiB each (gzip reads them as one
    stream), so that building it costs one compression, not `gib` GiB of deflate."""
    member = gzip.compress(b"\0" * (64 * MIB), compresslevel=9)
    path = d / "bomb.log.gz"
    with open(path, "wb") as fh:
        for _ in range(gib * 16):
            fh.write(member)
    return path


def _zstd_bomb(d: Path, gib: int) -> Path:
    """`gib` GiB of zeros as one zstd frame (the content size is not written into it)."""
    import zstandard

    path = d / "bomb.log.zst"
    zeros = b"\0" * (64 * MIB)
    with open(path, "wb") as fh, zstandard.ZstdCompressor(level=3).stream_writer(fh) as out:
        for _ in range(gib * 16):
            out.write(zeros)
    return path


def _newline_bomb(d: Path) -> list[str]:
    member = gzip.compress(b"\n" * (64 * MIB), compresslevel=9)
    with open(d / "nl.log.gz", "wb") as fh:
        for _ in range(10):
            fh.write(member)
    return [str(d / "nl.log.gz")]


def _random(d: Path) -> list[str]:
    (d / "random.log").write_bytes(os.urandom(10 * MIB))
    return [str(d / "random.log")]


def cases(bomb_gib: int, endless_s: float) -> list[Case]:
    example = [str(EXAMPLE)]
    return [
        Case("nested-json", "journald JSON, 2 lines 3,000 deep + a failing log", _nested_json),
        Case(
            "nested-json-pipe",
            "the same on stdin",
            lambda d: (_nested_json(d), ["-"])[1],
            stdin=lambda d: d / "j.log",
        ),
        Case("fifo", "a FIFO with a writer", _fifo, writer=_fifo_writer),
        Case("procsub", "`triage <(zcat x.gz)`", _procsub, shell=True),
        Case("line-200m", "one 200 MiB line, failure at its end", _long_line),
        Case(
            "line-200m-pipe",
            "the same on stdin",
            lambda d: (_long_line(d), ["-"])[1],
            stdin=lambda d: d / "long.log",
        ),
        Case(
            "dev-zero",
            f"/dev/zero as a path (killed at {endless_s:g} s)",
            lambda d: ["/dev/zero"],
            timeout=endless_s,
        ),
        Case(
            "dev-zero-stdin",
            f"/dev/zero on stdin (killed at {endless_s:g} s)",
            lambda d: ["-"],
            stdin=lambda d: Path("/dev/zero"),
            timeout=endless_s,
        ),
        Case(
            "gzip-bomb", f"{bomb_gib} GiB of zeros, .gz", lambda d: [str(_gzip_bomb(d, bomb_gib))]
        ),
        Case(
            "gzip-bomb-stdin",
            "the same on stdin",
            lambda d: (_gzip_bomb(d, bomb_gib), ["-"])[1],
            stdin=lambda d: d / "bomb.log.gz",
        ),
        Case(
            "zstd-bomb", f"{bomb_gib} GiB of zeros, .zst", lambda d: [str(_zstd_bomb(d, bomb_gib))]
        ),
        Case(
            "zstd-bomb-stdin",
            "the same on stdin",
            lambda d: (_zstd_bomb(d, bomb_gib), ["-"])[1],
            stdin=lambda d: d / "bomb.log.zst",
        ),
        Case(
            "gzip-bomb-cap16",
            "the .gz bomb with `--max-decompressed 16`",
            lambda d: [str(_gzip_bomb(d, bomb_gib))],
            extra=["--max-decompressed", "16"],
        ),
        Case("newline-bomb", "640 MiB of LF, .gz", _newline_bomb),
        Case("random", "10 MiB of random bytes", _random),
        Case(
            "bomb-and-log",
            "the .gz bomb and a failing log in one run",
            lambda d: [str(_gzip_bomb(d, bomb_gib)), *example],
        ),
    ]


def _make_in_a_child(name: str, workdir: Path, opts: argparse.Namespace) -> list[str]:
    """Build one input in a separate process: the kernel counts the RSS a process had before it
    exec'd `triage` into `triage`'s peak, so the measuring process must stay small."""
    proc = subprocess.run(
        [sys.executable, __file__, "--make", name, str(workdir), "--bomb-gib", str(opts.bomb_gib)],
        capture_output=True,
        text=True,
        check=True,
    )
    args: list[str] = json.loads(proc.stdout)
    return args


def run_case(
    case: Case, workdir: Path, env: dict[str, str], timeout: float, opts: argparse.Namespace
) -> dict[str, object]:
    args = _make_in_a_child(case.name, workdir, opts)
    cmd = [sys.executable, "-m", "triage", "--no-history", "-f", "json", *case.extra, *args]
    if case.shell:
        cmd = ["bash", "-c", "exec " + " ".join(cmd)]
    stdin_path = case.stdin(workdir)
    limit = case.timeout or timeout
    out_path, err_path = workdir / "stdout", workdir / "stderr"
    writer = (
        threading.Thread(target=case.writer, args=(workdir,), daemon=True) if case.writer else None
    )
    with (
        open(stdin_path or os.devnull, "rb") as stdin,
        open(out_path, "wb") as out,
        open(err_path, "wb") as err,
    ):
        start = time.monotonic()
        proc = subprocess.Popen(
            cmd, stdin=stdin, stdout=out, stderr=err, env=env, cwd=ROOT, start_new_session=True
        )
        if writer:
            writer.start()
        killed = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > limit:
                os.killpg(proc.pid, signal.SIGKILL)  # the group we started, by its id
                killed = True
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = err_path.read_text(errors="replace").replace(f"{workdir}/", "").strip().splitlines()
    outcome = _outcome(out_path.read_bytes(), stderr, killed, limit)
    return {
        "name": case.name,
        "what": case.what,
        "rc": "killed" if killed else proc.returncode,
        "rss_mb": usage.ru_maxrss / 1024,  # KiB on Linux
        "wall_s": wall,
        "outcome": outcome,
    }


def _outcome(stdout: bytes, stderr: list[str], killed: bool, limit: float) -> str:
    if killed:
        return f"killed at the {limit:g} s limit, still reading"
    try:
        report = json.loads(stdout)
    except ValueError:
        return (stderr[-1] if stderr else "no output")[:110]
    tops = [h["signature"] for h in report.get("hypotheses", [])[:1]]
    skipped = [
        f"{i['name'].rsplit('/', 1)[-1]}: {i['skipped']}"
        for i in report["inputs"]
        if i.get("skipped")
    ]
    notes = len(report.get("skipped", []))
    return (
        f"report: top {tops[0] if tops else 'none'}"
        + (f"; skipped {', '.join(skipped)}" if skipped else "")
        + (f"; {notes} note(s)" if notes else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="limit per finite input, s")
    parser.add_argument("--endless", type=float, default=10.0, help="limit for /dev/zero, s")
    parser.add_argument("--bomb-gib", type=int, default=10, help="size of the bombs, GiB")
    parser.add_argument("--only", help="comma-separated case names")
    parser.add_argument("--make", nargs=2, metavar=("NAME", "DIR"), help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.make:  # the child that builds one input (see _make_in_a_child)
        name, workdir = opts.make
        case = next(c for c in cases(opts.bomb_gib, opts.endless) if c.name == name)
        print(json.dumps(case.make(Path(workdir))))
        return
    home = Path(tempfile.mkdtemp(prefix="triage-hostile-"))
    env = dict(os.environ, XDG_DATA_HOME=str(home / "data"), XDG_CACHE_HOME=str(home / "cache"))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    try:
        # build the knowledge base cache once, outside the measurements
        subprocess.run(
            [sys.executable, "-m", "triage", "--no-history", str(EXAMPLE)],
            env=env,
            cwd=ROOT,
            capture_output=True,
            check=False,
        )
        wanted = set(opts.only.split(",")) if opts.only else None
        print("| input | what | exit | peak RSS | wall | outcome |")
        print("|---|---|---|---|---|---|")
        for case in cases(opts.bomb_gib, opts.endless):
            if wanted and case.name not in wanted:
                continue
            workdir = Path(tempfile.mkdtemp(dir=home))
            try:
                row = run_case(case, workdir, env, opts.timeout, opts)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            print(
                f"| {row['name']} | {row['what']} | {row['rc']} | {row['rss_mb']:.0f} MB "
                f"| {row['wall_s']:.2f} s | {row['outcome']} |",
                flush=True,
            )
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
