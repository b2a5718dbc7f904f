"""The signature file schema: strict pydantic models of `signatures/<layer>/<id>.yaml`.

Unknown fields and malformed values are errors; loading (YAML parsing, file discovery) lives in
`triage.kb.load`. Regex syntax and example checks live in `triage.kb.lint`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Layer = Literal["node", "harness", "engine", "model"]
Severity = Literal["error", "warning", "info"]
KnowledgeStatus = Literal["fixed", "workaround", "partly-fixed", "open", "dropped", "withdrawn"]
Confidence = Literal["demonstrated", "suggested", "lead"]
Role = Literal["decisive", "supporting"]
# cause: a failure in its own right; symptom: a consequence that other causes explain (it is shown
# alone only when nothing explains it); knowledge: an entry with no log text (match: []).
Kind = Literal["cause", "symptom", "knowledge"]

LAYERS: tuple[Layer, ...] = ("node", "harness", "engine", "model")
COMPONENTS = ("vllm", "sglang", "torch", "cuda", "driver", "nccl", "triton", "python", "lmcache")

_ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_VERSION_RE = re.compile(r"^[0-9]+(?:\.[0-9]+)*(?:[.-]?(?:a|b|rc|dev|post)[0-9]*)*$")
_FACT_CONDITION_RE = re.compile(r"^(?:==|!=|>=|<=|>|<|~)\s*\S.*$|^(?:present|absent)$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class Pattern(_Strict):
    """One regex over a log line (wrappers such as journald or docker prefixes may precede it)."""

    regex: str = Field(min_length=3)
    role: Role = "decisive"
    why: str | None = None  # why this pattern exists, when it is not obvious


class VersionRange(_Strict):
    """OSV-style range: affected from `introduced` (inclusive) up to `fixed` (exclusive)."""

    introduced: str | None = None
    fixed: str | None = None
    last_affected: str | None = None

    @field_validator("introduced", "fixed", "last_affected")
    @classmethod
    def _version_shape(cls, value: str | None) -> str | None:
        if value is not None and not _VERSION_RE.match(value):
            raise ValueError(f"not a version: {value!r}")
        return value


class Applicability(_Strict):
    """Where the signature's message or fix applies; out of range lowers the score, never hides."""

    versions: dict[str, VersionRange] = Field(default_factory=dict)
    gpu_arch: list[str] = Field(default_factory=list)  # e.g. sm70, sm80, sm90, sm100, sm121
    note: str | None = None

    @field_validator("versions")
    @classmethod
    def _known_components(cls, value: dict[str, VersionRange]) -> dict[str, VersionRange]:
        for name in value:
            if name not in COMPONENTS:
                raise ValueError(f"unknown component {name!r}; known: {', '.join(COMPONENTS)}")
        return value


class DifferentialCheck(_Strict):
    """One branch of a differential diagnosis: a cause the message may have and how to tell it."""

    branch: str = Field(min_length=2)
    check: str = Field(min_length=5)
    # Regexes over the whole log that favour this branch (e.g. 'Model loading took ... GiB').
    evidence: list[str] = Field(default_factory=list)
    # Conditions on extracted facts that favour this branch, e.g. {"data_parallel_size": "> 1"}.
    facts: dict[str, str] = Field(default_factory=dict)
    ask: str | None = None  # what to collect from the reporter (a command or a file)
    probe: str | None = None  # the `triage probe` section that would supply it
    # Where the fault lives when this branch is the cause (default: the signature's layer).
    layer: Layer | None = None
    # Regexes over the whole log that contradict this branch: a line matching one rules it out
    # (e.g. 'NET/IB : No device found' for an InfiniBand branch).
    against: list[str] = Field(default_factory=list)

    @field_validator("facts")
    @classmethod
    def _conditions(cls, value: dict[str, str]) -> dict[str, str]:
        for key, cond in value.items():
            if not _FACT_CONDITION_RE.match(cond):
                raise ValueError(
                    f"fact condition for {key!r} must be like '> 1', '== x', 'present'"
                )
        return value


class Fix(_Strict):
    """One staged fix; fixes are tried in file order."""

    do: str = Field(min_length=5)
    when: str | None = None
    branch: str | None = None  # ties the fix to a differential branch
    confidence: Confidence
    caveat: str | None = None  # the source's own caveat ("two changes at once ...")


