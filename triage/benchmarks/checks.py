"""The checks: what makes a benchmark row or point untrustworthy, with the numbers that show it.

Every check reads `Point`s and returns `Finding`s; nothing here rewrites or drops a number.
Thresholds are screening heuristics (see docs/bench.md): a flagged row is suspect, an unflagged
row is not thereby proven clean.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import dataclass
from statistics import median

from triage.benchmarks.model import Finding, Point, Request
from triage.benchmarks.parsers import timeout_in

DEFAULT_CEILING_TPS = 60_000.0


@dataclass
class Thresholds:
    # Implied prefill (input tokens / TTFT) above this is taken for a prefix-cache hit. The seed
    # campaign (8x H200, large MoE models) never saw an uncached prefill near 60K tok/s; small
    # models on fast GPUs can exceed it: set it per GPU and model size (--ceiling).
    ceiling_tps: float = DEFAULT_CEILING_TPS
    # Prompts shorter than this are not screened: their TTFT is dominated by fixed overheads.
    min_input_tokens: int = 1024
    # Request 0 (the warm-up's twin) is flagged when its TTFT per input token is below this
    # fraction of the fastest other request of a one-at-a-time point. With concurrency the others
    # queue behind it (request 1 legitimately waits one prefill chunk), so there the bar is
    # `1 / bimodal_gap`: a cache hit is tens to hundreds of times faster, queueing is not.
    warmup_ratio: float = 0.5
    # Two TTFT groups this far apart (per input token) inside one point: a bimodal point.
    bimodal_gap: float = 10.0
    # Point-level: success share below this is "few successes"; error share above it is flagged.
    min_success_share: float = 0.5
    max_error_rate: float = 0.05
    # Sweep cliffs: throughput falling by this share, or median TTFT growing this many times,
    # between neighbouring concurrency levels.
    throughput_drop: float = 0.30
    ttft_jump: float = 5.0
    # Share of a point's prompts found in an earlier point that makes it a re-used prompt set.
    reuse_share: float = 0.5


def _norm_ttft(r: Request) -> float | None:
    """TTFT per input token (seconds/token), or the TTFT itself when the length is unknown."""
    if not r.success or r.ttft_s is None:
        return None
    return r.ttft_s / r.input_len if r.input_len else r.ttft_s


def check_implied_prefill(p: Point, t: Thresholds) -> list[Finding]:
    out = []
    for r in p.successes:
        rate = r.implied_prefill_tps
        if rate is None or (r.input_len or 0) < t.min_input_tokens or rate <= t.ceiling_tps:
            continue
        out.append(
            Finding(
                "implied-prefill",
                "error",
                p.source,
                p.label,
                r.index,
                f"{r.input_len:,} input tokens in {r.ttft_s:.3g} s = {rate:,.0f} tok/s implied "
                f"prefill, above the {t.ceiling_tps:,.0f} tok/s ceiling: likely a prefix-cache hit, "
                f"not a prefill",
                {
                    "input_len": r.input_len,
                    "ttft_s": r.ttft_s,
                    "implied_prefill_tps": round(rate, 1),
                    "ceiling_tps": t.ceiling_tps,
                },
            )
        )
    return out


def check_warmup_duplicate(p: Point, t: Thresholds) -> list[Finding]:
    """vllm bench serve and SGLang bench_serving send input request 0 as the readiness test /
    warm-up, so measured request 0 repeats a prompt the server has just cached."""
    if not p.warmup_is_first or not p.requests:
        return []
    first = p.requests[0]
    first_norm = _norm_ttft(first)
    others = [(r, n) for r in p.requests[1:] if (n := _norm_ttft(r)) is not None]
    if first_norm is None or not others:
        return []
    fastest_other, fastest_norm = min(others, key=lambda x: x[1])
    sequential = p.concurrency is not None and p.concurrency <= 1
    ratio = t.warmup_ratio if sequential else 1.0 / t.bimodal_gap
    if first_norm >= ratio * fastest_norm:
        return []
    return [
        Finding(
            "warmup-duplicate",
            "error",
            p.source,
            p.label,
            0,
            f"request 0 repeats the warm-up prompt ({p.fmt} sends the first input request as its "
            f"test/warm-up request) and came back in {first.ttft_s:.3g} s, "
            f"{fastest_norm / first_norm:.0f}x faster per input token than the fastest other request "
            f"(#{fastest_other.index}: {fastest_other.ttft_s:.3g} s): served from the prefix cache",
            {
                "input_len": first.input_len,
                "ttft_s": first.ttft_s,
                "implied_prefill_tps": round(first.implied_prefill_tps or 0.0, 1) or None,
                "fastest_other_ttft_s": fastest_other.ttft_s,
                "fastest_other_row": fastest_other.index,
            },
        )
    ]


def _bimodal_fast_rows(p: Point, t: Thresholds) -> tuple[list[Request], float] | None:
    """The fast group of a point whose per-token TTFTs split in two groups `bimodal_gap` apart."""
    normed = sorted(
        ((n, r) for r in p.requests if (n := _norm_ttft(r)) is not None), key=lambda x: x[0]
    )
    if len(normed) < 2:
        return None
    best_gap, cut = 0.0, 0
    for i in range(len(normed) - 1):
        lo, hi = normed[i][0], normed[i + 1][0]
        if lo > 0 and hi / lo > best_gap:
            best_gap, cut = hi / lo, i + 1
    if best_gap < t.bimodal_gap:
        return None
    return [r for _, r in normed[:cut]], best_gap


def check_reuse(points: list[Point], t: Thresholds) -> list[Finding]:
    """Prompts, seeds or prompt hashes of an earlier grid point sent again by a later one."""
    out: list[Finding] = []
    seen_keys: dict[str, tuple[Point, int]] = {}
    seen_seeds: dict[tuple[str, int | None], Point] = {}
    for p in points:
        # 1. the same recorded prompt seed (and prompt length) as an earlier point
        if p.seed is not None:
            key = (p.seed, _len_bucket(p.typical_input_len))
            earlier = seen_seeds.get(key)
            if earlier is not None:
                out.append(
                    Finding(
                        "reused-seed",
                        "error",
                        p.source,
                        p.label,
                        None,
                        f"prompt seed {p.seed} was already used by {earlier.label}"
                        + (
                            f" at the same input length (~{p.typical_input_len:,} tokens)"
                            if p.typical_input_len
                            else ""
                        )
                        + ": this point re-sends that point's prompts, which the server may still "
                        "cache",
                        {
                            "seed": p.seed,
                            "earlier_point": earlier.label,
                            "input_len": p.typical_input_len,
                        },
                    )
                )
            else:
                seen_seeds[key] = p
        # 2. prompt hashes (or greedy-output fingerprints) already seen in an earlier point
        matches = [
            (r, seen_keys[r.prompt_key])
            for r in p.requests
            if r.prompt_key and r.prompt_key in seen_keys and seen_keys[r.prompt_key][0] is not p
        ]
        keyed = [r for r in p.requests if r.prompt_key]
        if matches:
            share = len(matches) / max(1, len(keyed))
            for r, (ep, erow) in matches:
                what = "prompt" if r.key_kind == "prompt" else "greedy output and input length"
                out.append(
                    Finding(
                        "reused-prompts",
                        "error",
                        p.source,
                        p.label,
                        r.index,
                        f"same {what} as {ep.label} row {erow}: a re-sent prompt"
                        + (f", TTFT {r.ttft_s:.3g} s" if r.ttft_s else ""),
                        {
                            "input_len": r.input_len,
                            "ttft_s": r.ttft_s,
                            "implied_prefill_tps": _round(r.implied_prefill_tps),
                            "earlier_point": ep.label,
                            "earlier_row": erow,
                            "key_kind": r.key_kind,
                            "share_of_point": round(share, 3),
                        },
                    )
                )
        # 3. no identities recorded: a multi-request point whose fast group is at a prompt length an
        #    earlier point already sent (the 1M, two-at-a-time case)
        elif len(p.requests) >= 2 and not keyed:
            fast = _bimodal_fast_rows(p, t)
            earlier_same = [
                e
                for e in points[: p.order]
                if e is not p
                and e.typical_input_len
                and _len_bucket(e.typical_input_len) == _len_bucket(p.typical_input_len)
                and (e.seed is None or p.seed is None or e.seed == p.seed)
            ]
            if fast and earlier_same:
                rows, gap = fast
                ep = earlier_same[-1]
                n_match = min(len(rows), len(ep.requests))
                out.extend(
                    Finding(
                        "reused-prompts",
                        "error",
                        p.source,
                        p.label,
                        r.index,
                        f"one of the {len(rows)} fastest of {len(p.requests)} requests "
                        f"({gap:.0f}x faster per token than the rest) at the input length "
                        f"{ep.label} already sent"
                        + (
                            " with the same seed"
                            if ep.seed and ep.seed == p.seed
                            else " (no seed or prompt hash recorded)"
                        )
                        + ": likely that point's prompts served from the cache",
                        {
                            "input_len": r.input_len,
                            "ttft_s": r.ttft_s,
                            "implied_prefill_tps": _round(r.implied_prefill_tps),
                            "earlier_point": ep.label,
                            "gap_factor": round(gap, 1),
                        },
                    )
                    for r in sorted(rows, key=lambda x: x.index)[: max(n_match, 1)]
                )
            elif fast:
                rows, gap = fast
                out.append(
                    Finding(
                        "bimodal-ttft",
                        "warning",
                        p.source,
                        p.label,
                        None,
                        f"TTFTs split into two groups {gap:.0f}x apart per input token "
                        f"({len(rows)} fast of {len(p.requests)}): some requests may be cache hits",
                        {"fast_rows": [r.index for r in rows], "gap_factor": round(gap, 1)},
                        invalid=False,
                    )
                )
        for r in p.requests:
            if r.prompt_key and r.prompt_key not in seen_keys:
                seen_keys[r.prompt_key] = (p, r.index)
    return out


def _len_bucket(n: int | None) -> int | None:
    """Input lengths within ~10% of each other fall in one bucket."""
    if not n:
        return None
    return round(math.log(n) / math.log(1.1))


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def check_successes(p: Point, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    total, ok = p.n_total, p.n_success
    if total is None or ok is None or total == 0:
        return out
    failed = total - ok
    first_error = next((r.error for r in p.requests if not r.success and r.error), "")
    ev = {
        "total": total,
        "successful": ok,
        "failed": failed,
        "first_error": first_error[:300] if first_error else None,
    }
    if ok == 0:
        out.append(
            Finding(
                "zero-success",
                "error",
                p.source,
                p.label,
                None,
                f"no successful request of {total}: the point measured nothing"
                + (
                    f"; first error: {first_error.strip().splitlines()[-1][:160]}"
                    if first_error.strip()
                    else ""
                ),
                ev,
            )
        )
        return out
    if ok / total < t.min_success_share:
        out.append(
            Finding(
                "few-successes",
                "error",
                p.source,
                p.label,
                None,
                f"only {ok} of {total} requests succeeded: the metrics describe the "
                f"survivors, not the load",
                ev,
            )
        )
    elif failed / total > t.max_error_rate:
        out.append(
            Finding(
                "error-rate",
                "warning",
                p.source,
                p.label,
                None,
                f"{failed} of {total} requests failed ({100 * failed / total:.1f}%, "
                f"above {100 * t.max_error_rate:.0f}%)",
                ev,
            )
        )
    for r in p.requests:
        if not r.success:
            line = r.error.strip().splitlines()[-1][:200] if r.error.strip() else "failed"
            out.append(
                Finding(
                    "request-failed",
                    "warning",
                    p.source,
                    p.label,
                    r.index,
                    f"request failed: {line}",
                    {"input_len": r.input_len, "error": r.error[:300]},
                )
            )
    return out


def check_timeouts(p: Point, t: Thresholds, observed_tps: float | None) -> list[Finding]:
    """Client timeouts shorter than the prefill the prompt needs at the plausible rate."""
    rate = observed_tps or t.ceiling_tps
    out = []
    for r in p.requests:
        if r.success:
            continue
        is_timeout, seconds = timeout_in(r.error)
        if not is_timeout:
            continue
        seconds = seconds or p.timeout_s or r.latency_s
        expected = r.input_len / rate if r.input_len else None
        if seconds is not None and expected is not None and seconds < expected:
            out.append(
                Finding(
                    "timeout-shorter-than-prefill",
                    "error",
                    p.source,
                    p.label,
                    r.index,
                    f"client timed out after {seconds:g} s but {r.input_len:,} tokens need about "
                    f"{expected:,.0f} s of prefill at {rate:,.0f} tok/s: the harness, not the engine",
                    {
                        "input_len": r.input_len,
                        "timeout_s": seconds,
                        "expected_prefill_s": round(expected, 1),
                        "prefill_rate_tps": round(rate, 1),
                    },
                )
            )
    return out


def observed_prefill_rate(points: list[Point], t: Thresholds) -> float | None:
    """Median implied prefill of long successful requests under the ceiling (the uncached ones)."""
    rates = [
        rate
        for p in points
        for r in p.successes
        if (rate := r.implied_prefill_tps) is not None
        and (r.input_len or 0) >= t.min_input_tokens
        and rate <= t.ceiling_tps
    ]
    return median(rates) if rates else None


def check_cliffs(points: list[Point], t: Thresholds) -> list[Finding]:
    """Throughput falling or TTFT exploding between neighbouring levels of a concurrency sweep."""
    sweeps: dict[tuple[str, int | None], list[Point]] = defaultdict(list)
    for p in points:
        level = p.concurrency if p.concurrency is not None else p.request_rate
        if level is not None:
            sweeps[(p.fmt, _len_bucket(p.typical_input_len))].append(p)
    out = []
    for members in sweeps.values():
        if len(members) < 3:
            continue
        members.sort(key=lambda p: _level(p) or 0.0)
        for a, b in itertools.pairwise(members):
            la, lb = _level(a), _level(b)
            if not la or not lb or lb <= la:
                continue
            ta, tb = _throughput(a), _throughput(b)
            if ta and tb is not None and tb < ta * (1 - t.throughput_drop):
                out.append(
                    Finding(
                        "throughput-cliff",
                        "warning",
                        b.source,
                        b.label,
                        None,
                        f"throughput fell from {ta:,.2f} to {tb:,.2f} ({100 * (1 - tb / ta):.0f}% "
                        f"drop) going from {la:g} to {lb:g} concurrent: past the knee, or something "
                        f"broke there",
                        {
                            "from_point": a.label,
                            "from_level": la,
                            "to_level": lb,
                            "from_throughput": ta,
                            "to_throughput": tb,
                        },
                        invalid=False,
                    )
                )
            ma, mb = _median_ttft(a), _median_ttft(b)
            # queueing alone grows TTFT roughly with the concurrency step; a cliff grows faster
            if ma and mb and mb > ma * t.ttft_jump * max(1.0, lb / la / 2):
                out.append(
                    Finding(
                        "ttft-cliff",
                        "warning",
                        b.source,
                        b.label,
                        None,
                        f"median TTFT jumped {mb / ma:.0f}x ({ma:.3g} s -> {mb:.3g} s) going from "
                        f"{la:g} to {lb:g} concurrent: queueing or KV cache exhaustion",
                        {
                            "from_point": a.label,
                            "from_level": la,
                            "to_level": lb,
                            "from_median_ttft_s": ma,
                            "to_median_ttft_s": mb,
                        },
                        invalid=False,
                    )
                )
    return out


def _level(p: Point) -> float | None:
    return p.concurrency if p.concurrency is not None else p.request_rate


def _throughput(p: Point) -> float | None:
    if p.output_throughput is not None:
        return p.output_throughput
    if p.request_throughput is not None:
        return p.request_throughput
    return None


def _median_ttft(p: Point) -> float | None:
    ttfts = [r.ttft_s for r in p.successes if r.ttft_s]
    if ttfts:
        return median(ttfts)
    return p.median_ttft_ms / 1000.0 if p.median_ttft_ms else None


def check_detail(p: Point) -> list[Finding]:
    if p.requests:
        return []
    hints = {"vllm": "--save-detailed", "sglang": "--output-details"}
    hint = hints.get(p.fmt, "per-request output")
    return [
        Finding(
            "no-per-request-data",
            "info",
            p.source,
            p.label,
            None,
            f"no per-request rows (rerun with {hint}): only the summary can be checked",
            {},
            invalid=False,
        )
    ]


def run_checks(points: list[Point], t: Thresholds | None = None) -> list[Finding]:
    t = t or Thresholds()
    rate = observed_prefill_rate(points, t)
    findings: list[Finding] = []
    for p in points:
        findings += check_detail(p)
        findings += check_successes(p, t)
        findings += check_implied_prefill(p, t)
        findings += check_warmup_duplicate(p, t)
        findings += check_timeouts(p, t, rate)
    findings += check_reuse(points, t)
    findings += check_cliffs(points, t)
    order = {p.label: p.order for p in points}
    findings.sort(key=lambda f: (order.get(f.point, 0), -1 if f.row is None else f.row, f.check))
    return findings
