"""Follow mode: appended lines, rotation by rename, truncation, stdin; each hypothesis once."""

from __future__ import annotations

import io
import json
import os
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from triage.api import Engine
from triage.follow import Follower, _PipeTail, run_follow

POLL = 0.02
HEALTHY = (
    "INFO 10-25 13:08:43 [loggers.py:123] Engine 000: Avg prompt throughput: 12.3 tokens/s, "
    "Running: 2 reqs, Waiting: 0 reqs\n"
)
ILLEGAL = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.10 GiB of which 1.25 GiB is free.\n"
)
NCCL = (
    "[rank0]:[E1129 18:43:39.855 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n"
)


class Collector(io.TextIOBase):
    """A thread-safe text sink that parses the JSON lines written to it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buf = ""
        self.events: list[dict[str, Any]] = []

    def write(self, s: str) -> int:
        with self._lock:
            self._buf += s
            while "\n" in self._buf:
                line, self._buf = self._buf.split("\n", 1)
                self.events.append(json.loads(line))
        return len(s)

    def hypotheses(self) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e["event"] == "hypothesis"]

    def wait_for(
        self, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = 15.0
    ) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if predicate(list(self.events)):
                    return
            time.sleep(0.01)
        raise AssertionError(
            f"timed out; events so far: {[e.get('signature', e) for e in self.events]}"
        )


def _signatures(events: list[dict[str, Any]]) -> list[str]:
    return [e["signature"] for e in events if e["event"] == "hypothesis"]


def _lines_of(events: list[dict[str, Any]], signature: str) -> set[int]:
    return {ev["line"] for e in events if e.get("signature") == signature for ev in e["evidence"]}


def _sig_for(engine: Engine, tmp_path: Path, line: str) -> str:
    """The top signature the batch engine gives for one failure line (the test's oracle)."""
    path = tmp_path / f"oracle-{abs(hash(line))}.log"
    path.write_text(line)
    report = engine.run([str(path)])
    assert report.hypotheses, line
    return report.hypotheses[0].signature


def _start(
    args: list[str], engine: Engine, out: Collector, **kw: Any
) -> tuple[threading.Thread, threading.Event, list[int]]:
    stop = threading.Event()
    rc: list[int] = []
    thread = threading.Thread(
        target=lambda: rc.append(
            run_follow(args, engine, out, poll_interval=POLL, stop=stop, **kw)
        ),
        daemon=True,
    )
    thread.start()
    return thread, stop, rc


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()


def test_follow_file_append_rotate_truncate(engine: Engine, tmp_path: Path) -> None:
    sig_illegal = _sig_for(engine, tmp_path, ILLEGAL)
    sig_oom = _sig_for(engine, tmp_path, OOM)
    sig_nccl = _sig_for(engine, tmp_path, NCCL)
    log = tmp_path / "server.log"
    log.write_text(HEALTHY * 3)
    out = Collector()
    thread, stop, rc = _start([str(log)], engine, out)
    try:
        # generation 1: a failure appended to a growing file, then repeated
        _append(log, HEALTHY + ILLEGAL)
        out.wait_for(lambda ev: sig_illegal in _signatures(ev))
        _append(log, ILLEGAL * 5 + HEALTHY)
        # a line written in two pieces is matched once it is complete, not before
        _append(log, OOM[:40])
        time.sleep(POLL * 10)
        assert sig_oom not in _signatures(out.events)
        _append(log, OOM[40:])
        out.wait_for(lambda ev: sig_oom in _signatures(ev))
        assert _lines_of(out.events, sig_illegal) == {5}
        assert _lines_of(out.events, sig_oom) == {12}

        # generation 2: logrotate renames the file away and a new one appears under the name
        os.rename(log, tmp_path / "server.log.1")
        _append(tmp_path / "server.log.1", HEALTHY)  # the writer still has the old file open
        log.write_text(HEALTHY + ILLEGAL)
        out.wait_for(lambda ev: _signatures(ev).count(sig_illegal) == 2)
        illegal_events = [e for e in out.hypotheses() if e["signature"] == sig_illegal]
        assert {ev["line"] for ev in illegal_events[1]["evidence"]} == {2}

        # generation 3: copytruncate empties the file in place
        with log.open("r+") as fh:
            fh.truncate(0)
        out.wait_for(lambda ev: any("truncated" in e.get("message", "") for e in ev))
        _append(log, NCCL)
        out.wait_for(lambda ev: sig_nccl in _signatures(ev))
        nccl_event = next(e for e in out.hypotheses() if e["signature"] == sig_nccl)
        assert 1 in {ev["line"] for ev in nccl_event["evidence"]}
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
    sigs = _signatures(out.events)
    # once per generation: illegal in generations 1 and 2, oom in 1, nccl in 3
    assert sigs.count(sig_illegal) == 2
    assert sigs.count(sig_oom) == 1
    assert sigs.count(sig_nccl) == 1
    assert all(e["input"] == str(log) for e in out.events if "input" in e)
    notices = [e["message"] for e in out.events if e["event"] == "notice"]
    assert any("rotated" in m for m in notices) and any("truncated" in m for m in notices)
    assert out.events[-1]["event"] == "end"
    assert rc == [1]


def test_follow_waits_for_a_missing_file(engine: Engine, tmp_path: Path) -> None:
    sig = _sig_for(engine, tmp_path, ILLEGAL)
    log = tmp_path / "later.log"
    out = Collector()
    thread, stop, _ = _start([str(log)], engine, out)
    try:
        out.wait_for(lambda ev: any(e["event"] == "notice" for e in ev))
        log.write_text(HEALTHY + ILLEGAL)
        out.wait_for(lambda ev: sig in _signatures(ev))
    finally:
        stop.set()
        thread.join(timeout=10)
    assert _signatures(out.events).count(sig) == 1


def test_follow_stdin_pipe(engine: Engine, tmp_path: Path) -> None:
    sig_illegal = _sig_for(engine, tmp_path, ILLEGAL)
    sig_oom = _sig_for(engine, tmp_path, OOM)
    r, w = os.pipe()
    out = Collector()
    with os.fdopen(r, "rb", buffering=0) as reader:
        thread, stop, rc = _start(["-"], engine, out, stdin=reader)
        with os.fdopen(w, "wb", buffering=0) as writer:
            for i in range(30):
                writer.write(HEALTHY.encode())
                if i == 10:
                    writer.write(ILLEGAL.encode("utf-8").replace(b"\n", b"\r\n"))
                    out.wait_for(lambda ev: sig_illegal in _signatures(ev))
                if i in (12, 13, 14):
                    writer.write(ILLEGAL.encode())
            writer.write(OOM.encode()[:-1])  # the last line has no line break: flushed at EOF
        thread.join(timeout=15)  # EOF ends follow mode on its own
    assert not thread.is_alive()
    sigs = _signatures(out.events)
    assert sigs.count(sig_illegal) == 1
    assert sigs.count(sig_oom) == 1
    assert _lines_of(out.events, sig_illegal) == {12}
    assert _lines_of(out.events, sig_oom) == {35}
    assert out.events[-1] == {"event": "end", "input": "<stdin>", "reason": "eof", "lines_read": 35}
    assert rc == [1]
    del stop


def test_follow_events_are_jsonl_with_hypothesis_fields(engine: Engine, tmp_path: Path) -> None:
    out = Collector()
    rc = run_follow(
        ["-"], engine, out, poll_interval=POLL, stdin=io.BytesIO((HEALTHY + OOM).encode())
    )
    hyps = out.hypotheses()
    assert hyps and rc == 1
    for event in hyps:
        for key in (
            "signature",
            "title",
            "layer",
            "severity",
            "status",
            "score",
            "evidence",
            "fixes",
            "rank",
            "input",
            "time",
        ):
            assert key in event


def test_follow_output_escapes_controls(engine: Engine) -> None:
    buf = io.StringIO()
    payload = "\u202e\x9b2J\x07"
    run_follow(
        ["-"],
        engine,
        buf,
        poll_interval=POLL,
        stdin=io.BytesIO((ILLEGAL.rstrip("\n") + payload + "\n").encode()),
    )
    text = buf.getvalue()
    assert all(ch == "\n" or 0x20 <= ord(ch) < 0x7F for ch in text)
    events = [json.loads(x) for x in text.splitlines()]
    assert any(
        payload in ev["text"] for e in events if e["event"] == "hypothesis" for ev in e["evidence"]
    )


def test_follow_rejects_a_directory(engine: Engine, tmp_path: Path) -> None:
    buf = io.StringIO()
    assert run_follow([str(tmp_path)], engine, buf, poll_interval=POLL) == 2
    assert json.loads(buf.getvalue())["event"] == "error"


def test_follow_memory_is_bounded(engine: Engine) -> None:
    """Hours of input in miniature: 120k lines, a failure every 50; the state stays small."""
    events: list[dict[str, Any]] = []
    chunk = (HEALTHY * 49 + ILLEGAL).encode()  # ~4 kB
    blocks = 2400  # ~10 MB, 120k lines

    class Feed(io.RawIOBase):
        def __init__(self) -> None:
            self.left = blocks

        def readable(self) -> bool:
            return True

        def read1(self, size: int = -1) -> bytes:
            if self.left == 0:
                return b""
            self.left -= 1
            return chunk

    stop = threading.Event()
    follower = Follower(engine, "<stdin>", _PipeTail(Feed(), POLL, stop), events.append)  # type: ignore[arg-type]
    tracemalloc.start()
    try:
        follower.run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert follower.generation is not None
    result = follower.generation.matcher.result
    assert follower.generation.source.lines == blocks * 50
    assert sum(result.counts.values()) >= blocks  # every failure line was counted...
    assert len(result.hits) <= 200 * len(result.counts)  # ...but only a bounded number kept
    assert len([e for e in events if e["event"] == "hypothesis"]) >= 1
    assert peak < 40 << 20, f"peak traced memory {peak >> 20} MiB"


@pytest.mark.parametrize("n", [3])
def test_follow_two_files_at_once(engine: Engine, tmp_path: Path, n: int) -> None:
    sig = _sig_for(engine, tmp_path, ILLEGAL)
    logs = [tmp_path / f"w{i}.log" for i in range(n)]
    for p in logs:
        p.write_text(HEALTHY)
    out = Collector()
    thread, stop, _ = _start([str(p) for p in logs], engine, out)
    try:
        for p in logs:
            _append(p, ILLEGAL)
        out.wait_for(lambda ev: _signatures(ev).count(sig) == n)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert sorted(e["input"] for e in out.hypotheses() if e["signature"] == sig) == sorted(
        str(p) for p in logs
    )
