"""Triage a benchmark run directory and write `triage.md` and `triage.json` beside its files.

A run directory in the campaign style holds `server.log`, the launch command (`cmd.sh`), client
output, needle/gate logs, bench JSON (`vllm bench serve --save-result`) and, when present, `dmesg`.
Logs are scanned as they are; the launch command is read as text (`shlex`, never run); bench JSON is
read for its counters and per-request errors, which are scanned too. The outputs are redacted and
written atomically (temporary file, then rename).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triage.api import Engine
from triage.bot.diagnose import Diagnosis, TextInput, diagnose, report_json
from triage.read import is_log_like
from triage.safewrite import check_target, write_atomic

OUTPUTS = ("triage.md", "triage.json")
COMMAND_FILES = ("cmd.sh", "launch.sh", "command.txt", "cmd.txt", "run.sh")
EXIT_FILES = ("exit_code", "exit_status", "rc", "returncode", "status")
MAX_JSON = 64 << 20
MAX_FILES = 200
_LAUNCH = re.compile(
    r"vllm\s+serve|vllm\.entrypoints|sglang\.launch_server|sglang\s+serve|trtllm-serve"
)


@dataclass
class RunResult:
    run_dir: Path
    diagnosis: Diagnosis
    failed: bool
    written: list[Path]


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and (
        (path / "server.log").is_file() or any((path / n).is_file() for n in COMMAND_FILES)
    )


def run_files(run_dir: Path) -> list[Path]:
    """The run's files (our own outputs excluded), in a stable order, at most MAX_FILES."""
    found: list[Path] = []
    for root, dirs, files in os.walk(run_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            p = Path(root) / name
            if (Path(root) == run_dir and name in OUTPUTS) or name.startswith("."):
                continue
            if p.is_file() and not p.is_symlink():
                found.append(p)
    return found[:MAX_FILES]


def launch_command(text: str) -> str | None:
    """The serving command from a launch script, as words joined back (read, never executed)."""
    joined = re.sub(r"\\\n", " ", text)
    for line in joined.splitlines():
        if _LAUNCH.search(line) and not line.lstrip().startswith("#"):
            try:
                words = shlex.split(line, comments=True)
            except ValueError:
                words = line.split()
            return " ".join(words)[:1000]
    return None


def bench_summary(data: Any) -> tuple[dict[str, Any], list[str]]:
    """Counters of a bench result and its per-request error strings."""
    if not isinstance(data, dict):
        return {}, []
    summary: dict[str, Any] = {}
    for key in (
        "completed",
        "failed",
        "num_prompts",
        "request_throughput",
        "output_throughput",
        "total_input_tokens",
        "duration",
        "mean_ttft_ms",
        "max_concurrency",
    ):
        value = data.get(key)
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            summary[key] = value
    errors = (
        [str(e) for e in data.get("errors") or [] if e]
        if isinstance(data.get("errors"), list)
        else []
    )
    if errors:
        summary["errors"] = len(errors)
    return summary, errors[:200]


def triage_run(
    engine: Engine, run_dir: Path, *, write: bool = True, history_db: Path | None = None
) -> RunResult:
    """Triage one run directory; write `triage.md` and `triage.json` into it when `write`."""
    run_dir = run_dir.resolve()
    files: list[tuple[str, Path]] = []
    texts: list[TextInput] = []
    facts: dict[str, Any] = {"dir": run_dir.name}
    bench: dict[str, Any] = {}
    exit_code: int | None = None
    for path in run_files(run_dir):
        rel = str(path.relative_to(run_dir))
        name = path.name.lower()
        if name in EXIT_FILES:
            raw = path.read_text(encoding="utf-8", errors="replace")[:100].strip()
            if raw.lstrip("-").isdigit():
                exit_code = int(raw)
            elif raw.lower() in ("failed", "failure", "error", "timeout", "killed"):
                exit_code = 1
            continue
        if name.endswith(".json") and path.stat().st_size <= MAX_JSON:
            try:
                data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
            except ValueError:
                data = None
            if isinstance(data, dict):
                summary, errors = bench_summary(data)
                if summary:
                    bench[rel] = summary
                if errors:
                    texts.append(TextInput(f"{rel} (errors)", "\n".join(errors) + "\n"))
                continue
        if name in COMMAND_FILES:
            cmd = launch_command(path.read_text(encoding="utf-8", errors="replace")[: 1 << 20])
            if cmd:
                facts["launch_command"] = cmd
        if is_log_like(path) or name.startswith("dmesg") or name in COMMAND_FILES:
            files.append((rel, path))
    if bench:
        facts["bench"] = bench
    if exit_code is not None:
        facts["exit_code"] = exit_code
    diag = diagnose(
        engine,
        texts,
        key=f"run:{run_dir.name}",
        files=files,
        extra_facts={"run": facts},
        history_db=history_db,
    )
    bench_failed = any(
        (isinstance(s.get("failed"), int) and s["failed"] > 0)
        or (isinstance(s.get("completed"), int) and s["completed"] == 0)
        for s in bench.values()
    )
    failed = diag.report.failed or bench_failed or bool(exit_code)
    result = RunResult(run_dir=run_dir, diagnosis=diag, failed=failed, written=[])
    if write:
        write_outputs(result)
    return result


def write_outputs(result: RunResult) -> None:
    """Write `triage.md` and `triage.json` (redacted) into the run directory, atomically. A file
    of that name that triage did not write (a user's own notes, another tool's JSON) is never
    replaced: ForeignFileError, before either file is written."""
    outputs = (
        ("triage.md", result.diagnosis.markdown, "a triage comment", _is_triage_markdown),
        ("triage.json", report_json(result.diagnosis.report), "a triage report", _is_report),
    )
    for fname, _, what, is_ours in outputs:
        check_target(result.run_dir / fname, what, is_ours)
    for fname, content, _, _ in outputs:
        target = result.run_dir / fname
        write_atomic(target, content)
        result.written.append(target)


def _is_triage_markdown(_path: Path, head: bytes) -> bool:
    return head.startswith((b"<!-- triage-bot -->", b"<!-- triage-bot v"))  # a comment's marker


def _is_report(_path: Path, head: bytes) -> bool:
    return head.lstrip().startswith(b"{") and b'"schema": "triage.report/' in head[:256]
