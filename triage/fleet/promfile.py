"""Prometheus textfiles for node_exporter's textfile collector, written atomically.

The collector reads every `*.prom` file of its directory at each scrape, so a file must never be
seen half written: the text goes to a temporary file in the same directory (same file system,
and a name the collector ignores), is flushed to disk, and is renamed over the target, which
POSIX makes atomic. `triage --follow --prom-textfile PATH` keeps the file current: each follower
takes a snapshot of its report after the segments it reads (at most every `interval` seconds, in
its own thread, where the matcher lives), and a writer thread rewrites the file from the latest
snapshots every `interval` seconds, so `triage_last_run_timestamp_seconds` says the follower is
alive even when the log is quiet.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TextIO

from triage.api import Engine
from triage.follow import Follower, run_follow
from triage.models import Report
from triage.render.prom import render_prom

DEFAULT_INTERVAL = 5.0


def write_textfile(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically (temporary file in the same directory, then rename)."""
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; the collector may run as another user
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def report_textfile(path: Path, report: Report) -> bool:
    """Write a report's metrics to `path`; False (and one line on stderr) when it cannot."""
    try:
        write_textfile(path, render_prom(report))
    except OSError as exc:
        print(f"triage: {path}: {exc.strerror or exc}", file=sys.stderr)
        return False
    return True


class FollowTextfile:
    """Keeps a textfile of the followed inputs' metrics current (see the module docstring)."""

    def __init__(self, path: Path, interval: float = DEFAULT_INTERVAL) -> None:
        self.path = path
        self.interval = interval
        self._lock = threading.Lock()
        self._reports: dict[str, Report] = {}
        self._bytes: dict[str, int] = {}
        self._taken: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def observe(self, follower: Follower, final: bool) -> None:
        now = time.monotonic()
        if not final and now - self._taken.get(follower.name, -self.interval) < self.interval:
            with self._lock:
                self._bytes[follower.name] = follower.bytes_read
            return
        report = follower.snapshot()
        with self._lock:
            self._taken[follower.name] = now
            self._reports[follower.name] = report
            self._bytes[follower.name] = follower.bytes_read

    def combined(self) -> tuple[Report, int]:
        with self._lock:
            reports = list(self._reports.values())
            total = sum(self._bytes.values())
        merged = Report(inputs=[i for r in reports for i in r.inputs])
        merged.hypotheses = [h for r in reports for h in r.hypotheses]
        merged.unrecognized = [u for r in reports for u in r.unrecognized]
        return merged, total

    def write(self) -> None:
        report, total = self.combined()
        write_textfile(self.path, render_prom(report, input_bytes=total))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.write()
            except OSError as exc:  # a full disk must not stop the follower
                print(f"triage: note: {self.path}: {exc.strerror or exc}", file=sys.stderr)

    def start(self) -> None:
        self.write()
        self._thread = threading.Thread(target=self._loop, name="prom-textfile", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.write()


def follow_textfile(
    path: Path,
    args: list[str],
    engine: Engine,
    out: TextIO,
    *,
    interval: float = DEFAULT_INTERVAL,
    stop: threading.Event | None = None,
) -> int:
    """`triage --follow --prom-textfile PATH`: follow as usual, and keep PATH current."""
    textfile = FollowTextfile(path, interval)
    try:
        textfile.start()
    except OSError as exc:
        print(f"triage: {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        return run_follow(args, engine, out, stop=stop, observe=textfile.observe)
    finally:
        textfile.stop()
