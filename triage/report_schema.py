"""The report contract `triage.report/1` in pydantic: the published JSON Schema
(`schemas/report.schema.json`) and validation of reports read back from outside (the bot,
history tests). Runs build `triage.models` dataclasses; a test keeps both field for field equal.
"""

from __future__ import annotations

from typing import Any

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


def validate_report(data: dict[str, Any]) -> dict[str, Any]:
    """Validate a report's JSON object against the contract; return it in contract form."""
    return Report.model_validate(data).model_dump(by_alias=True, mode="json")
