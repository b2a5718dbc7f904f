"""Human output for a terminal: rich styles on a TTY, plain text otherwise; NO_COLOR honoured.

Every piece of text that came from the input is neutralised (escape sequences, C0/C1 controls,
bidi overrides) and inserted as plain `Text`, never as markup.
"""

from __future__ import annotations

import io
import os
from typing import IO

from rich.console import Console
from rich.text import Text
from rich.theme import Theme

from triage.models import Report
from triage.textutil import neutralise

THEME = Theme(
    {
        "triage.layer.node": "bold magenta",
        "triage.layer.harness": "bold yellow",
        "triage.layer.engine": "bold cyan",
        "triage.layer.model": "bold green",
        "triage.error": "bold red",
        "triage.warning": "yellow",
        "triage.info": "dim",
        "triage.evidence": "white",
        "triage.dim": "dim",
        "triage.fix": "green",
        "triage.ok": "bold green",
    }
)


def _console(stream: IO[str], color: bool | None) -> Console:
    if color is None:
        color = stream.isatty() and "NO_COLOR" not in os.environ
    return Console(
        file=stream,
        theme=THEME,
        force_terminal=color,
        no_color=not color,
        width=110,
        highlight=False,
        emoji=False,
        soft_wrap=True,
        color_system="standard" if color else None,
    )


def render_text(
    report: Report,
    *,
    explain: bool = False,
    color: bool | None = False,
    stream: IO[str] | None = None,
) -> str:
    buf = stream or io.StringIO()
    con = _console(buf, color)
    names = ", ".join(f"{i.name} ({i.lines} lines, {i.format})" for i in report.inputs)
    con.print(Text(f"triage: {neutralise(names)}", style="triage.dim"))
    facts = report.facts
    shown = [
        f"{k}={facts[k]}"
        for k in (
            "engine",
            "vllm_version",
            "sglang_version",
            "torch_version",
            "cuda_version",
            "driver_version",
            "nccl_version",
            "gpu",
            "model",
        )
        if k in facts
    ]
    if shown:
        con.print(
            Text("facts: " + neutralise(", ".join(str(s) for s in shown)), style="triage.dim")
        )
    for skip in report.skipped:
        con.print(
            Text(
                f"note: {neutralise(skip['input'])}: {neutralise(skip['reason'])}",
                style="triage.warning",
            )
        )
    if not report.hypotheses and not report.unrecognized:
        con.print(Text("No known failure found.", style="triage.ok"))
        return buf.getvalue() if isinstance(buf, io.StringIO) else ""
    for hyp in report.hypotheses:
        con.print()
        head = Text()
        head.append(f"#{hyp.rank} ", style="bold")
        head.append(f"[{hyp.layer}] ", style=f"triage.layer.{hyp.layer}")
        head.append(hyp.title, style="bold")
        head.append(
            f"  ({hyp.signature}, {hyp.severity}, {hyp.status}, score {hyp.score:.2f})",
            style=f"triage.{hyp.severity}",
        )
        con.print(head)
        if hyp.applicability:
            con.print(Text(f"   applicability: {hyp.applicability}", style="triage.warning"))
        con.print(Text("   evidence:", style="triage.dim"))
        for ev in hyp.evidence:
            count = f" (x{ev.count})" if ev.count > 1 else ""
            role = "" if ev.role == "decisive" else f" [{ev.role}]"
            con.print(
                Text(f"     {neutralise(ev.input)}:{ev.line}{role}{count}: ", style="triage.dim")
                + Text(neutralise(ev.text[:300]), style="triage.evidence")
            )
        if hyp.alternatives:
            con.print(
                Text(f"   also consistent with: {', '.join(hyp.alternatives)}", style="triage.dim")
            )
        for exp in hyp.explains:
            lines = ", ".join(str(n) for n in exp.lines[:8])
            con.print(Text(f"   explains: {exp.signature} (lines {lines})", style="triage.dim"))
        favoured = [d for d in hyp.differential if d.favoured]
        for d in favoured:
            con.print(Text(f"   likely branch: {d.branch}: {d.check}", style="triage.warning"))
        if hyp.fixes:
            con.print(Text("   try:", style="triage.dim"))
            for i, fix in enumerate(hyp.fixes, start=1):
                likely = " (likely)" if fix.likely else ""
                line = Text(f"     {i}. [{fix.confidence}]{likely} ", style="triage.dim")
                line.append(fix.do, style="triage.fix")
                if fix.when:
                    line.append(f"  when: {fix.when}", style="triage.dim")
                con.print(line)
                if fix.caveat:
                    con.print(Text(f"        caveat: {fix.caveat}", style="triage.warning"))
        if hyp.verify:
            con.print(Text("   verify:", style="triage.dim"))
            for v in hyp.verify:
                con.print(Text(f"     - {v}"))
        open_checks = [d for d in hyp.differential if not d.favoured and (d.ask or d.probe)]
        if open_checks and hyp.rank <= 3:
            con.print(Text("   to tell the causes apart:", style="triage.dim"))
            for d in open_checks:
                how = d.ask or ""
                if d.probe:
                    how = (
                        how + "; " if how else ""
                    ) + f"`triage probe` ({d.probe} section), then re-run triage with the bundle"
                con.print(Text(f"     - {d.branch}: {how}"))
        if explain:
            con.print(Text("   score terms:", style="triage.dim"))
            for term in hyp.explain:
                con.print(Text(f"     {term}", style="triage.dim"))
    if report.unrecognized:
        con.print()
        con.print(Text("Unrecognized failure lines (no signature explains them):", style="bold"))
        for u in report.unrecognized:
            count = f" (x{u.count})" if u.count > 1 else ""
            con.print(
                Text(f"  {neutralise(u.input)}:{u.line}{count}: ", style="triage.dim")
                + Text(neutralise(u.text[:300]))
            )
    return buf.getvalue() if isinstance(buf, io.StringIO) else ""
