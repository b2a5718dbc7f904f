"""A report as GitHub Actions workflow commands (`--format gha`) and a job summary.

Each evidence line of an error-severity hypothesis becomes an `::error` annotation pointing at
its file and line (`::error file=F,line=N,title=T::message`); warnings become `::warning`, other
severities and unexplained failure lines `::notice`. GitHub shows at most 10 annotations of each
kind per step, so each kind stops at 10, best hypothesis first, and one more notice says how many
were left out. When `GITHUB_STEP_SUMMARY` names a file, the Markdown report (the bot's renderer)
is appended to it: the job's summary page.

Escaping is the runner's: in the message `%`, CR and LF become `%25`, `%0D`, `%0A`; in property
values `:` and `,` also become `%3A` and `%2C`. A log line therefore never starts a command of its
own (it cannot contain a line break), and it is neutralised (control characters shown escaped)
and redacted (secrets) before it is written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

from triage.models import Report
from triage.redact import redact
from triage.textutil import neutralise

ANNOTATIONS_PER_KIND = 10
MESSAGE_CHARS = 600
STDIN_NAME = "<stdin>"


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(
    kind: str,
    message: str,
    *,
    file: str | None = None,
    line: int | None = None,
    title: str | None = None,
) -> str:
    """One workflow command line, e.g. `::error file=a.log,line=3,title=T::message`."""
    props = []
    if file:
        props.append(f"file={escape_property(file)}")
        if line:
            props.append(f"line={line}")
    if title:
        props.append(f"title={escape_property(title)}")
    head = f"::{kind} {','.join(props)}" if props else f"::{kind}"
    return f"{head}::{escape_data(message)}"


def _kind(severity: str) -> str:
    return {"error": "error", "warning": "warning"}.get(severity, "notice")


def _clean(text: str) -> str:
    return redact(neutralise(text))[:MESSAGE_CHARS]


def render_gha(report: Report) -> str:
    out: list[str] = []
    shown = {"error": 0, "warning": 0, "notice": 0}
    left_out = 0

    def add(kind: str, message: str, file: str | None, line: int | None, title: str) -> None:
        nonlocal left_out
        if shown[kind] >= ANNOTATIONS_PER_KIND:
            left_out += 1
            return
        shown[kind] += 1
        path = None if file in (None, STDIN_NAME) else file
        out.append(command(kind, message, file=path, line=line, title=title))

    for hyp in report.hypotheses:
        kind = _kind(hyp.severity)
        title = f"triage: {hyp.signature} ({hyp.layer} layer, {hyp.severity})"
        for ev in hyp.evidence:
            add(kind, f"{_clean(hyp.title)}: {_clean(ev.text)}", ev.input, ev.line, title)
    for u in report.unrecognized:
        title = "triage: failure line no signature explains"
        add("notice", _clean(u.text), u.input, u.line, title)
    if left_out:
        out.append(
            command("notice", f"{left_out} more annotation(s) not shown; see the job summary")
        )
    if not report.hypotheses and not report.unrecognized:
        out.append(command("notice", "no known failure found in the log", title="triage"))
    return "\n".join(out) + "\n"


def append_summary(report: Report, path: Path) -> None:
    """Append the Markdown report to the job summary file."""
    from triage.render.markdown import render_markdown

    with path.open("a", encoding="utf-8") as fh:
        fh.write(render_markdown(report, marker="") + "\n")


def write_report(report: Report, out: TextIO, args: list[str] | None = None) -> None:
    out.write(render_gha(report))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        append_summary(report, Path(summary))
