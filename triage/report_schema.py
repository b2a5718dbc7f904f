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


# The facts read off pasted snapshots (triage/snapshots, docs/report.md): documented in the
# published schema as optional properties of `facts`; other facts stay free-form.
_WHERE = {"input": {"type": "string"}, "line": {"type": "integer"}}
_LIMIT = {"anyOf": [{"type": "integer"}, {"const": "unlimited"}]}
_SCALAR = {"type": ["string", "integer"]}
SNAPSHOT_FACTS: dict[str, Any] = {
    "ulimit": {
        "type": "object",
        "description": "ulimit -a: each limit by what it limits (memlock_kb, nofile, stack_kb...)",
        "properties": {
            "memlock_kb": _LIMIT,
            "nofile": _LIMIT,
            "stack_kb": _LIMIT,
            "nproc": _LIMIT,
            **_WHERE,
        },
        "additionalProperties": {"anyOf": [_LIMIT, {"type": "string"}]},
    },
    "gpus": {
        "type": "array",
        "description": "GPUs from nvidia-smi -q sections and the nvidia-smi table, by bus id",
        "items": {
            "type": "object",
            "properties": {
                "index": {"type": "integer"},
                "bus_id": {"type": "string"},
                "name": {"type": "string"},
                "persistence_mode": {"type": "string"},
                "mig_mode": {"type": "string"},
                "ecc_uncorrected": _SCALAR,
                "retired_pages_pending": {"type": "string"},
                "remapped_rows_pending": {"type": "string"},
                "remapping_failure": {"type": "string"},
                **_WHERE,
            },
            "required": ["index", "bus_id"],
        },
    },
    "gpu_topology": {
        "type": "object",
        "description": "nvidia-smi topo -m: links[GPUa][GPUb] is NV#, SYS, NODE, PHB, PXB or PIX",
        "properties": {
            "gpus": {"type": "array", "items": {"type": "string"}},
            "links": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                },
            },
            "nvlink": {"type": "boolean"},
            "cpu_affinity": {"type": "object", "additionalProperties": {"type": "string"}},
            **_WHERE,
        },
        "required": ["gpus", "links", "nvlink"],
    },
    "units": {
        "type": "array",
        "description": "systemctl status: one per unit header",
        "items": {
            "type": "object",
            "properties": {
                "unit": {"type": "string"},
                "description": {"type": "string"},
                "loaded": {"type": "string"},
                "active": {"type": "string"},
                "sub": {"type": "string"},
                "result": {"type": "string"},
                "main_pid": {"type": "integer"},
                "exit_code_kind": {"type": "string"},
                "exit_status": {"type": "string"},
                **_WHERE,
            },
            "required": ["unit"],
        },
    },
    "pods": {
        "type": "array",
        "description": "kubectl get pods rows and describe pod container states, by pod name",
        "items": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "namespace": {"type": "string"},
                "ready": {"type": "string"},
                "status": {"type": "string"},
                "restarts": {"type": "integer"},
                "state": {"type": "string"},
                "state_reason": {"type": "string"},
                "last_state": {"type": "string"},
                "last_reason": {"type": "string"},
                "exit_code": {"type": "integer"},
                **_WHERE,
            },
            "required": ["name"],
        },
    },
    "nccl_interfaces": {
        "type": "object",
        "description": "NCCL's NET/Socket and NET/IB lists, OOB and bootstrap interface",
        "properties": {
            "socket": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "address": {"type": "string"}},
                },
            },
            "ib": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "device": {"type": "string"},
                        "port": {"type": "integer"},
                        "link": {"type": "string"},
                    },
                },
            },
            "oob": {"type": "string"},
            "bootstrap": {"type": "string"},
            "ib_device_found": {"type": "boolean"},
            "hosts": {"type": "array", "items": {"type": "string"}},
            **_WHERE,
        },
    },
}


class Report(_Model):
    schema_: str = Field(default=REPORT_SCHEMA, alias="schema")
    inputs: list[InputInfo]
    facts: dict[str, Any] = Field(
        default_factory=dict, json_schema_extra={"properties": SNAPSHOT_FACTS}
    )
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
