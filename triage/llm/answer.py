"""Check a model's answer against what it was shown; reject it whole on the first violation.

An answer is accepted only when it is one JSON object of the schema (`triage.llm.prompt`), its
signature is one of the candidates or "none", and every citation names a line that was in the
evidence sent, with a quote found verbatim in that line's text as sent. The rule is the one
PyTorch's CI log classifier applies to its model's chosen line (exact text, else dropped),
extended to line numbers and to the signature list. Nothing is repaired: a partly right answer
is a wrong answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from triage.llm.evidence import Evidence
from triage.llm.prompt import (
    CONFIDENCES,
    MAX_CITATIONS,
    MAX_NEXT_STEP_CHARS,
    MAX_QUOTE_CHARS,
    MAX_RATIONALE_CHARS,
)

MIN_QUOTE_CHARS = 8  # shorter quotes ("Error") prove nothing; a shorter whole line is accepted


class Rejected(Exception):
    """Why an answer was dropped: one short line."""


@dataclass(frozen=True)
class Citation:
    input: str
    line: int
    quote: str
    text: str  # the whole line as it was sent


@dataclass(frozen=True)
class Answer:
    signature: str  # a candidate id or "none"
    citations: list[Citation]
    rationale: str
    next_step: str
    confidence: str


def _json_object(content: str) -> dict[str, Any]:
    text = content.strip()
    if text.startswith("```"):  # a server without guided decoding may fence its JSON
        first = text.find("\n")
        text = text[first + 1 :] if first > 0 else ""
        text = text[: text.rfind("```")] if text.rstrip().endswith("```") else text
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Rejected(f"the answer is not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise Rejected("the answer is not a JSON object")
    return data


def _text(data: dict[str, Any], key: str, limit: int) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise Rejected(f"the answer has no {key}")
    if len(value) > limit:
        raise Rejected(f"the answer's {key} is longer than {limit} characters")
    return value.strip()


def check(content: str, candidate_ids: Sequence[str], evidence: Evidence) -> Answer:
    """The accepted answer, or Rejected."""
    data = _json_object(content)
    expected = {"signature", "cited_lines", "rationale", "next_step", "confidence"}
    if set(data) != expected:
        extra = sorted(set(data) - expected)
        missing = sorted(expected - set(data))
        raise Rejected(f"the answer has fields {extra} and lacks {missing}")
    signature = data["signature"]
    if not isinstance(signature, str) or (signature != "none" and signature not in candidate_ids):
        raise Rejected(f"signature {signature!r} is not among the candidates sent")
    confidence = data["confidence"]
    if confidence not in CONFIDENCES:
        raise Rejected(f"confidence {confidence!r} is not one of {', '.join(CONFIDENCES)}")
    cited = data["cited_lines"]
    if not isinstance(cited, list) or not cited:
        raise Rejected("the answer cites no line")
    if len(cited) > MAX_CITATIONS:
        raise Rejected(f"the answer cites more than {MAX_CITATIONS} lines")
    citations = [_citation(item, evidence) for item in cited]
    return Answer(
        signature=signature,
        citations=citations,
        rationale=_text(data, "rationale", MAX_RATIONALE_CHARS),
        next_step=_text(data, "next_step", MAX_NEXT_STEP_CHARS),
        confidence=confidence,
    )


def _citation(item: Any, evidence: Evidence) -> Citation:
    if not isinstance(item, dict) or set(item) != {"input", "line", "quote"}:
        raise Rejected("a citation is not {input, line, quote}")
    name, number, quote = item["input"], item["line"], item["quote"]
    if not isinstance(name, str) or not isinstance(number, int) or isinstance(number, bool):
        raise Rejected("a citation's input or line has the wrong type")
    sent = evidence.sent_line(name, number)
    if sent is None:
        raise Rejected(f"cited line {name}:{number} was not in the evidence sent")
    if not isinstance(quote, str) or len(quote) > MAX_QUOTE_CHARS:
        raise Rejected(f"the quote of line {name}:{number} is missing or too long")
    quote = quote.strip()
    if len(quote) < min(MIN_QUOTE_CHARS, len(sent.strip())) or not quote:
        raise Rejected(f"the quote of line {name}:{number} is too short to prove anything")
    if quote not in sent:
        raise Rejected(f"the quote of line {name}:{number} is not verbatim in that line")
    return Citation(name, number, quote, sent)
