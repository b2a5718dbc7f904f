"""The comment a bot posts: a one-line verdict, a block per hypothesis, what nothing explained, and
what the bot still needs from the reporter. Text from logs is escaped (Markdown, HTML, mentions).
The comment stays under a size limit by truncating evidence, never the verdict, and secrets are
redacted from the final text (`triage.redact`) before it is returned.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from triage.models import Hypothesis, Report
from triage.redact import redact
from triage.render.text import located_line
from triage.textutil import neutralise

MARKER = "<!-- triage-bot -->"
GITHUB_COMMENT_LIMIT = 65536

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def escape_md(text: str) -> str:
    """Escape Markdown/HTML specials and defuse @-mentions and #-references in untrusted text."""
    text = neutralise(text)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return text.replace("@", "@\u200b")


# Characters a catalogued path, function name or link may hold: nothing else reaches Markdown.
_SAFE_NAME = re.compile(r"[^\w./:#, +-]")


def _code_safe(text: str) -> str:
    """Text for inside a fenced block: neutralised, no mentions (the fence is sized by `fenced`)."""
    return neutralise(text).replace("@", "@\u200b")


_BACKTICK_RUN = re.compile(r"`+")


def fenced(lines: Sequence[str], info: str = "text") -> list[str]:
    """A fenced code block whose fence is longer than the longest backtick run inside it."""
    runs = (len(m.group()) for line in lines for m in _BACKTICK_RUN.finditer(line))
    longest = max(runs, default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + info, *lines, fence]


def verdict(report: Report) -> str:
    if not report.hypotheses:
        if report.unrecognized:
            return (
                f"**triage:** no known failure matched; {len(report.unrecognized)} "
                "unrecognized error line(s) below."
            )
        return "**triage:** no known failure found in the log."
    top = report.hypotheses[0]
    return (
        f"**triage:** most likely **{escape_md(top.title)}** "
        f"(`{top.signature}`, {top.layer} layer, {top.status}, score {top.score:.2f})."
    )


def _hypothesis_block(hyp: Hypothesis, evidence_lines: int, seen: dict[str, str]) -> str:
    out = [
        f"### {hyp.rank}. {escape_md(hyp.title)}",
        f"`{hyp.signature}` · layer **{hyp.layer}** · {hyp.severity} · knowledge status "
        f"**{hyp.status}** · score {hyp.score:.2f}",
    ]
    if hyp.signature in seen:
        out.append(f"_{escape_md(seen[hyp.signature])}_")
    if hyp.applicability:
        out.append(f"> applicability: {escape_md(hyp.applicability)}")
    if hyp.basis == "inferred":
        out.append("> inferred: no decisive line; its supporting lines point here")
    out.append("")
    if hyp.source is not None:  # basis "located": paths and names of our own catalog, as code
        src = hyp.source
        where = ", ".join(x for x in (src.file, src.function) if x)
        verb = located_line(hyp).split(" by ", 1)[0]
        out.append(
            f"{verb} by {_code_safe(src.project)} {_code_safe(src.releases)}, "
            f"{_SAFE_NAME.sub('', where)} ({escape_md(src.kind)})"
        )
        if src.url:
            out.append(f"Source: {_SAFE_NAME.sub('', src.url)}")
    else:
        out.append(escape_md(hyp.summary.strip()))
    out.append("")
    ev = hyp.evidence[:evidence_lines]
    if ev:
        out.append(f"<details><summary>Evidence ({len(hyp.evidence)} line(s))</summary>")
        out.append("")
        body = []
        for e in ev:
            count = f" (x{e.count})" if e.count > 1 else ""
            body.append(f"{_code_safe(e.input)}:{e.line}{count}: {_code_safe(e.text[:400])}")
        if len(hyp.evidence) > len(ev):
            body.append(f"... {len(hyp.evidence) - len(ev)} more line(s) not shown")
        shown = sum(e.count for e in hyp.evidence if e.role == "decisive")
        if hyp.matched_lines > shown:
            body.append(f"... {hyp.matched_lines - shown:,} more matching line(s) in the input")
        out.extend(fenced(body))
        out.append("</details>")
        out.append("")
    if hyp.explains:
        names = ", ".join(
            f"`{x.signature}` (lines {', '.join(map(str, x.lines[:6]))})" for x in hyp.explains
        )
        out.append(f"This also explains: {names}.")
        out.append("")
    if hyp.fixes:
        out.append("**What to try, in order:**")
        for i, fix in enumerate(hyp.fixes, start=1):
            likely = " — likely, given this log" if fix.likely else ""
            when = f" (when {escape_md(fix.when)})" if fix.when else ""
            out.append(f"{i}. {escape_md(fix.do)}{when} — _{fix.confidence}_{likely}")
            if fix.caveat:
                out.append(f"   - caveat: {escape_md(fix.caveat)}")
        if not any(fix.confidence == "demonstrated" for fix in hyp.fixes):
            out.append("")
            out.append("_No fix here is shown working in its sources yet._")
        out.append("")
    if hyp.verify:
        out.append("**How to know it worked:**")
        out.extend(f"- {escape_md(v)}" for v in hyp.verify)
        out.append("")
    if hyp.references:
        out.append(
            "References: "
            + ", ".join(escape_md(r) if not r.startswith("http") else r for r in hyp.references[:6])
        )
        out.append("")
    return "\n".join(out)


