"""Human output for a terminal: ANSI styles on a TTY, plain text otherwise.

Colour follows the conventions of grep, rg and ls (`use_color`): `--color=auto|always|never`;
under auto, a non-empty NO_COLOR turns it off, a non-empty FORCE_COLOR or CLICOLOR_FORCE (other
than 0) turns it on, TERM=dumb turns it off, otherwise it is on only on a terminal. Text that came
from the log is printed in the terminal's own foreground colour, readable on light and dark themes.

Every piece of text that came from the input is neutralised (escape sequences, C0/C1 controls,
bidi overrides) before it is written; styles only ever wrap it. (A dozen SGR codes, not a
terminal library: importing one cost more than a third of start-up.)
"""

from __future__ import annotations

import io
import os
from typing import IO

from triage.models import Hypothesis, Report
from triage.textutil import neutralise

STYLES = {
    "bold": "1",
    "triage.layer.node": "1;35",
    "triage.layer.harness": "1;33",
    "triage.layer.engine": "1;36",
    "triage.layer.model": "1;32",
    "triage.error": "1;31",
    "triage.warning": "33",
    "triage.info": "2",
    "triage.evidence": "",  # the terminal's default foreground: readable on any theme
    "triage.dim": "2",
    "triage.fix": "32",
    "triage.ok": "1;32",
}

Span = tuple[str, str | None]  # text, style name


class _Writer:
    def __init__(self, stream: IO[str], color: bool) -> None:
        self.stream = stream
        self.color = color

    def print(self, *spans: Span) -> None:
        """One line from spans (callers neutralise input text); tabs expanded to 8 columns."""
        column = 0
        out = []
        for text, style in spans:
            if "\t" in text:
                text = (" " * column + text).expandtabs(8)[column:]
            column += len(text)
            out.append(self._styled(text, style))
        self.stream.write("".join(out) + "\n")

    def _styled(self, text: str, style: str | None) -> str:
        code = STYLES.get(style or "")
        if not self.color or not code or not text:
            return text
        return f"\x1b[{code}m{text}\x1b[0m"


def use_color(stream: IO[str], choice: str = "auto") -> bool:
    """Whether to write ANSI styles to stream, for `--color=auto|always|never`."""
    if choice in ("always", "never"):
        return choice == "always"
    if os.environ.get("NO_COLOR", ""):
        return False
    for force in ("FORCE_COLOR", "CLICOLOR_FORCE"):
        if os.environ.get(force, "") not in ("", "0"):
            return True
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _writer(stream: IO[str], color: bool | None) -> _Writer:
    return _Writer(stream, use_color(stream) if color is None else color)


def plural_word(n: int, word: str) -> str:
    """'line', 'lines'."""
    return word if n == 1 else f"{word}s"


