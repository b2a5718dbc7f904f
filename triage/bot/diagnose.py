"""Turn text (issue blocks, attachments, files) into a Report and the comment a bot would post.

Text is redacted before the engine sees it, so neither the report nor anything rendered from it
can carry a secret; the rendered comment is redacted once more at the end. The digest names the
verdict (hypotheses, unexplained lines, asks), so an edit that changes nothing the reader sees
leaves the posted comment alone.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage.api import Engine, InputSpec
from triage.bot.collect_env import fact_lines, parse_collect_env
from triage.bot.issue import ParsedIssue
from triage.models import Report
from triage.redact import redact, redact_value
from triage.render.markdown import render_markdown

COMMENT_LIMIT = 60_000  # below GitHub's 65 536, as other bots do
_KEY_SAFE = re.compile(r"[^A-Za-z0-9/#._:-]")


@dataclass
class TextInput:
    """One named input held in memory; `first_line` keeps line numbers as in the original."""

    name: str
    text: str
    first_line: int = 1


@dataclass
class Diagnosis:
    report: Report
    markdown: str
    digest: str
    asks: list[str] = field(default_factory=list)

    @property
    def has_findings(self) -> bool:
        return bool(self.report.hypotheses or self.report.unrecognized)


def run_engine(
    engine: Engine, texts: Sequence[TextInput], files: Sequence[tuple[str, Path]] = ()
) -> Report:
    """Triage in-memory texts (redacted first) and files, as `Engine.run` does for paths."""
    specs = [
        InputSpec(t.name, None, io.BytesIO(redact(t.text).encode("utf-8")), t.first_line)
        for t in texts
    ]
    specs += [InputSpec(name, path) for name, path in files]
    return engine.run_inputs(specs)


def redact_obj(obj: Any) -> Any:
    """Redact every string inside a JSON-like value, and whatever a secret name holds
    (`{"hf_token": "..."}`): see `triage.redact.redact_value`."""
    return redact_value(obj)


def report_json(report: Report) -> str:
    """The report as JSON (the `triage.report/1` contract), every string redacted."""
    return json.dumps(redact_obj(report.to_json_dict()), indent=2, ensure_ascii=False) + "\n"


def redacted_report(report: Report) -> Report:
    """A copy of the report with every string redacted: the only form that is ever stored."""
    return Report.from_json_dict(redact_obj(report.to_json_dict()))


def history_seen(db_path: Path | None, report: Report) -> dict[str, str]:
    """ "seen N times ..." per signature from the history database, when there is one."""
    if db_path is None:
        return {}
    try:
        from triage.history import seen_summary
    except ImportError:  # a build without the history module
        return {}
    try:
        return seen_summary(db_path, [h.signature for h in report.hypotheses])
    except Exception:  # a damaged history never stops a triage
        return {}


def record_history(db_path: Path | None, report: Report, run_id: str | None = None) -> int | None:
    """Store the redacted report in the history database; None when there is none."""
    if db_path is None:
        return None
    try:
        from triage.history import record_run
    except ImportError:
        return None
    return record_run(redacted_report(report), db_path, run_id=run_id)


def verdict_digest(report: Report, asks: Sequence[str]) -> str:
    """A short digest of what the comment says: changes only when the verdict does."""
    key = {
        "hypotheses": [(h.signature, h.status, h.layer) for h in report.hypotheses[:5]],
        "unrecognized": sorted({u.fingerprint for u in report.unrecognized})[:20],
        "asks": list(asks),
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def marker(key: str, digest: str) -> str:
    """The hidden first line of a bot comment: who wrote it, for which thread, which verdict."""
    return f"<!-- triage-bot v1 key={_KEY_SAFE.sub('_', key)[:120]} digest={digest} -->"


def env_asks(parsed: ParsedIssue | None, env: dict[str, Any]) -> list[str]:
    """What the bot needs before it can say more, from the shape of the report itself."""
    if parsed is None:
        return []
    asks: list[str] = []
    if env.get("placeholder"):
        asks.append(
            "the output of `python collect_env.py` (the template's placeholder is still there)"
        )
    elif env.get("script_pasted"):
        asks.append(
            "the *output* of `python collect_env.py` (the script's source was pasted instead)"
        )
    elif not parsed.env_section:
        asks.append("the output of `python collect_env.py` (versions, GPUs and topology)")
    if not parsed.blocks and not parsed.attachments:
        if parsed.images:
            asks.append("the log as text in a fenced code block (screenshots cannot be read)")
        else:
            asks.append(
                "the complete server log, pasted in a fenced code block or attached as a .log file"
            )
    return asks


def diagnose(
    engine: Engine,
    texts: Sequence[TextInput],
    *,
    key: str = "local",
    env_text: str = "",
    parsed: ParsedIssue | None = None,
    files: Sequence[tuple[str, Path]] = (),
    extra_facts: dict[str, Any] | None = None,
    limit: int = COMMENT_LIMIT,
    history_db: Path | None = None,
) -> Diagnosis:
    """Triage texts (plus the parsed environment) and render the comment with its marker."""
    env = parse_collect_env(env_text) if env_text.strip() else {}
    inputs = list(texts)
    env_lines = fact_lines(env)
    if env_lines:
        inputs.append(
            TextInput(name="collect_env (parsed facts)", text="\n".join(env_lines) + "\n")
        )
    report = run_engine(engine, inputs, files)
    if env:
        report.facts["environment"] = redact_obj({k: v for k, v in env.items() if k != "env"})
    if extra_facts:
        report.facts.update(redact_obj(extra_facts))
    asks = env_asks(parsed, env)
    digest = verdict_digest(report, asks)
    seen = history_seen(history_db, report)
    markdown = render_markdown(
        report, limit=limit, asks=asks, marker=marker(key, digest), seen=seen
    )
    record_history(history_db, report, run_id=key)
    return Diagnosis(report=report, markdown=markdown, digest=digest, asks=asks)
