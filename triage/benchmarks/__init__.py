"""Benchmark-aware triage: read benchmark results, flag rows the harness made untrustworthy
(prefix-cache hits passed off as prefills, re-used prompts, failures, cliffs), keep them in an
invalid-row ledger, and plot TTFT against input length. `triage bench` is the command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage.benchmarks.checks import DEFAULT_CEILING_TPS, Thresholds, run_checks
from triage.benchmarks.model import Finding, Point, Request
from triage.benchmarks.parsers import BenchInputError, expand, load
from triage.benchmarks.server import ServerSummary, corroborate, from_logs

__all__ = [
    "DEFAULT_CEILING_TPS",
    "BenchInputError",
    "BenchReport",
    "Finding",
    "Point",
    "Request",
    "Thresholds",
    "analyze",
]

REPORT_SCHEMA = "triage.bench/1"


@dataclass
class BenchReport:
    inputs: list[Path]
    points: list[Point]
    findings: list[Finding]
    thresholds: Thresholds
    server: ServerSummary | None = None
    ledger: Path | None = None
    plot: Path | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> bool:
        """Exit status 1: anything above info was flagged."""
        return any(f.severity in ("error", "warning") for f in self.findings)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA,
            "inputs": [str(p) for p in self.inputs],
            "ceiling_tps": self.thresholds.ceiling_tps,
            "points": [
                {
                    "label": p.label,
                    "source": p.source,
                    "format": p.fmt,
                    "order": p.order,
                    "requests": len(p.requests),
                    "successful": p.n_success,
                    "total": p.n_total,
                    "concurrency": p.concurrency,
                    "request_rate": p.request_rate,
                    "seed": p.seed,
                    "input_len": p.typical_input_len,
                    "flagged_rows": sorted(
                        {
                            f.row
                            for f in self.findings
                            if f.point == p.label and f.row is not None and f.invalid
                        }
                    ),
                }
                for p in self.points
            ],
            "findings": [f.to_dict() for f in self.findings],
            "server": self.server.to_dict() if self.server else None,
            "ledger": str(self.ledger) if self.ledger else None,
            "plot": str(self.plot) if self.plot else None,
            "flagged": self.flagged,
            "notes": self.notes,
        }


def analyze(
    results: list[str], thresholds: Thresholds | None = None, server_logs: list[str] | None = None
) -> BenchReport:
    """Read the results (files or directories), run every check, corroborate with server logs."""
    t = thresholds or Thresholds()
    inputs = expand(results)
    if not inputs:
        raise BenchInputError("no benchmark result files (.json, .jsonl, .csv) found")
    points = load(results)
    findings = run_checks(points, t)
    report = BenchReport(inputs=inputs, points=points, findings=findings, thresholds=t)
    if server_logs:
        report.server = from_logs(server_logs)
        report.findings += corroborate(report.server, findings, ",".join(server_logs))
    return report
