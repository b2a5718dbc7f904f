"""A report as JUnit XML (`--format junit`), which Jenkins, GitLab, Buildkite and most CI systems
show as test results.

One `<testsuite name="triage">` holds one `<testcase>` per argument: a log file, or a run
directory with every log-like file under it (the inputs a directory expanded to are one test case,
as one benchmark run is one test). A test case fails with one `<failure>` per error-severity
hypothesis that has evidence in it (`type` is the signature id, `message` its title, the text the
evidence, the fixes to try and how to verify them), and one more `<failure type="unrecognized">`
when it has failure lines that no signature explains, so that a test case passes exactly when
triage would exit 0 on it alone. Warnings and notes go to `<system-out>`; an input that could not
be read is `<skipped>`. No `time` attribute: triage does not time inputs separately.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from triage.models import Hypothesis, Report, Unrecognized
from triage.redact import redact
from triage.textutil import neutralise

SUITE_NAME = "triage"
STDIN_NAME = "<stdin>"
EVIDENCE_LINES = 20
# Characters XML 1.0 cannot hold even escaped (neutralise already shows C0 and C1 controls).
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")


def _text(value: str) -> str:
    return _NOT_XML.sub("\ufffd", redact(neutralise(value)))


@dataclass
class _Case:
    name: str
    inputs: set[str]
    failures: list[Hypothesis] = field(default_factory=list)
    others: list[Hypothesis] = field(default_factory=list)
    unrecognized: list[Unrecognized] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _cases(report: Report, args: Sequence[str] | None) -> list[_Case]:
    """One case per argument; inputs a directory expanded to belong to that directory."""
    names = [i.name for i in report.inputs]
    cases: list[_Case] = []
    claimed: set[str] = set()
    for arg in args or ():
        if arg == "-":
            members = {n for n in names if n == STDIN_NAME}
        elif os.path.isdir(arg):
            prefix = str(Path(arg)) + os.sep
            members = {n for n in names if n.startswith(prefix)}
        else:
            members = {n for n in names if n == arg}
        members -= claimed
        if members:
            claimed |= members
            name = STDIN_NAME if arg == "-" else (arg.rstrip(os.sep) or arg)
            cases.append(_Case(name, members))
    cases.extend(_Case(n, {n}) for n in names if n not in claimed)
    return cases


def _failure_text(hyp: Hypothesis, inputs: set[str]) -> str:
    lines = [f"{hyp.signature} · layer {hyp.layer} · {hyp.severity} · score {hyp.score:.2f}"]
    evidence = [e for e in hyp.evidence if e.input in inputs]
    lines.extend(f"{e.input}:{e.line}: {e.text[:400]}" for e in evidence[:EVIDENCE_LINES])
    if len(evidence) > EVIDENCE_LINES:
        lines.append(f"... {len(evidence) - EVIDENCE_LINES} more evidence line(s)")
    if hyp.fixes:
        lines.append("What to try:")
        lines.extend(f"{i}. {f.do} ({f.confidence})" for i, f in enumerate(hyp.fixes, 1))
    if hyp.verify:
        lines.append("How to know it worked:")
        lines.extend(f"- {v}" for v in hyp.verify)
    return _text("\n".join(lines))


def render_junit(report: Report, args: Sequence[str] | None = None) -> str:
    cases = _cases(report, args)
    by_input = {n: c for c in cases for n in c.inputs}
    for hyp in report.hypotheses:
        touched = {
            by_input[e.input].name: by_input[e.input] for e in hyp.evidence if e.input in by_input
        }
        for case in touched.values():
            (case.failures if hyp.severity == "error" else case.others).append(hyp)
    for u in report.unrecognized:
        if u.input in by_input:
            by_input[u.input].unrecognized.append(u)
    for info in report.inputs:
        if info.skipped and info.name in by_input:
            by_input[info.name].skipped.append(f"{info.name}: {info.skipped}")

    failed = sum(1 for c in cases if c.failures or c.unrecognized)
    skipped = sum(1 for c in cases if c.skipped and not (c.failures or c.unrecognized))
    counts = {"tests": str(len(cases)), "failures": str(failed), "errors": "0"}
    root = ET.Element("testsuites", {"name": SUITE_NAME, **counts, "skipped": str(skipped)})
    suite = ET.SubElement(
        root, "testsuite", {"name": SUITE_NAME, **counts, "skipped": str(skipped)}
    )
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", {"name": "triage.scanner", "value": report.engine or ""})
    for case in cases:
        attrs = {"name": _text(case.name), "classname": SUITE_NAME}
        if case.name != STDIN_NAME:
            attrs["file"] = attrs["name"]
        el = ET.SubElement(suite, "testcase", attrs)
        for hyp in case.failures:
            fail = ET.SubElement(
                el, "failure", {"message": _text(hyp.title), "type": hyp.signature}
            )
            fail.text = _failure_text(hyp, case.inputs)
        if case.unrecognized:
            fail = ET.SubElement(
                el,
                "failure",
                {
                    "message": f"{len(case.unrecognized)} failure line(s) no signature explains",
                    "type": "unrecognized",
                },
            )
            fail.text = _text(
                "\n".join(f"{u.input}:{u.line}: {u.text[:400]}" for u in case.unrecognized)
            )
        if case.skipped and not (case.failures or case.unrecognized):
            ET.SubElement(el, "skipped", {"message": _text("; ".join(case.skipped))})
        notes = [f"{h.severity}: {h.signature}: {h.title}" for h in case.others] + [
            f"not read: {s}" for s in case.skipped if case.failures or case.unrecognized
        ]
        if notes:
            ET.SubElement(el, "system-out").text = _text("\n".join(notes))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_report(report: Report, out: TextIO, args: list[str] | None = None) -> None:
    out.write(render_junit(report, args))