def plural(n: int, word: str) -> str:
    """'1 line', '2 lines'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def located_line(hyp: Hypothesis) -> str:
    """'raised by vllm 0.10.0-0.11.2, vllm/v1/core/kv_cache_utils.py, check_enough_kv_cache_memory':
    the summary of a located hypothesis up to its call kind."""
    return hyp.summary.split(" (", 1)[0].rstrip(".")


def render_text(
    report: Report,
    *,
    explain: bool = False,
    color: bool | None = False,
    stream: IO[str] | None = None,
) -> str:
    buf = stream or io.StringIO()
    con = _writer(buf, color)
    names = ", ".join(f"{i.name} ({plural(i.lines, 'line')}, {i.format})" for i in report.inputs)
    con.print((f"triage: {neutralise(names)}", "triage.dim"))
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
        con.print(("facts: " + neutralise(", ".join(str(s) for s in shown)), "triage.dim"))
    for skip in report.skipped:
        con.print(
            (f"note: {neutralise(skip['input'])}: {neutralise(skip['reason'])}", "triage.warning")
        )
    if not report.hypotheses and not report.unrecognized:
        con.print(("No known failure found.", "triage.ok"))
        _llm_section(con, report)
        return buf.getvalue() if isinstance(buf, io.StringIO) else ""
    for hyp in report.hypotheses:
        con.print()
        con.print(
            (f"#{hyp.rank} ", "bold"),
            (f"[{hyp.layer}] ", f"triage.layer.{hyp.layer}"),
            (hyp.title, "bold"),
            (
                f"  ({hyp.signature}, {hyp.severity}, {hyp.status}, score {hyp.score:.2f})",
                f"triage.{hyp.severity}",
            ),
        )
        if hyp.applicability:
            con.print((f"   applicability: {hyp.applicability}", "triage.warning"))
        if hyp.basis == "inferred":
            note = "   inferred: no decisive line; its supporting lines point here"
            con.print((note, "triage.warning"))
        if hyp.source is not None:  # basis "located": the message catalog's source line
            con.print((f"   {neutralise(located_line(hyp))}", None))
            if hyp.source.url:
                con.print((f"   source: {neutralise(hyp.source.url)}", "triage.dim"))
        con.print(("   evidence:", "triage.dim"))
        for ev in hyp.evidence:
            count = f" (x{ev.count})" if ev.count > 1 else ""
            roles = ev.roles or [ev.role]
            role = "" if roles == ["decisive"] else f" [{', '.join(roles)}]"
            con.print(
                (f"     {neutralise(ev.input)}:{ev.line}{role}{count}: ", "triage.dim"),
                (neutralise(ev.text[:300]), "triage.evidence"),
            )
        shown_lines = sum(ev.count for ev in hyp.evidence if ev.role == "decisive")
        if hyp.matched_lines > shown_lines:
            more = hyp.matched_lines - shown_lines
            label = f"     ... {more:,} more matching {plural_word(more, 'line')} not shown"
            con.print((label, "triage.dim"))
        if hyp.alternatives:
            con.print((f"   also consistent with: {', '.join(hyp.alternatives)}", "triage.dim"))
        for exp in hyp.explains:
            lines = ", ".join(str(n) for n in exp.lines[:8])
            con.print((f"   explains: {exp.signature} (lines {lines})", "triage.dim"))
        favoured = [d for d in hyp.differential if d.favoured]
        for d in favoured:
            where = f" [{d.layer}]" if d.layer else ""
            con.print((f"   likely branch: {d.branch}{where}: {d.check}", "triage.warning"))
        for d in hyp.differential:
            if d.ruled_out:
                con.print((f"   ruled out: {d.branch} ({d.ruled_out[0]})", "triage.dim"))
        if hyp.fixes:
            con.print(("   try:", "triage.dim"))
            for i, fix in enumerate(hyp.fixes, start=1):
                likely = " (likely)" if fix.likely else ""
                spans: list[Span] = [
                    (f"     {i}. [{fix.confidence}]{likely} ", "triage.dim"),
                    (fix.do, "triage.fix"),
                ]
                if fix.when:
                    spans.append((f"  when: {fix.when}", "triage.dim"))
                con.print(*spans)
                if fix.caveat:
                    con.print((f"        caveat: {fix.caveat}", "triage.warning"))
            if not any(fix.confidence == "demonstrated" for fix in hyp.fixes):
                # the knowledge base says so rather than letting a suggestion pass for a cure
                con.print(("     (no fix here is shown working in its sources yet)", "triage.dim"))
        if hyp.verify:
            con.print(("   verify:", "triage.dim"))
            for v in hyp.verify:
                con.print((f"     - {v}", None))
        open_checks = [
            d for d in hyp.differential if not d.favoured and not d.ruled_out and (d.ask or d.probe)
        ]
        if open_checks and hyp.rank <= 3:
            con.print(("   to tell the causes apart:", "triage.dim"))
            for d in open_checks:
                how = d.ask or ""
                if d.probe:
                    how = (
                        how + "; " if how else ""
                    ) + f"`triage probe` ({d.probe} section), then re-run triage with the bundle"
                con.print((f"     - {d.branch}: {how}", None))
        if explain:
            con.print(("   score terms:", "triage.dim"))
            for term in hyp.explain:
                con.print((f"     {term}", "triage.dim"))
    if report.unrecognized:
        con.print()
        con.print(("Unrecognized failure lines (no signature explains them):", "bold"))
        for u in report.unrecognized:
            count = f" (x{u.count})" if u.count > 1 else ""
            con.print(
                (f"  {neutralise(u.input)}:{u.line}{count}: ", "triage.dim"),
                (neutralise(u.text[:300]), None),
            )
    _llm_section(con, report)
    return buf.getvalue() if isinstance(buf, io.StringIO) else ""


def _llm_section(con: _Writer, report: Report) -> None:
    """The LLM step's suggestion, apart from the knowledge base's hypotheses and labelled so."""
    llm = report.llm
    if not llm:
        return
    con.print()
    label = neutralise(llm["label"])
    con.print((f"{label[:1].upper()}{label[1:]}:", "bold"))
    sig = llm["signature"]
    named = "no known signature" if sig == "none" else f"{sig} ({neutralise(llm['title'] or '')})"
    cached = ", cached" if llm["cached"] else ""
    con.print((f"   {named}; confidence {llm['confidence']}{cached}", "triage.warning"))
    con.print(("   cited:", "triage.dim"))
    for c in llm["citations"]:
        con.print(
            (f"     {neutralise(c['input'])}:{c['line']}: ", "triage.dim"),
            (neutralise(c["quote"]), "triage.evidence"),
        )
    con.print((f"   why: {neutralise(llm['rationale'])}", None))
    con.print((f"   next step: {neutralise(llm['next_step'])}", "triage.fix"))
