"""The report contract `triage.report/1` in pydantic: the published JSON Schema
(`schemas/report.schema.json`) and validation of reports read back from outside (the bot,
history tests). Runs build `triage.models` dataclasses; a test keeps both field for field equal.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from triage.models import REPORT_SCHEMA


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InputInfo(_Model):
    name: str
    lines: int
    format: str
    bytes: int = 0
    digest: str | None = None
    skip_reason: str | None = None  # why `skipped`, in a sentence (absent from older reports)
    skipped: str | None = None
    # lines where an engine start banner begins a launch, when the input holds more than one
    launches: list[int] = Field(default_factory=list)


class EvidenceOut(_Model):
    input: str
    line: int
    text: str
    role: str = "decisive"
    count: int = 1  # identical lines folded into this one (many ranks, Ray repeats)
    roles: list[str] = Field(default_factory=list)  # every role of this line, `role` first


class ExplainedOut(_Model):
    signature: str
    title: str = ""
    input: str = ""
    lines: list[int] = Field(default_factory=list)


class FixOut(_Model):
    do: str
    confidence: str
    when: str | None = None
    caveat: str | None = None
    likely: bool = False  # the differential branch this fix belongs to is favoured by the facts


class DifferentialOut(_Model):
    branch: str
    check: str
    favoured: bool = False
    why: list[str] = Field(default_factory=list)
    ask: str | None = None
    probe: str | None = None
    layer: str | None = None  # where the fault lives when this branch is the cause
    ruled_out: list[str] = Field(default_factory=list)  # log lines that contradict this branch


class SourceOut(_Model):
    project: str  # vllm | sglang | torch | nccl | ... (a source of the message catalog)
    file: str  # repository path, e.g. vllm/v1/core/kv_cache_utils.py
    function: str = ""  # enclosing function or Class.method; "" at module level
    kind: str = ""  # the call: an exception class, logger.error, TORCH_CHECK, NCCL WARN, ...
    releases: str = ""  # the catalogued releases that print it, as ranges: "0.10.0-0.11.2"
    release: str = ""  # the release `url` points at: the log's own version when it prints it
    line: int = 0  # the line at that release
    url: str = ""  # the line at that release's tag
    template: str = ""  # the message with its placeholders as <*>
    version_note: str | None = None  # the log's version does not print this message


class Hypothesis(_Model):
    rank: int
    signature: str
    title: str
    layer: str
    severity: str
    status: str
    score: float
    evidence: list[EvidenceOut]
    explains: list[ExplainedOut] = Field(default_factory=list)
    fixes: list[FixOut] = Field(default_factory=list)
    verify: list[str] = Field(default_factory=list)
    references: list[str] = Field(default_factory=list)
    summary: str = ""
    kind: str = "cause"
    captures: dict[str, str] = Field(default_factory=dict)
    differential: list[DifferentialOut] = Field(default_factory=list)
    applicability: str | None = None  # why the score was lowered for versions/hardware, if it was
    explain: list[str] = Field(default_factory=list)  # score terms, shown by --explain
    # signatures that fired on exactly the same lines but scored lower (one family, one cause)
    alternatives: list[str] = Field(default_factory=list)
    # decisive: a decisive pattern fired; inferred: only supporting lines, beside a failure they
    # would explain (see docs/ranking.md); located: the message catalog's source line
    basis: Literal["decisive", "inferred", "located"] = "decisive"
    source: SourceOut | None = None  # for basis "located": where the message is printed
    # lines a decisive pattern matched in the inputs, shown as evidence or not
    matched_lines: int = Field(default=0, ge=0)


class Unrecognized(_Model):
    input: str
    line: int
    text: str
    fingerprint: str
    count: int = 1


class LlmCitation(_Model):
    input: str
    line: int
    quote: str  # the part of the line the model quoted, verbatim
    text: str  # the whole line as it was sent (cleaned: redacted, prompts elided)


class LlmSuggestion(_Model):
    """The optional LLM step's answer (docs/llm.md), checked against the evidence it was sent."""

    label: str  # "suggestion from MODEL, not a knowledge-base match"
    model: str  # the model name given with --llm-model
    served_model: str  # the model id the server said answered
    endpoint: str  # the chat-completions URL, without credentials
    prompt_version: str
    temperature: float
    reason: str  # why the step ran: unrecognized lines, low scores, explicit request
    cached: bool  # the answer came from the cache (same input, KB, model and prompt)
    input_digest: str  # SHA-256 of the request message: the cache's input key
    kb_digest: str
    candidates: list[str]  # the signature ids the model could choose from
    signature: str  # one of the candidates, or "none"
    title: str | None = None  # that signature's title
    citations: list[LlmCitation]
    rationale: str
    next_step: str
    confidence: str  # low | medium | high


class Report(_Model):
    schema_: str = Field(default=REPORT_SCHEMA, alias="schema")
    inputs: list[InputInfo]
    facts: dict[str, Any] = Field(default_factory=dict)
    hypotheses: list[Hypothesis] = Field(default_factory=list)
    unrecognized: list[Unrecognized] = Field(default_factory=list)
    skipped: list[dict[str, str]] = Field(default_factory=list)
    engine: str = ""  # scanning engine used: hyperscan | re2 | regex
    llm: LlmSuggestion | None = None  # absent when the LLM step is off

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def validate_report(data: dict[str, Any]) -> dict[str, Any]:
    """Validate a report's JSON object against the contract; return it in contract form."""
    out = Report.model_validate(data).model_dump(by_alias=True, mode="json")
    if out["llm"] is None:
        del out["llm"]  # absent, as a run writes it, when the step was off
    return out
