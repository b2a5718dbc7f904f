"""The shapes every benchmark parser produces: one `Point` per benchmark run (a grid point), one
`Request` per measured request. Parsers fill what their format records and leave the rest None;
checks skip what they cannot see and say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Request:
    """One measured request of a point, in the order the client sent it (index 0 first)."""

    index: int
    input_len: int | None = None
    output_len: int | None = None
    ttft_s: float | None = None
    latency_s: float | None = None
    success: bool = True
    error: str = ""
    # Identity of the prompt, when the format lets us know it: a hash of the prompt text or of an
    # id the harness recorded ("prompt"), or of the greedy output plus the input length ("output",
    # weaker: two different prompts rarely give one greedy output, the same prompt always does).
    prompt_key: str | None = None
    key_kind: str = ""

    @property
    def implied_prefill_tps(self) -> float | None:
        """Input tokens / TTFT: the prefill rate this request would imply if nothing was cached."""
        if not self.success or not self.input_len or not self.ttft_s or self.ttft_s <= 0:
            return None
        return self.input_len / self.ttft_s


@dataclass
class Point:
    """One benchmark run (a grid point): its settings, summary metrics and per-request rows."""

    source: str  # the results file
    label: str  # "<file name>#<n>" for files holding several runs, else the file name
    fmt: str  # vllm | sglang | aiperf | genai-perf | guidellm | csv
    order: int = 0  # position among all points given (earlier points first)
    requests: list[Request] = field(default_factory=list)
    concurrency: float | None = None  # configured max concurrency (or streams)
    request_rate: float | None = None  # configured request rate; None for inf / unknown
    seed: str | None = None  # prompt seed when recorded (vllm --metadata seed=..., CSV column)
    num_prompts: int | None = None
    completed: int | None = None
    failed: int | None = None
    duration_s: float | None = None
    request_throughput: float | None = None
    output_throughput: float | None = None
    median_ttft_ms: float | None = None
    timeout_s: float | None = None  # client timeout when recorded
    # The harness sends the first input request as its readiness test / warm-up, so measured
    # request 0 repeats a prompt the server has just seen (vllm bench serve, SGLang bench_serving).
    warmup_is_first: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def successes(self) -> list[Request]:
        return [r for r in self.requests if r.success]

    @property
    def n_total(self) -> int | None:
        if self.requests:
            return len(self.requests)
        if self.completed is not None and self.failed is not None:
            return self.completed + self.failed
        return self.num_prompts

    @property
    def n_success(self) -> int | None:
        if self.requests:
            return len(self.successes)
        return self.completed

    @property
    def typical_input_len(self) -> int | None:
        lens = sorted(r.input_len for r in self.requests if r.input_len)
        return lens[len(lens) // 2] if lens else None


@dataclass
class Finding:
    """One thing a check flagged. `row` is the request index, or None for the whole point."""

    check: str  # short id: implied-prefill, warmup-duplicate, reused-prompts, ...
    severity: str  # error | warning | info
    source: str
    point: str
    row: int | None
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    invalid: bool = True  # goes to the invalid-row ledger (cliffs and notes do not)

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "severity": self.severity,
            "source": self.source,
            "point": self.point,
            "row": self.row,
            "message": self.message,
            "evidence": self.evidence,
            "invalid": self.invalid,
        }
