"""A report as Prometheus metrics in the text exposition format (`--format prom`), as the
node_exporter textfile collector and a Pushgateway read it.

Metrics (names and labels follow Prometheus' naming conventions: a `triage_` prefix, base units,
`_total` on the counter, labels of bounded cardinality: signature ids come from the knowledge
base, never from the log):

- `triage_hypothesis{signature,layer,severity}` gauge, 1 for each hypothesis of the last triage;
- `triage_unrecognized` gauge, salient error lines that no signature explains (those the message
  catalog located included: their ids are source locations, not bounded label values);
- `triage_last_run_timestamp_seconds` gauge, when the triage ran (Unix time);
- `triage_input_bytes_total` counter, bytes read (for one run, that run's bytes: it starts again
  with each run, as a process's counters do when it restarts; in `--follow` it only grows).
"""

from __future__ import annotations

import time
from typing import TextIO

from triage.models import Report

PREFIX = "triage_"


def escape_label(value: str) -> str:
    """A label value as the exposition format writes it: backslash, double quote and line feed
    escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{escape_label(v)}"' for k, v in pairs.items()) + "}"


def _family(name: str, kind: str, help_text: str, samples: list[str]) -> list[str]:
    return [f"# HELP {PREFIX}{name} {help_text}", f"# TYPE {PREFIX}{name} {kind}", *samples]


def _number(value: float) -> str:
    return repr(float(value)) if value != int(value) else str(int(value))


def render_prom(report: Report, *, now: float | None = None, input_bytes: int | None = None) -> str:
    """The metrics of one report. `input_bytes` overrides the report's own count (a follower
    counts every generation it read)."""
    now = time.time() if now is None else now
    seen: set[tuple[str, str, str]] = set()
    hypotheses = []
    # A line the message catalog located has an id made from a source location, tens of thousands
    # of them: counted with the unrecognized lines (no curated signature explains it), never a
    # label value, so the label set stays the knowledge base's.
    located = sum(1 for h in report.hypotheses if h.basis == "located")
    for hyp in report.hypotheses:
        if hyp.basis == "located":
            continue
        key = (hyp.signature, hyp.layer, hyp.severity)
        if key in seen:
            continue
        seen.add(key)
        labels = _labels({"signature": key[0], "layer": key[1], "severity": key[2]})
        hypotheses.append(f"{PREFIX}hypothesis{labels} 1")
    total = sum(i.bytes for i in report.inputs) if input_bytes is None else input_bytes
    lines = [
        *_family(
            "hypothesis",
            "gauge",
            "A hypothesis of the last triage (1), by signature id, layer and severity.",
            hypotheses,
        ),
        *_family(
            "unrecognized",
            "gauge",
            "Salient error lines of the last triage that no signature explains.",
            [f"{PREFIX}unrecognized {len(report.unrecognized) + located}"],
        ),
        *_family(
            "last_run_timestamp_seconds",
            "gauge",
            "When the last triage ran, in seconds since the Unix epoch.",
            [f"{PREFIX}last_run_timestamp_seconds {_number(round(now, 3))}"],
        ),
        *_family(
            "input_bytes_total",
            "counter",
            "Bytes of log read by the triage.",
            [f"{PREFIX}input_bytes_total {total}"],
        ),
    ]
    return "\n".join(lines) + "\n"


def write_report(report: Report, out: TextIO, args: list[str] | None = None) -> None:
    out.write(render_prom(report))