class Provenance(_Strict):
    """Where the knowledge comes from: a seed report row, public URLs, or a reproduction."""

    seed: str | None = None  # file name under shared/seeds
    rows: list[str] = Field(default_factory=list)  # INVENTORY row ids, e.g. ["E6"]
    urls: list[str] = Field(default_factory=list)
    reproduction: str | None = None  # how the example text was produced for real

    @model_validator(mode="after")
    def _some_source(self) -> Provenance:
        if not (self.seed or self.urls or self.reproduction):
            raise ValueError("provenance needs a seed, a URL or a reproduction")
        for url in self.urls:
            if not url.startswith(("https://", "http://")):
                raise ValueError(f"provenance url must be http(s): {url!r}")
        return self


class Examples(_Strict):
    match: list[str] = Field(default_factory=list)
    no_match: list[str] = Field(default_factory=list)
    todo_match: list[str] = Field(default_factory=list)  # known misses: reported, not failed


class ConfigCheck(_Strict):
    """A launch-configuration fingerprint for `triage lint` (env var, flag, or unit setting)."""

    env: str | None = None
    flag: str | None = None
    setting: str | None = None  # systemd / docker / k8s setting, e.g. MemoryDenyWriteExecute
    value: str | None = None  # regex over the value; absent: any value
    requires: list[str] = Field(default_factory=list)  # other flags/env that must also be present
    message: str = Field(min_length=5)

    @model_validator(mode="after")
    def _one_target(self) -> ConfigCheck:
        if sum(x is not None for x in (self.env, self.flag, self.setting)) != 1:
            raise ValueError("a config check names exactly one of env, flag, setting")
        return self


SignatureId = Annotated[str, Field(pattern=_ID_RE.pattern, min_length=3, max_length=80)]


class Signature(_Strict):
    """A failure in the knowledge base."""

    schema_version: Literal[1] = 1
    id: SignatureId
    aliases: list[SignatureId] = Field(default_factory=list)
    title: str = Field(min_length=10, max_length=120)
    layer: Layer
    kind: Kind = "cause"
    severity: Severity
    status: KnowledgeStatus
    priority: int = Field(default=50, ge=0, le=100)
    summary: str = Field(min_length=20)
    details: str | None = None
    match: list[Pattern]
    not_: list[Pattern] = Field(default_factory=list, alias="not")
    window: int = Field(
        default=0, ge=0, le=2000
    )  # supporting evidence must lie this close (0: anywhere)
    explains: list[SignatureId] = Field(default_factory=list)
    related: list[SignatureId] = Field(default_factory=list)
    # A situation-specific variant of a generic signature whose decisive patterns it shares (the
    # OOM of one phase); it leads only with evidence of its own (docs/ranking.md, families).
    variant_of: SignatureId | None = None
    applies_to: Applicability = Field(default_factory=Applicability)
    differential: list[DifferentialCheck] = Field(default_factory=list)
    fixes: list[Fix] = Field(default_factory=list)
    verify: list[str] = Field(default_factory=list)
    references: list[str] = Field(default_factory=list)
    provenance: Provenance
    examples: Examples = Field(default_factory=Examples)
    config: list[ConfigCheck] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _consistent(self) -> Signature:
        decisive = [p for p in self.match if p.role == "decisive"]
        if self.kind == "knowledge":
            if self.match:
                raise ValueError("a knowledge entry has match: []")
        else:
            if not decisive:
                raise ValueError("a signature needs at least one decisive pattern")
            if not self.examples.match:
                raise ValueError("examples.match needs at least one real line")
            if not self.examples.no_match:
                raise ValueError("examples.no_match needs at least one near miss")
        if not self.fixes and self.kind == "cause" and self.severity != "info":
            raise ValueError("a cause needs at least one fix (or a lead)")
        branches = {d.branch for d in self.differential}
        for fix in self.fixes:
            if fix.branch is not None and fix.branch not in branches:
                raise ValueError(f"fix names unknown differential branch {fix.branch!r}")
        if self.id in self.explains:
            raise ValueError("a signature cannot explain itself")
        if self.variant_of == self.id:
            raise ValueError("a signature cannot be a variant of itself")
        return self

    @property
    def decisive(self) -> list[Pattern]:
        return [p for p in self.match if p.role == "decisive"]

    @property
    def supporting(self) -> list[Pattern]:
        return [p for p in self.match if p.role == "supporting"]


def json_schema() -> dict[str, object]:
    """The JSON Schema of a signature file (for editors and outside tools)."""
    return Signature.model_json_schema(by_alias=True)
