"""The invalid-row ledger: one CSV line per flagged row (or whole point), beside the results.

The results files are only read; the ledger is the one file written, and never one of the inputs.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from triage.benchmarks.model import Finding

LEDGER_NAME = "triage_invalid_rows.csv"
COLUMNS = (
    "file",
    "point",
    "row",
    "reason",
    "severity",
    "input_len",
    "ttft_s",
    "implied_prefill_tps",
    "ceiling_tps",
    "evidence",
    "message",
)


def default_path(results: list[Path]) -> Path:
    first = results[0]
    base = first if first.is_dir() else first.parent
    return base / LEDGER_NAME


def write(path: Path, findings: list[Finding], inputs: list[Path]) -> int:
    """Write the ledger; returns the number of lines. Refuses to overwrite an input file."""
    resolved = {p.resolve() for p in inputs}
    if path.resolve() in resolved:
        raise ValueError(f"{path} is one of the results files; the ledger never overwrites results")
    rows = [f for f in findings if f.invalid]
    from triage.safewrite import check_target, starts_with

    # a user's own CSV at --ledger is never replaced (ForeignFileError: one line, exit 2)
    check_target(path, "a triage invalid-row ledger", starts_with(",".join(COLUMNS).encode()))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        for f in rows:
            ev = f.evidence
            rest = {
                k: v
                for k, v in ev.items()
                if k not in ("input_len", "ttft_s", "implied_prefill_tps", "ceiling_tps")
            }
            w.writerow(
                [
                    f.source,
                    f.point,
                    "all" if f.row is None else f.row,
                    f.check,
                    f.severity,
                    _cell(ev.get("input_len")),
                    _cell(ev.get("ttft_s")),
                    _cell(ev.get("implied_prefill_tps")),
                    _cell(ev.get("ceiling_tps")),
                    json.dumps(rest, sort_keys=True, default=str) if rest else "",
                    f.message,
                ]
            )
    return len(rows)


def _cell(value: object) -> str:
    return "" if value is None else str(value)
