"""What the model is asked: the knowledge base's candidate signatures, the evidence, the answer's
JSON Schema, and the exact request body.

The model chooses among the candidates or says "none"; it may not invent a signature. Candidates
are the report's own hypotheses first, then the signatures closest to each unrecognized line
(`triage.kb.commands.closest_known`: rapidfuzz similarity to titles and example lines). The schema
goes to the server as the OpenAI-compatible `response_format` of type `json_schema`, which vLLM
and SGLang turn into guided decoding; the answer is checked afterwards all the same
(`triage.llm.answer`), because a server may ignore it.

`PROMPT_VERSION` is part of every cache key: change it whenever the wording, the schema or the
evidence format changes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from triage.api import KnowledgeBase
from triage.kb.records import Signature
from triage.llm.evidence import Evidence
from triage.models import Report

PROMPT_VERSION = "triage-ask/1"
MAX_CANDIDATES = 6
MAX_TOKENS = 700
MAX_CITATIONS = 6
MAX_QUOTE_CHARS = 400
MAX_RATIONALE_CHARS = 800
MAX_NEXT_STEP_CHARS = 400
CONFIDENCES = ("low", "medium", "high")

SYSTEM_PROMPT = """\
You diagnose failures of LLM inference servers (vLLM, SGLang) and the stack under them \
(PyTorch, NCCL, CUDA, the GPU driver, the kernel, containers) from log excerpts.
A knowledge base of known failures did not explain this log with confidence. You get its \
closest candidate signatures and numbered windows of the log (a line marked ">" is one the \
knowledge base flagged).
Rules:
- "signature" is the id of the one candidate the evidence shows, or "none" when no candidate \
fits. Never name a signature that is not in the list.
- "cited_lines" are the lines that prove your answer: the input name and line number as shown, \
and "quote", a part of that line copied character for character. Cite only lines shown.
- "rationale" says in two or three sentences why those lines show that cause.
- "next_step" is one concrete thing the operator should do or check next on the server \
(a flag, a setting, a version, a log to collect), not advice to read the logs.
- "confidence" is low, medium or high.
Answer with the JSON object only."""


@dataclass(frozen=True)
class Candidate:
    id: str
    title: str
    layer: str
    summary: str
    fixes: tuple[tuple[str, str], ...]  # (what to do, confidence)

    def render(self) -> str:
        out = [f"- id: {self.id}", f"  title: {self.title}", f"  layer: {self.layer}"]
        out.append(f"  cause: {_cut(' '.join(self.summary.split()), 600)}")
        for do, confidence in self.fixes:
            out.append(f"  fix ({confidence}): {_cut(' '.join(do.split()), 300)}")
        return "\n".join(out)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _candidate(sig: Signature) -> Candidate:
    fixes = tuple((f.do, f.confidence) for f in sig.fixes[:3])
    return Candidate(sig.id, sig.title, sig.layer, sig.summary, fixes)


def candidates(report: Report, kb: KnowledgeBase, limit: int = MAX_CANDIDATES) -> list[Candidate]:
    """The signatures the model may choose from (see the module docstring)."""
    ids: list[str] = [h.signature for h in report.hypotheses[:3]]
    lines = [u.text for u in report.unrecognized[:4]]
    if lines:
        from triage.kb.commands import closest_known

        for text in lines:
            ids.extend(sig.id for sig, _, _ in closest_known(kb.signatures, text, limit=3))
    out = []
    for sig_id in dict.fromkeys(ids):
        sig = kb.by_id.get(sig_id)
        if sig is not None and sig.kind != "knowledge":
            out.append(_candidate(sig))
    return out[:limit]


def answer_schema(candidate_ids: Sequence[str], inputs: Sequence[str]) -> dict[str, Any]:
    """The JSON Schema of an answer: guided decoding can only produce the listed ids and inputs."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["signature", "cited_lines", "rationale", "next_step", "confidence"],
        "properties": {
            "signature": {"type": "string", "enum": [*candidate_ids, "none"]},
            "cited_lines": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_CITATIONS,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["input", "line", "quote"],
                    "properties": {
                        "input": {"type": "string", "enum": list(inputs)},
                        "line": {"type": "integer", "minimum": 1},
                        "quote": {"type": "string", "maxLength": MAX_QUOTE_CHARS},
                    },
                },
            },
            "rationale": {"type": "string", "maxLength": MAX_RATIONALE_CHARS},
            "next_step": {"type": "string", "maxLength": MAX_NEXT_STEP_CHARS},
            "confidence": {"type": "string", "enum": list(CONFIDENCES)},
        },
    }


def user_message(cands: Sequence[Candidate], evidence: Evidence) -> str:
    listed = "\n".join(c.render() for c in cands) if cands else "(no candidate: answer none)"
    return (
        f"Candidate signatures from the knowledge base:\n{listed}\n\n"
        f"Log evidence (secrets redacted, logged prompts elided):\n{evidence.render()}\n"
    )


def payload(model: str, cands: Sequence[Candidate], evidence: Evidence) -> dict[str, Any]:
    """The chat-completions request body (temperature 0 and a fixed seed: reproducible)."""
    schema = answer_schema([c.id for c in cands], evidence.inputs())
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": user_message(cands, evidence)},
        ],
        "temperature": 0,
        "seed": 0,
        "max_tokens": MAX_TOKENS,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "triage_answer", "schema": schema, "strict": True},
        },
    }


def encode(body: dict[str, Any]) -> bytes:
    """The bytes sent, and printed by --llm-dry-run: one encoding for both."""
    return json.dumps(body, ensure_ascii=False, indent=2).encode("utf-8") + b"\n"
