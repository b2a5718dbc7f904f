"""Server-side corroboration: vLLM's periodic stats lines (parsed by the triage engine into
`facts["stats"]`) read as a time series next to the benchmark results.

- generation stuck at 0 tok/s with requests running for several intervals: a hang (engine/node);
- KV cache pinned at ~100% with requests waiting: queueing and preemption, not model speed;
- a high prefix-cache hit rate: supports a cache-contamination finding, or warns about one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from triage.benchmarks.model import Finding

HIGH_HIT_RATE = 50.0  # percent
KV_PINNED = 99.0  # percent
STALL_MIN_ROWS = 3  # consecutive stats lines (>= 20-30 s) before a stall is called a hang


@dataclass
class ServerSummary:
    inputs: list[str] = field(default_factory=list)
    stats_rows: int = 0
    stalls: list[dict[str, Any]] = field(default_factory=list)
    kv_pinned_rows: int = 0
    max_prefix_hit_rate: float | None = None
    hypotheses: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "inputs": self.inputs,
            "stats_rows": self.stats_rows,
            "stalls": self.stalls,
            "kv_pinned_rows": self.kv_pinned_rows,
            "max_prefix_hit_rate": self.max_prefix_hit_rate,
            "hypotheses": self.hypotheses,
        }


def summarize_stats(stats: list[dict[str, Any]]) -> ServerSummary:
    s = ServerSummary(stats_rows=len(stats))
    run: list[dict[str, Any]] = []

    def close() -> None:
        if len(run) >= STALL_MIN_ROWS:
            s.stalls.append(
                {
                    "input": run[0]["input"],
                    "first_line": run[0]["line"],
                    "last_line": run[-1]["line"],
                    "rows": len(run),
                    "running": max(r.get("running", 0) for r in run),
                }
            )
        run.clear()

    for row in stats:
        stalled = (
            row.get("prompt_tps") == 0.0
            and row.get("gen_tps") == 0.0
            and (row.get("running") or 0) > 0
        )
        if stalled and (not run or run[-1]["input"] == row["input"]):
            run.append(row)
        else:
            close()
            if stalled:
                run.append(row)
        kv = row.get("gpu_kv_cache_usage")
        waiting = (row.get("waiting") or 0) + (row.get("pending") or 0)
        if kv is not None and kv >= KV_PINNED and waiting > 0:
            s.kv_pinned_rows += 1
        hit = row.get("prefix_cache_hit_rate")
        if hit is not None:
            prev = s.max_prefix_hit_rate
            s.max_prefix_hit_rate = hit if prev is None else max(prev, hit)
    close()
    return s


def from_logs(paths: list[str]) -> ServerSummary:
    """Run the triage engine over server logs; summarise their stats lines and hypotheses."""
    from triage.api import Engine, RunOptions, load_kb

    options = RunOptions()
    if hasattr(options, "stats"):  # stats lines are scanned only on request
        options.stats = True
    report = Engine(load_kb(), options).run(paths)
    stats = report.facts.get("stats") or []
    summary = summarize_stats(stats if isinstance(stats, list) else [])
    summary.inputs = [i.name for i in report.inputs]
    summary.hypotheses = [
        {
            "rank": h.rank,
            "signature": h.signature,
            "layer": h.layer,
            "severity": h.severity,
            "score": h.score,
        }
        for h in report.hypotheses[:5]
    ]
    return summary


def corroborate(summary: ServerSummary, findings: list[Finding], source: str) -> list[Finding]:
    contaminated = any(
        f.check in ("implied-prefill", "warmup-duplicate", "reused-prompts", "reused-seed")
        for f in findings
    )
    out: list[Finding] = [
        Finding(
            "server-stalled",
            "error",
            source,
            "server",
            None,
            f"server stats show {st['rows']} consecutive intervals with 0.0 tokens/s while "
            f"{st['running']} request(s) were running ({st['input']} lines "
            f"{st['first_line']}-{st['last_line']}): the engine hung; failures and timeouts of "
            f"the benchmark in those minutes are its consequence, not the harness's",
            dict(st),
            invalid=False,
        )
        for st in summary.stalls
    ]
    if summary.kv_pinned_rows:
        out.append(
            Finding(
                "server-kv-pinned",
                "warning",
                source,
                "server",
                None,
                f"{summary.kv_pinned_rows} stats line(s) show the KV cache at >= {KV_PINNED:.0f}% with "
                f"requests waiting: TTFT there is queueing and preemption",
                {"rows": summary.kv_pinned_rows},
                invalid=False,
            )
        )
    hit = summary.max_prefix_hit_rate
    if hit is not None and hit >= HIGH_HIT_RATE:
        out.append(
            Finding(
                "server-prefix-cache-hits",
                "warning" if not contaminated else "info",
                source,
                "server",
                None,
                (
                    f"server reports a prefix cache hit rate up to {hit:.1f}%: supports the "
                    f"cache-contamination findings above"
                    if contaminated
                    else f"server reports a prefix cache hit rate up to {hit:.1f}% during the run: if these "
                    f"points claim cold prompts, part of their TTFT measured the cache"
                ),
                {"max_prefix_cache_hit_rate": hit},
                invalid=False,
            )
        )
    return out
