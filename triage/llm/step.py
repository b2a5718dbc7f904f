"""The optional LLM step over a finished report: decide whether to ask, ask, check, attach.

It runs after the deterministic report is complete (and recorded in the history), and it only
ever adds `report.llm`: hypotheses, their order, severities, the exit status and the history are
never touched. It asks only when the report has unrecognized failure lines, or when every
hypothesis scores below `LOW_SCORE`, or when the user asked explicitly (`triage ask`). Any
failure (time-out, HTTP error, malformed or oversized answer, a rejected citation or signature)
leaves the report as it was and returns one note for stderr.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triage.api import KnowledgeBase
from triage.llm import answer, cache, evidence, prompt
from triage.llm.client import Completion, LlmError, endpoint, post_chat, public_url
from triage.models import Report

LOW_SCORE = 0.3  # below this every hypothesis is a guess (37 of the corpus's 411 failure logs)

Sender = Callable[..., Completion]


@dataclass(frozen=True)
class Settings:
    url: str  # OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1
    model: str
    timeout: float = 60.0
    dry_run: bool = False
    force: bool = False  # an explicit request: ask even when the report is confident
    use_cache: bool = True
    api_key: str | None = None


@dataclass
class Outcome:
    note: str | None = None  # one line for stderr
    body: bytes | None = None  # the exact request body (dry run)


def reason_to_ask(report: Report, force: bool) -> str | None:
    """Why the step should run for this report, or None when it should not."""
    # A line the message catalog located is still one no curated signature explains.
    located = [h for h in report.hypotheses if h.basis == "located"]
    if report.unrecognized or located:
        return f"{len(report.unrecognized) + len(located)} unrecognized failure line(s)"
    curated = [h for h in report.hypotheses if h.basis != "located"]
    if curated and all(h.score < LOW_SCORE for h in curated):
        best = max(h.score for h in curated)
        return f"only low-score hypotheses (best {best:.2f} < {LOW_SCORE})"
    if force:
        return "explicit request"
    return None


def label(model: str) -> str:
    return f"suggestion from {model}, not a knowledge-base match"


def suggest(
    report: Report,
    kb: KnowledgeBase,
    paths: dict[str, Path],
    settings: Settings,
    *,
    send: Sender = post_chat,
) -> Outcome:
    """Attach `report.llm` when the step runs and its answer passes every check."""
    why = reason_to_ask(report, settings.force)
    if why is None:
        return Outcome(note="llm: not asked: the knowledge base explains this log with confidence")
    try:
        url = endpoint(settings.url)
    except LlmError as exc:
        return Outcome(note=f"llm: {exc}")
    found = evidence.collect(report, paths)
    if not found.windows:
        return Outcome(note="llm: not asked: no evidence lines to send")
    cands = prompt.candidates(report, kb)
    body = prompt.payload(settings.model, cands, found)
    encoded = prompt.encode(body)
    if settings.dry_run:
        return Outcome(body=encoded)
    input_digest = cache.digest(body["messages"][1]["content"])
    cache_key = cache.key(input_digest, kb.digest, settings.model, prompt.PROMPT_VERSION)
    completion = cache.load(cache_key) if settings.use_cache else None
    cached = completion is not None
    if completion is None:
        try:
            completion = send(url, encoded, timeout=settings.timeout, api_key=settings.api_key)
        except LlmError as exc:
            return Outcome(note=f"llm: suggestion dropped: {exc}")
    ids = [c.id for c in cands]
    try:
        accepted = answer.check(completion.content, ids, found)
    except answer.Rejected as exc:
        return Outcome(note=f"llm: suggestion dropped: {exc}")
    if not cached and settings.use_cache:
        cache.store(cache_key, completion)
    report.llm = _section(accepted, completion, settings, url, why, cached, input_digest, kb, ids)
    return Outcome()


def _section(
    accepted: answer.Answer,
    completion: Completion,
    settings: Settings,
    url: str,
    why: str,
    cached: bool,
    input_digest: str,
    kb: KnowledgeBase,
    ids: list[str],
) -> dict[str, Any]:
    """The report's `llm` object (keys in the order of `report_schema.LlmSuggestion`)."""
    sig = kb.by_id.get(accepted.signature)
    return {
        "label": label(settings.model),
        "model": settings.model,
        "served_model": completion.model,
        "endpoint": public_url(url),
        "prompt_version": prompt.PROMPT_VERSION,
        "temperature": 0,
        "reason": why,
        "cached": cached,
        "input_digest": input_digest,
        "kb_digest": kb.digest,
        "candidates": ids,
        "signature": accepted.signature,
        "title": sig.title if sig else None,
        "citations": [
            {"input": c.input, "line": c.line, "quote": c.quote, "text": c.text}
            for c in accepted.citations
        ],
        "rationale": accepted.rationale,
        "next_step": accepted.next_step,
        "confidence": accepted.confidence,
    }
