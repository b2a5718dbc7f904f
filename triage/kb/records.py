"""The knowledge base as a run reads it: frozen records built from already validated JSON.

`triage.kb.schema` (pydantic) validates signature files when the knowledge base is built, loaded
from YAML or linted. A run reads the compiled knowledge base into these plain records, so that
start-up never imports pydantic (about 150 ms of a 10-line run). Field names, order and defaults
are the schema's; a test keeps the two equal.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

LAYERS = ("node", "harness", "engine", "model")


@dataclass(frozen=True, slots=True, kw_only=True)
class Pattern:
    """One pattern of a signature and its role."""

    regex: str
    role: str = "decisive"
    why: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionRange:
    """A release range where a signature applies."""

    introduced: str | None = None
    fixed: str | None = None
    last_affected: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Applicability:
    """Where a signature applies: engines and release ranges."""

    versions: dict[str, VersionRange] = field(default_factory=dict)
    gpu_arch: list[str] = field(default_factory=list)
    note: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DifferentialCheck:
    """A differential branch: its check, its evidence and its facts."""

    branch: str
    check: str
    evidence: list[str] = field(default_factory=list)
    facts: dict[str, str] = field(default_factory=dict)
    ask: str | None = None
    probe: str | None = None
    layer: str | None = None
    against: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fix:
    """A fix of a signature, with its confidence and branch."""

    do: str
    when: str | None = None
    branch: str | None = None
    confidence: str
    caveat: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Provenance:
    """Where a signature's text was seen."""

    seed: str | None = None
    rows: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    reproduction: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Examples:
    """A signature's example lines that must and must not match."""

    match: list[str] = field(default_factory=list)
    no_match: list[str] = field(default_factory=list)
    todo_match: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigCheck:
    """A launch-configuration check a signature declares."""

    env: str | None = None
    flag: str | None = None
    setting: str | None = None
    value: str | None = None
    requires: list[str] = field(default_factory=list)
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Signature:
    """A failure in the knowledge base (see `triage.kb.schema.Signature` for each field)."""

    schema_version: int = 1
    id: str
    aliases: list[str] = field(default_factory=list)
    title: str
    layer: str
    kind: str = "cause"
    severity: str
    status: str
    priority: int = 50
    summary: str
    details: str | None = None
    match: list[Pattern]
    not_: list[Pattern] = field(default_factory=list)
    window: int = 0
    explains: list[str] = field(default_factory=list)
    related: list[str] = field(default_factory=list)
    variant_of: str | None = None
    applies_to: Applicability = field(default_factory=Applicability)
    differential: list[DifferentialCheck] = field(default_factory=list)
    fixes: list[Fix] = field(default_factory=list)
    verify: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    provenance: Provenance
    examples: Examples = field(default_factory=Examples)
    config: list[ConfigCheck] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)

    @property
    def decisive(self) -> list[Pattern]:
        return [p for p in self.match if p.role == "decisive"]

    @property
    def supporting(self) -> list[Pattern]:
        return [p for p in self.match if p.role == "supporting"]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Signature:
        """From the schema's JSON form (`model_dump(by_alias=True, mode="json")`)."""
        d = dict(data)
        applies = d.pop("applies_to", None) or {}
        return cls(
            **{k: v for k, v in d.items() if k not in _NESTED},
            match=[Pattern(**p) for p in d.get("match", [])],
            not_=[Pattern(**p) for p in d.get("not", [])],
            applies_to=Applicability(
                versions={k: VersionRange(**v) for k, v in applies.get("versions", {}).items()},
                gpu_arch=list(applies.get("gpu_arch", [])),
                note=applies.get("note"),
            ),
            differential=[DifferentialCheck(**x) for x in d.get("differential", [])],
            fixes=[Fix(**x) for x in d.get("fixes", [])],
            provenance=Provenance(**d["provenance"]),
            examples=Examples(**(d.get("examples") or {})),
            config=[ConfigCheck(**x) for x in d.get("config", [])],
        )

    def to_dict(self) -> dict[str, Any]:
        """The schema's JSON form, keys in schema order ('not' for `not_`)."""
        return {("not" if k == "not_" else k): v for k, v in asdict(self).items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class EvidenceCheck:
    """The part of a differential branch a scan needs: its branch and its regexes."""

    branch: str
    evidence: list[str] = field(default_factory=list)
    against: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class SignatureCore:
    """What the pattern table reads of a signature, decoded for every signature at start-up; the
    rest of a record (title, summary, fixes, ...) is decoded only for signatures that fired."""

    id: str
    status: str
    match: list[Pattern]
    not_: list[Pattern] = field(default_factory=list)
    differential: list[EvidenceCheck] = field(default_factory=list)

    @property
    def decisive(self) -> list[Pattern]:
        return [p for p in self.match if p.role == "decisive"]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SignatureCore:
        """From `core_dict`'s form."""
        return cls(
            id=data["id"],
            status=data["status"],
            match=[Pattern(regex=r, role=role) for r, role in data["match"]],
            not_=[Pattern(regex=r) for r in data.get("not", ())],
            differential=[
                EvidenceCheck(branch=b, evidence=ev, against=ag)
                for b, ev, ag in data.get("differential", ())
            ],
        )


def core_dict(data: dict[str, Any]) -> dict[str, Any]:
    """The scan's part of a signature's JSON form (stored beside it in the compiled store)."""
    core: dict[str, Any] = {
        "id": data["id"],
        "status": data["status"],
        "match": [[p["regex"], p.get("role", "decisive")] for p in data.get("match", [])],
    }
    if data.get("not"):
        core["not"] = [p["regex"] for p in data["not"]]
    # Every branch, with or without regexes: the pattern table numbers them by position.
    diffs = [
        [d["branch"], d.get("evidence", []), d.get("against", [])]
        for d in data.get("differential", [])
    ]
    if diffs:
        core["differential"] = diffs
    return core


_NESTED = {
    "match",
    "not",
    "applies_to",
    "differential",
    "fixes",
    "provenance",
    "examples",
    "config",
}
