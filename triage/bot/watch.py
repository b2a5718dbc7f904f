"""Follow a results tree and triage each run directory that finishes with a failure.

A run is finished when it has an exit-status file, or a bench result JSON, or when nothing in it
changed for `settle` seconds. Each finished run is triaged once per change (its newest file time is
remembered); failed runs get `triage.md` and `triage.json`, and the optional `notify` callback
(post to a forge issue, or to a webhook URL) is called with the result.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from triage.api import Engine
from triage.bot.diagnose import redact_obj
from triage.bot.rundir import (
    EXIT_FILES,
    OUTPUTS,
    RunResult,
    is_run_dir,
    run_files,
    triage_run,
    write_outputs,
)
from triage.redact import redact
from triage.safewrite import ForeignFileError

MAX_DEPTH = 6


def find_runs(root: Path) -> list[Path]:
    """Run directories under root (root itself included), at most MAX_DEPTH levels down."""
    runs: list[Path] = []
    base = len(root.resolve().parts)
    for current, dirs, _files in os.walk(root):
        path = Path(current)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if len(path.resolve().parts) - base >= MAX_DEPTH:
            dirs[:] = []
        if is_run_dir(path):
            runs.append(path)
    return runs


def newest_mtime(run_dir: Path) -> float:
    times = [p.stat().st_mtime for p in run_files(run_dir)]
    return max(times, default=0.0)


def is_finished(run_dir: Path, settle: float, now: float | None = None) -> bool:
    if any((run_dir / n).is_file() for n in EXIT_FILES):
        return True
    if any(p.suffix == ".json" and p.name not in OUTPUTS for p in run_dir.iterdir() if p.is_file()):
        return True
    now = time.time() if now is None else now
    return now - newest_mtime(run_dir) >= settle


def post_webhook(url: str, result: RunResult, timeout: float = 20.0) -> int:
    """POST a redacted JSON summary of a failed run to url; returns the HTTP status."""
    report = result.diagnosis.report
    top = report.hypotheses[0] if report.hypotheses else None
    payload = redact_obj(
        {
            "run": result.run_dir.name,
            "failed": result.failed,
            "signature": top.signature if top else None,
            "title": top.title if top else None,
            "markdown": result.diagnosis.markdown,
        }
    )
    data = redact(json.dumps(payload)).encode("utf-8")
    req = urllib.request.Request(
        url,
        data=data,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "triage-bot/1"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return int(resp.status)


class Watcher:
    def __init__(
        self,
        engine: Engine,
        root: Path,
        *,
        settle: float = 60.0,
        notify: Callable[[RunResult], None] | None = None,
        echo: Callable[[str], None] = print,
        history_db: Path | None = None,
    ) -> None:
        self.engine = engine
        self.root = root
        self.settle = settle
        self.notify = notify
        self.echo = echo
        self.done: dict[Path, float] = {}
        self.history_db = history_db

    def scan_once(self) -> list[RunResult]:
        """Triage every finished run not seen in its current state; returns the failed ones."""
        failed: list[RunResult] = []
        for run in find_runs(self.root):
            stamp = newest_mtime(run)
            if self.done.get(run) == stamp or not is_finished(run, self.settle):
                continue
            out = run / "triage.json"
            if out.is_file() and out.stat().st_mtime >= stamp:
                self.done[run] = stamp
                continue
            result = triage_run(self.engine, run, write=False, history_db=self.history_db)
            self.done[run] = stamp
            if not result.failed:
                continue
            try:
                write_outputs(result)
            except ForeignFileError as exc:  # a user's own triage.md: leave it, say so
                self.echo(f"{run}: not written: {exc}")
                continue
            top = result.diagnosis.report.hypotheses
            name = top[0].signature if top else "unrecognized failure"
            self.echo(f"{run}: {name} -> {run / 'triage.md'}")
            if self.notify is not None:
                try:
                    self.notify(result)
                except Exception as exc:  # a failed notification never stops the watch
                    self.echo(f"{run}: notify failed: {type(exc).__name__}: {exc}")
            failed.append(result)
        return failed

    def run(self, interval: float = 10.0, once: bool = False) -> None:
        while True:
            self.scan_once()
            if once:
                return
            time.sleep(interval)
