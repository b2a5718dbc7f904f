"""The data types that travel between pipeline stages, and the report contract (`triage.report/1`).

Stages import these types and the stage before them; nothing here does any work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

REPORT_SCHEMA = "triage.report/1"


@dataclass(slots=True)
class Line:
    """One physical line of one input, numbered 1-based as given (LF, CRLF and lone CR alike)."""

    input: str
    number: int
    raw: str  # decoded text, wrappers included, line break removed
    text: str = ""  # ANSI stripped: what patterns are confirmed against
    # Fields read off the wrappers by `frame`:
    message: str = ""  # the payload once every wrapper and header is removed
    process: str | None = None  # e.g. "EngineCore_DP0", "Worker_TP1", "rank3"
    pid: str | None = None
    level: str | None = None
    timestamp: str | None = None
    host: str | None = None
    unit: str | None = None
    wrappers: tuple[str, ...] = ()
    repeated: int = 1  # Ray "[repeated Nx across cluster]"


@dataclass(slots=True)
class Hit:
    """A confirmed pattern match on one line."""

    signature: str
    pattern_index: int
    role: str  # decisive | supporting | not | evidence
    line: Line
    captures: dict[str, str] = field(default_factory=dict)
    confirmed: bool = True  # False when the confirm step timed out on a huge line


@dataclass(slots=True)
class Skipped:
    """Input that was not read, or only partly, and why."""

    input: str
    reason: str


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InputInfo(_Model):
    name: str
    lines: int
    format: str
    bytes: int = 0
    digest: str | None = None
    skipped: str | None = None


class EvidenceOut(_Model):
    input: str
    line: int
    text: str
    role: str = "decisive"
    count: int = 1  # identical lines folded into this one (many ranks, Ray repeats)


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


class Unrecognized(_Model):
    input: str
    line: int
    text: str
    fingerprint: str
    count: int = 1


class Report(_Model):
    schema_: str = Field(default=REPORT_SCHEMA, alias="schema")
    inputs: list[InputInfo]
    facts: dict[str, Any] = Field(default_factory=dict)
    hypotheses: list[Hypothesis] = Field(default_factory=list)
    unrecognized: list[Unrecognized] = Field(default_factory=list)
    skipped: list[dict[str, str]] = Field(default_factory=list)
    engine: str = ""  # scanning engine used: hyperscan | re2 | regex

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @property
    def failed(self) -> bool:
        """Exit status 1: an error-severity hypothesis or an unrecognized failure line."""
        return bool(self.unrecognized) or any(h.severity == "error" for h in self.hypotheses)

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")