def needs_from_reporter(report: Report, extra: Sequence[str] = ()) -> list[str]:
    """What the bot still needs: the caller's asks first, then the hypotheses' differential asks."""
    asks: list[str] = [a for i, a in enumerate(extra) if a not in extra[:i]]
    sections: list[str] = []
    for hyp in report.hypotheses[:3]:
        for d in hyp.differential:
            if d.favoured or d.ruled_out:
                continue  # the log already speaks for (or against) this branch
            if d.ask and d.ask not in asks:
                asks.append(d.ask)
            if d.probe and d.probe not in sections:
                sections.append(d.probe)
    if sections:
        asks.append(
            "the bundle of `triage probe` run on the GPU host (it covers: "
            + ", ".join(sections)
            + "); attach it and triage re-ranks with it"
        )
    if not report.hypotheses or all(h.kind == "symptom" for h in report.hypotheses):
        for default in (
            "the complete server log from the launch command on (not only the last traceback)",
            "the launch command or compose file",
            "`dmesg -T` (or `journalctl -k`) around the time of the failure",
        ):
            if default not in asks:
                asks.append(default)
    return asks


def render_markdown(
    report: Report,
    *,
    limit: int = GITHUB_COMMENT_LIMIT,
    seen: dict[str, str] | None = None,
    asks: Sequence[str] = (),
    marker: str = MARKER,
    notes: Sequence[str] = (),
) -> str:
    """The comment: at most `limit` characters (and bytes), secrets redacted.

    `asks` are requests to the reporter from the caller (e.g. the bot noticed the environment
    section is missing); `notes` are short lines (already Markdown) shown under the verdict;
    `marker` is the hidden first line a bot uses to find its own comment again."""
    seen = seen or {}
    for evidence_lines in (12, 6, 3, 1, 0):
        text = redact(_render(report, evidence_lines, seen, asks, marker, notes))
        if len(text.encode("utf-8")) <= limit:
            return text
    head = marker + "\n" + redact(verdict(report)) + "\n"
    return head + "\n_(details truncated to fit the comment size limit)_\n"


def _render(
    report: Report,
    evidence_lines: int,
    seen: dict[str, str],
    extra_asks: Sequence[str],
    marker: str,
    notes: Sequence[str],
) -> str:
    parts = [marker, verdict(report), ""]
    if notes:
        parts.extend(notes)
        parts.append("")
    parts.extend(_hypothesis_block(hyp, evidence_lines, seen) for hyp in report.hypotheses[:5])
    if len(report.hypotheses) > 5:
        parts.append(f"_{len(report.hypotheses) - 5} lower-ranked hypothesis(es) not shown._\n")
    if report.unrecognized:
        parts.append("### Not explained by any known signature")
        shown = report.unrecognized[: max(evidence_lines, 3)]
        parts.extend(
            fenced([f"{_code_safe(u.input)}:{u.line}: {_code_safe(u.text[:300])}" for u in shown])
        )
        if len(report.unrecognized) > len(shown):
            parts.append(f"_{len(report.unrecognized) - len(shown)} more not shown._")
        parts.append("")
    if report.llm:
        parts.extend(_llm_block(report.llm))
    asks = needs_from_reporter(report, extra_asks)
    if asks:
        parts.append("### What would help next")
        parts.extend(f"- {escape_md(a) if not a.startswith('`') else a}" for a in asks)
        parts.append("")
    parts.append("<sub>Posted by triage. It reads logs, never runs anything from them.</sub>")
    return "\n".join(parts) + "\n"


def _llm_block(llm: dict[str, Any]) -> list[str]:
    """The LLM step's suggestion under its own heading, never as a hypothesis."""
    sig = llm["signature"]
    named = "no known signature" if sig == "none" else f"`{sig}` ({escape_md(llm['title'] or '')})"
    out = [
        f"### {escape_md(llm['label'][:1].upper() + llm['label'][1:])}",
        f"{named} · confidence {escape_md(llm['confidence'])}",
        "",
    ]
    cited = [
        f"{_code_safe(c['input'])}:{c['line']}: {_code_safe(c['quote'])}" for c in llm["citations"]
    ]
    out.extend(fenced(cited))
    out.append("")
    out.append(escape_md(llm["rationale"]))
    out.append("")
    out.append(f"**Next step (unverified):** {escape_md(llm['next_step'])}")
    out.append("")
    return out
