"""The data types that travel between pipeline stages, and the report contract (`triage.report/1`).

Stages import these types and the stage before them; nothing here does any work. The report
types are plain dataclasses (a run never imports pydantic: start-up); `triage.report_schema`
mirrors them in pydantic for the published JSON Schema and for validating reports read back, and
a test keeps the two identical.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

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

    def copy_at(self, input: str, number: int) -> Line:
        """This framed line as another copy (input, number): every field listed here, not through
        dataclasses.replace, which walks the fields on every call (once per kept copy)."""
        return Line(
            input,
            number,
            self.raw,
            self.text,
            self.message,
            self.process,
            self.pid,
            self.level,
            self.timestamp,
            self.host,
            self.unit,
            self.wrappers,
            self.repeated,
        )


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


@dataclass(slots=True, kw_only=True)
class InputInfo:
    """One input of the run as the report lists it."""

    name: str
    lines: int
    format: str
    bytes: int = 0
    digest: str | None = None
    skip_reason: str | None = None  # why `skipped`, in a sentence (absent from older reports)
    skipped: str | None = None
    # lines where an engine start banner begins a launch, when the input holds more than one
    launches: list[int] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class EvidenceOut:
    """A line that shows a hypothesis, as the report cites it."""

    input: str
    line: int
    text: str
    role: str = "decisive"
    count: int = 1  # identical lines folded into this one (many ranks, Ray repeats)
    # Every role this line plays, `role` first (a decisive line can also be a branch's evidence):
    # each line is listed once.
    roles: list[str] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class ExplainedOut:
    """A symptom a cause explains, as the report lists it."""

    signature: str
    title: str = ""
    input: str = ""
    lines: list[int] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class FixOut:
    """A fix to try, with its confidence."""

    do: str
    confidence: str
    when: str | None = None
    caveat: str | None = None
    likely: bool = False  # the differential branch this fix belongs to is favoured by the facts


@dataclass(slots=True, kw_only=True)
class DifferentialOut:
    """A differential branch of a hypothesis and what the log says about it."""

    branch: str
    check: str
    favoured: bool = False
    why: list[str] = field(default_factory=list)
    ask: str | None = None
    probe: str | None = None
    layer: str | None = None  # where the fault lives when this branch is the cause
    ruled_out: list[str] = field(default_factory=list)  # log lines that contradict this branch


@dataclass(slots=True, kw_only=True)
class SourceOut:
    """Where a located line's message is printed in the serving stack's source (the catalog)."""

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


@dataclass(slots=True, kw_only=True)
class Hypothesis:
    """One ranked answer: what broke, in which layer, the lines that show it, what to try."""

    rank: int
    signature: str
    title: str
    layer: str
    severity: str
    status: str
    score: float
    evidence: list[EvidenceOut]
    explains: list[ExplainedOut] = field(default_factory=list)
    fixes: list[FixOut] = field(default_factory=list)
    verify: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    summary: str = ""
    kind: str = "cause"
    captures: dict[str, str] = field(default_factory=dict)
    differential: list[DifferentialOut] = field(default_factory=list)
    applicability: str | None = None  # why the score was lowered for versions/hardware, if it was
    explain: list[str] = field(default_factory=list)  # score terms, shown by --explain
    # signatures that fired on exactly the same lines but scored lower (one family, one cause)
    alternatives: list[str] = field(default_factory=list)
    # decisive: a decisive pattern fired; inferred: only supporting lines, beside a failure they
    # would explain (see docs/ranking.md); located: the message catalog named the source line
    # that printed it, and no curated signature explains it (docs/catalog.md)
    basis: str = "decisive"
    source: SourceOut | None = None  # for basis "located": where the message is printed
    # Lines a decisive pattern of this signature matched in the inputs, shown or not: evidence
    # keeps a bounded sample (folded repeats, at most MAX_EVIDENCE), this counts them all.
    # 0 for an inferred or located hypothesis (no decisive line).
    matched_lines: int = 0

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> Hypothesis:
        return cls(
            **{k: v for k, v in data.items() if k not in _HYPOTHESIS_LISTS},
            evidence=_each(EvidenceOut, data.get("evidence", [])),
            explains=_each(ExplainedOut, data.get("explains", [])),
            fixes=_each(FixOut, data.get("fixes", [])),
            differential=_each(DifferentialOut, data.get("differential", [])),
            source=SourceOut(**data["source"]) if data.get("source") else None,
        )


_HYPOTHESIS_LISTS = {"evidence", "explains", "fixes", "differential", "source"}


@dataclass(slots=True, kw_only=True)
class Unrecognized:
    """A failure line no signature knows and the catalog did not locate."""

    input: str
    line: int
    text: str
    fingerprint: str
    count: int = 1


@dataclass(slots=True, kw_only=True)
class Report:
    """Everything one run found (the JSON report contract, docs/report.md)."""

    schema_: str = REPORT_SCHEMA  # "schema" in JSON
    inputs: list[InputInfo]
    facts: dict[str, Any] = field(default_factory=dict)
    hypotheses: list[Hypothesis] = field(default_factory=list)
    unrecognized: list[Unrecognized] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    engine: str = ""  # scanning engine used: hyperscan | re2 | regex
    # the optional LLM step's checked suggestion (`triage.llm`); None, and absent from the JSON,
    # when the step is off or dropped its answer
    llm: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        """Exit status 1: an error-severity hypothesis or an unrecognized failure line."""
        return bool(self.unrecognized) or any(h.severity == "error" for h in self.hypotheses)

    def to_json_dict(self) -> dict[str, Any]:
        """The `triage.report/1` JSON object (keys in contract order)."""
        data = asdict(self)
        if data["llm"] is None:
            del data["llm"]
        return {("schema" if k == "schema_" else k): v for k, v in data.items()}

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> Report:
        """A report from its JSON object (validate it with `triage.report_schema` first when it
        comes from outside)."""
        known = {f.name for f in fields(cls)} | {"schema"}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown report fields: {', '.join(sorted(unknown))}")
        return cls(
            schema_=data.get("schema", REPORT_SCHEMA),
            inputs=_each(InputInfo, data.get("inputs", [])),
            facts=dict(data.get("facts", {})),
            hypotheses=[Hypothesis.from_json_dict(h) for h in data.get("hypotheses", [])],
            unrecognized=_each(Unrecognized, data.get("unrecognized", [])),
            skipped=[dict(x) for x in data.get("skipped", [])],
            engine=data.get("engine", ""),
            llm=data.get("llm"),
        )


_T = TypeVar("_T")


def _each(cls: type[_T], items: list[dict[str, Any]]) -> list[_T]:
    return [cls(**item) for item in items]
