"""Hostile inputs (reliability audit F1-F3, issue 17 points 4 and 5): no input costs the report of
the others, streams that cannot seek are read, JSON nesting is bounded, memory stays bounded on
lines that never end and on decompression bombs.

Each test failed on main before the fix (a RecursionError or UnsupportedOperation ending the run,
a 64 MiB line held whole, a bomb inflated to the size limit)."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from triage.api import Engine, InputSpec
from triage.read import MAX_LINE, InputError, Source, iter_segments, read_source

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "vllm-kv-cache-oom.log"
TOP = "kv-cache-no-memory"
DEEP = '{"MESSAGE":' + "[" * 3000 + "]" * 3000 + "}"


def _journal(text: str) -> list[str]:
    return [
        json.dumps({"MESSAGE": line, "SYSLOG_IDENTIFIER": "vllm", "_PID": "4242"})
        for line in text.splitlines()
    ]


def _cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "triage", "--no-history", "-f", "json", *args],
        input=stdin,
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


# -- F1: a journald line nested 3,000 deep -------------------------------------------------------


@pytest.mark.parametrize("where", ["first", "middle"])
def test_deeply_nested_json_line_is_plain_text_and_the_log_is_triaged(
    engine: Engine, tmp_path: Path, where: str
) -> None:
    lines = _journal(EXAMPLE.read_text())
    lines.insert(0 if where == "first" else 5, DEEP)
    path = tmp_path / "journal.log"
    path.write_text("\n".join(lines) + "\n")
    report = engine.run([str(path)])
    assert report.hypotheses[0].signature == TOP
    assert report.inputs[0].format.startswith(("json-lines", "journal"))
    assert report.inputs[0].lines == len(lines)  # line numbers still point at the input
    assert any("nested deeper than" in s["reason"] for s in report.skipped)


def test_deeply_nested_json_from_a_pipe_through_the_cli() -> None:
    lines = _journal(EXAMPLE.read_text())
    body = "\n".join([DEEP, *lines[:8], DEEP, *lines[8:]]) + "\n"
    proc = _cli("-", stdin=body.encode())
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["hypotheses"][0]["signature"] == TOP


# -- F3: FIFOs and process substitution ------------------------------------------------------------


def test_a_fifo_is_read_as_a_stream(engine: Engine, tmp_path: Path) -> None:
    fifo = tmp_path / "server.fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as fh:
            fh.write(EXAMPLE.read_bytes())

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    report = engine.run([str(fifo)])
    writer.join(10)
    assert report.hypotheses[0].signature == TOP
    assert report.inputs[0].skipped is None


def test_a_gzip_fifo_is_decompressed_without_seeking(engine: Engine, tmp_path: Path) -> None:
    fifo = tmp_path / "server.log.gz"
    os.mkfifo(fifo)
    data = gzip.compress(EXAMPLE.read_bytes())

    def write() -> None:
        with open(fifo, "wb") as fh:
            for i in range(0, len(data), 3):  # a writer that splits even the magic
                fh.write(data[i : i + 3])
                fh.flush()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    report = engine.run([str(fifo)])
    writer.join(10)
    assert report.hypotheses[0].signature == TOP


def test_process_substitution(tmp_path: Path) -> None:
    gz = tmp_path / "x.log.gz"
    gz.write_bytes(gzip.compress(EXAMPLE.read_bytes()))
    cmd = f"exec {sys.executable} -m triage --no-history -f json <(zcat {gz})"
    proc = subprocess.run(
        ["bash", "-c", cmd],
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["hypotheses"][0]["signature"] == TOP


# -- degrade, never drop ---------------------------------------------------------------------------


class _FailingStream:
    """A stream that breaks after its first read (a closed pipe, a decoder error)."""

    def __init__(self, first: bytes) -> None:
        self._first: bytes | None = first

    def read(self, size: int = -1) -> bytes:
        if self._first is not None:
            out, self._first = self._first, None
            return out
        raise ValueError("I/O operation on closed file")


def test_an_input_that_fails_midway_is_skipped_with_its_reason(engine: Engine) -> None:
    good = io.BytesIO(EXAMPLE.read_bytes())
    broken = _FailingStream(b"INFO starting\nINFO loading weights\n")
    report = engine.run_inputs(
        [
            InputSpec("broken.log", stream=broken),  # type: ignore[arg-type]
            InputSpec("server.log", stream=good),
        ]
    )
    assert report.hypotheses[0].signature == TOP
    info = {i.name: i for i in report.inputs}
    assert info["broken.log"].skipped == "failed"
    assert "ValueError: I/O operation on closed file" in (info["broken.log"].skip_reason or "")
    assert info["server.log"].skipped is None and info["server.log"].skip_reason is None
    assert any(s["input"] == "broken.log" and "failed" in s["reason"] for s in report.skipped)


def test_an_unreadable_input_among_others_keeps_its_reason(tmp_path: Path) -> None:
    import socket

    sock_path = tmp_path / "a.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    try:
        proc = _cli(str(sock_path), str(EXAMPLE))
    finally:
        sock.close()
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    first = report["inputs"][0]
    assert first["skipped"] == "unreadable" and "not a regular file" in first["skip_reason"]
    assert report["hypotheses"][0]["signature"] == TOP
    import jsonschema  # type: ignore[import-untyped]

    schema = json.loads((ROOT / "schemas" / "report.schema.json").read_text())
    jsonschema.validate(report, schema)


# -- F2: bounded memory on lines that never end ----------------------------------------------------


class _Zeros:
    """/dev/zero, bounded: `total` NUL bytes, no line break."""

    def __init__(self, total: int) -> None:
        self.left = total

    def read(self, size: int = -1) -> bytes:
        n = min(size, self.left)
        self.left -= n
        return b"\0" * n


def test_a_line_that_never_ends_is_held_at_most_at_the_cap() -> None:
    source = Source(name="zeros")
    largest = 0
    for seg in iter_segments(_Zeros(96 << 20), source):
        largest = max(largest, len(seg.data))
    assert largest <= MAX_LINE + 200  # the cap, its marker and line break
    assert source.lines == 1 and source.bytes == 96 << 20
    assert any("cut for matching" in note for note in source.notes)


@pytest.mark.parametrize("via", ["file", "pipe"])
def test_a_failure_at_the_end_of_a_huge_line_is_still_found(
    engine: Engine, tmp_path: Path, via: str
) -> None:
    failure = next(x for x in EXAMPLE.read_text().splitlines() if "No available memory" in x)
    body = b"x" * (8 << 20) + b" " + failure.encode() + b"\nINFO after\n"
    if via == "file":
        path = tmp_path / "long.log"
        path.write_bytes(body)
        report = engine.run([str(path)])
    else:
        report = engine.run_inputs([InputSpec("<stdin>", stream=io.BytesIO(body))])
    assert report.hypotheses[0].signature == TOP
    assert report.hypotheses[0].evidence[0].line == 1
    assert report.inputs[0].lines == 2
    assert any("cut for matching" in s["reason"] for s in report.skipped)


def test_dev_zero_on_stdin_stays_small(tmp_path: Path) -> None:
    """Run for a few seconds on /dev/zero, then stopped: its peak RSS is what `triage` held."""
    script = (
        "import resource, subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-m', 'triage', '--no-history', '-'],"
        " stdin=open('/dev/zero', 'rb'), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "time.sleep(4); p.kill(); p.wait()\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        cwd=ROOT,
        timeout=120,
        check=True,
    )
    peak_mib = int(proc.stdout.strip()) / 1024
    assert peak_mib < 200, f"peak RSS {peak_mib:.0f} MiB"


# -- F2: decompression bombs refused on the stream ---------------------------------------------------


def _gzip_bomb(path: Path, mib: int) -> None:
    member = gzip.compress(b"\0" * (64 << 20), compresslevel=9)
    path.write_bytes(member * (mib // 64))


def _zstd_bomb(path: Path, mib: int) -> None:
    import zstandard

    zeros = b"\0" * (64 << 20)
    with open(path, "wb") as fh, zstandard.ZstdCompressor(level=3).stream_writer(fh) as out:
        for _ in range(mib // 64):
            out.write(zeros)


@pytest.mark.parametrize("kind", ["gz", "zst"])
@pytest.mark.parametrize("via", ["file", "stdin"])
def test_a_bomb_is_refused_by_its_ratio_long_before_the_size_limit(
    tmp_path: Path, kind: str, via: str
) -> None:
    path = tmp_path / f"bomb.log.{kind}"
    (_gzip_bomb if kind == "gz" else _zstd_bomb)(path, 1024)  # 1 GiB of zeros
    start = time.monotonic()
    with open(path, "rb") as fh:
        if via == "file":
            source, segments = read_source(path.name, path)
        else:
            source, segments = read_source("<stdin>", None, stdin=io.BufferedReader(fh))
        with pytest.raises(InputError, match="compression ratio"):
            for _ in segments:
                pass
    assert source.bytes <= 80 << 20  # refused after 32-64 MiB, not 1 GiB (nor 4 GiB)
    assert time.monotonic() - start < 30  # generous: a loaded CI machine; typically 0.3 s


def test_max_decompressed_still_limits_a_repetitive_log(tmp_path: Path) -> None:
    path = tmp_path / "small.log.gz"
    path.write_bytes(gzip.compress(EXAMPLE.read_bytes() * 2000))  # 3.3 MB, far below the check
    _, segments = read_source(path.name, path, max_decompressed=1 << 20)
    with pytest.raises(InputError, match="exceeds the limit of 1 MiB"):
        list(segments)


def test_a_bomb_among_inputs_costs_only_itself(engine: Engine, tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.log.gz"
    _gzip_bomb(bomb, 256)
    report = engine.run([str(bomb), str(EXAMPLE)])
    assert report.hypotheses[0].signature == TOP
    first = report.inputs[0]
    assert first.skipped == "refused" and "compression ratio" in (first.skip_reason or "")
