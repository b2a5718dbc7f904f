"""`triage bench`: the two contamination cases of the field reports, clean runs, the ledger, the
plot, the other formats, and run directories where client and server evidence meet."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from triage.api import Engine
from triage.benchmarks import Thresholds, analyze
from triage.benchmarks.checks import run_checks
from triage.benchmarks.cli import APPS
from triage.benchmarks.parsers import load
from triage.benchmarks.server import corroborate, summarize_stats

FIX = Path(__file__).parent / "fixtures" / "bench"
CLEAN = ["clean_sweep_c1.json", "clean_sweep_c4.json", "clean_sweep_c16.json"]


def _copy(tmp: Path, *names: str) -> list[str]:
    out = []
    for name in names:
        shutil.copy(FIX / name, tmp / name)
        out.append(str(tmp / name))
    return out


def _flagged_rows(findings, point: str) -> set[int]:  # type: ignore[no-untyped-def]
    return {f.row for f in findings if f.point == point and f.row is not None and f.invalid}


def test_fixture_has_vllm_bench_serve_fields() -> None:
    doc = json.loads((FIX / "bench_h256_00.json").read_text())
    # field names of vllm/benchmarks/serve.py (result_json + benchmark() result, --save-detailed)
    for key in (
        "date",
        "backend",
        "model_id",
        "num_prompts",
        "request_rate",
        "max_concurrency",
        "duration",
        "completed",
        "failed",
        "total_input_tokens",
        "request_throughput",
        "output_throughput",
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "generated_texts",
        "errors",
        "mean_ttft_ms",
        "median_ttft_ms",
        "p99_ttft_ms",
    ):
        assert key in doc, key


def test_250k_prompts_in_0_9s_are_flagged() -> None:
    report = analyze([str(FIX / "bench_h256_00.json")])
    point = report.points[0]
    assert [round(r.ttft_s or 0, 2) for r in point.requests] == [0.93, 0.92, 0.92, 0.91]
    assert _flagged_rows(report.findings, point.label) == {0, 1, 2, 3}
    implied = [f for f in report.findings if f.check == "implied-prefill"]
    assert len(implied) == 4
    assert all(f.evidence["implied_prefill_tps"] > 260_000 for f in implied)
    assert report.flagged


def test_1m_two_at_a_time_reusing_previous_point_is_flagged() -> None:
    report = analyze([str(FIX / "bench_h1m_00.json"), str(FIX / "bench_h1m_01.json")])
    first, second = report.points
    assert sorted(round(r.ttft_s or 0, 1) for r in second.requests) == [1.0, 1.9, 633.5, 1257.9]
    assert _flagged_rows(report.findings, first.label) == set()
    assert _flagged_rows(report.findings, second.label) == {0, 1}  # the two cache hits only
    reuse = [f for f in report.findings if f.check == "reused-prompts"]
    assert {f.row for f in reuse} == {0, 1}
    assert all(f.evidence["earlier_point"] == first.label for f in reuse)


def test_1m_reuse_found_without_prompt_identities(tmp_path: Path) -> None:
    """No generated_texts to fingerprint: the bimodal fast group at an already-sent length."""
    for name in ("bench_h1m_00.json", "bench_h1m_01.json"):
        doc = json.loads((FIX / name).read_text())
        del doc["generated_texts"]
        (tmp_path / name).write_text(json.dumps(doc))
    points = load([str(tmp_path / "bench_h1m_00.json"), str(tmp_path / "bench_h1m_01.json")])
    # a ceiling nothing exceeds: only the reuse check can find the two fast requests
    findings = run_checks(points, Thresholds(ceiling_tps=10_000_000))
    reuse = [f for f in findings if f.check == "reused-prompts"]
    assert {f.row for f in reuse} == {0, 1}


def test_clean_sweep_is_not_flagged() -> None:
    report = analyze([str(FIX / n) for n in CLEAN])
    assert [f for f in report.findings if f.severity != "info"] == []
    assert not report.flagged


def test_warmup_duplicate_one_at_a_time(tmp_path: Path) -> None:
    doc = json.loads((FIX / "clean_sweep_c1.json").read_text())
    doc["ttfts"][0] = 0.012  # request 0 served from the cache the warm-up filled
    (tmp_path / "w.json").write_text(json.dumps(doc))
    # raise the ceiling so only the warm-up check can see it
    findings = run_checks(load([str(tmp_path / "w.json")]), Thresholds(ceiling_tps=1e9))
    assert [(f.check, f.row) for f in findings if f.invalid] == [("warmup-duplicate", 0)]


def test_reused_seed_across_points(tmp_path: Path) -> None:
    a = json.loads((FIX / "clean_sweep_c1.json").read_text())
    b = json.loads((FIX / "clean_sweep_c4.json").read_text())
    b["seed"] = a["seed"]
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    findings = run_checks(load([str(tmp_path / "a.json"), str(tmp_path / "b.json")]))
    seeds = [f for f in findings if f.check == "reused-seed"]
    assert len(seeds) == 1 and seeds[0].point == "b.json" and seeds[0].row is None


def test_failures_and_cliffs(tmp_path: Path) -> None:
    docs = [json.loads((FIX / n).read_text()) for n in CLEAN]
    err = "Traceback ...\naiohttp.ServerDisconnectedError: Server disconnected"
    docs[2]["errors"] = [err] * 12 + [""] * 4
    docs[2]["completed"], docs[2]["failed"] = 4, 12
    docs[2]["output_throughput"] = docs[1]["output_throughput"] * 0.2
    docs[2]["ttfts"] = [0.0] * 12 + [t * 40 for t in docs[2]["ttfts"][12:]]
    paths = []
    for n, d in zip(CLEAN, docs, strict=True):
        (tmp_path / n).write_text(json.dumps(d))
        paths.append(str(tmp_path / n))
    findings = run_checks(load(paths))
    checks = {f.check for f in findings}
    assert {"few-successes", "request-failed", "throughput-cliff", "ttft-cliff"} <= checks
    doc = json.loads((FIX / "clean_sweep_c1.json").read_text())
    doc["errors"] = ["x"] * len(doc["errors"])
    (tmp_path / "zero.json").write_text(json.dumps(doc))
    zero = run_checks(load([str(tmp_path / "zero.json")]))
    assert any(f.check == "zero-success" for f in zero)


def test_timeout_shorter_than_prefill(tmp_path: Path) -> None:
    rows = [
        "input_tokens,ttft_s,success,error,timeout_s",
        "200000,41.2,1,,60",
        "400000,,0,httpx.ReadTimeout: timed out,60",
        "8000,1.1,1,,60",
    ]
    (tmp_path / "r.csv").write_text("\n".join(rows) + "\n")
    findings = run_checks(load([str(tmp_path / "r.csv")]))
    t = [f for f in findings if f.check == "timeout-shorter-than-prefill"]
    assert [f.row for f in t] == [1]
    assert t[0].evidence["timeout_s"] == 60 and t[0].evidence["expected_prefill_s"] > 60


def test_cli_writes_ledger_and_plot_and_keeps_results(tmp_path: Path) -> None:
    paths = _copy(tmp_path, "bench_h256_00.json", "bench_h1m_00.json", "bench_h1m_01.json", *CLEAN)
    before = {p: Path(p).read_bytes() for p in paths}
    runner = CliRunner()
    result = runner.invoke(APPS["bench"], [*paths, "--plot", "--format", "json"])
    assert result.exit_code == 1, result.output
    out = json.loads(result.output)
    ledger = Path(out["ledger"])
    assert ledger == tmp_path / "triage_invalid_rows.csv"
    rows = list(csv.DictReader(ledger.open()))
    keyed = {(Path(r["file"]).name, r["row"], r["reason"]) for r in rows}
    for i in range(4):
        assert ("bench_h256_00.json", str(i), "implied-prefill") in keyed
    assert ("bench_h1m_01.json", "0", "reused-prompts") in keyed
    assert ("bench_h1m_01.json", "1", "implied-prefill") in keyed
    assert not any(r["file"].endswith(("c1.json", "c4.json", "c16.json")) for r in rows)
    assert all(r["evidence"] or r["implied_prefill_tps"] for r in rows)
    hit = next(r for r in rows if r["reason"] == "implied-prefill")
    assert float(hit["implied_prefill_tps"]) > float(hit["ceiling_tps"]) == 60000.0
    png = Path(out["plot"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert {p: Path(p).read_bytes() for p in paths} == before  # originals never rewritten


def test_cli_clean_exit_zero_and_ceiling_option(tmp_path: Path) -> None:
    runner = CliRunner()
    clean = _copy(tmp_path, *CLEAN)
    result = runner.invoke(APPS["bench"], clean)
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "triage_invalid_rows.csv").exists()
    # a ceiling above 275K tok/s lets the 250K case through the implied-prefill screen
    h = _copy(tmp_path, "bench_h256_00.json")
    result = runner.invoke(APPS["bench"], [*h, "--ceiling", "300000", "--no-ledger"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(APPS["bench"], [str(tmp_path / "missing.json")])
    assert result.exit_code == 2


def test_ledger_never_overwrites_results(tmp_path: Path) -> None:
    paths = _copy(tmp_path, "bench_h256_00.json")
    result = CliRunner().invoke(APPS["bench"], [*paths, "--ledger", paths[0]])
    assert result.exit_code == 2
    assert json.loads(Path(paths[0]).read_text())["ttfts"] == [0.93, 0.92, 0.92, 0.91]


def test_sglang_jsonl_aiperf_guidellm_csv(tmp_path: Path) -> None:
    sg = json.loads((FIX / "bench_h256_00.json").read_text())
    sg = {k: v for k, v in sg.items() if k not in ("failed", "date", "seed")}
    sg["total_output_tokens_retokenized"] = sg["total_output_tokens"]
    (tmp_path / "sglang.jsonl").write_text(json.dumps(sg) + "\n" + json.dumps(sg) + "\n")
    aiperf = [
        {
            "metadata": {
                "session_num": i,
                "conversation_id": f"c{i}",
                "turn_index": 0,
                "request_start_ns": 1759813207532900363 + i,
                "benchmark_phase": "profiling",
            },
            "metrics": {
                "input_sequence_length": {"value": 250000, "unit": "tokens"},
                "time_to_first_token": {"value": 910.0 + i, "unit": "ms"},
                "output_sequence_length": {"value": 9, "unit": "tokens"},
            },
            "error": None,
        }
        for i in range(3)
    ]
    (tmp_path / "profile_export.jsonl").write_text("\n".join(json.dumps(r) for r in aiperf))
    ok = [
        {
            "prompt": p,
            "prompt_tokens": 200000,
            "output_tokens": 8,
            "start_time": 100.0,
            "end_time": first + 0.5,
            "first_token_time": first,
        }
        for p, first in (("a" * 10, 101.0), ("b" * 10, 140.0))
    ]
    guide = {
        "benchmarks": [
            {
                "args": {"strategy": {"type_": "concurrent", "streams": 2}},
                "request_totals": {"successful": 2, "errored": 0, "incomplete": 0},
                "requests": {"successful": ok, "errored": [], "incomplete": []},
            }
        ]
    }
    (tmp_path / "benchmarks.json").write_text(json.dumps(guide))
    (tmp_path / "per_request.csv").write_text(
        "point,seed,input_tokens,ttft_ms,prompt_hash\n"
        "p1,7,100000,9000,h1\np1,7,100000,9100,h2\np2,7,100000,500,h1\np2,7,100000,9050,h3\n"
    )
    points = load([str(tmp_path)])
    fmts = sorted({p.fmt for p in points})
    assert fmts == ["aiperf", "csv", "guidellm", "sglang"]
    findings = run_checks(points)
    by = {(f.point, f.check, f.row) for f in findings}
    assert ("sglang.jsonl#0", "implied-prefill", 0) in by
    assert ("profile_export.jsonl", "implied-prefill", 2) in by
    assert ("benchmarks.json", "implied-prefill", 0) in by
    assert ("benchmarks.json", "implied-prefill", 1) not in by
    assert ("per_request.csv#p2", "reused-prompts", 0) in by  # same prompt hash as p1 row 0
    assert ("per_request.csv#p2", "reused-seed", None) in by


def test_server_stats_corroborate() -> None:
    stats = [
        {
            "input": "s.log",
            "line": i,
            "prompt_tps": 0.0,
            "gen_tps": 0.0,
            "running": 8.0,
            "waiting": 0.0,
            "gpu_kv_cache_usage": 5.7,
            "prefix_cache_hit_rate": 91.0,
        }
        for i in range(1, 6)
    ]
    summary = summarize_stats(stats)
    assert summary.stalls and summary.stalls[0]["rows"] == 5
    found = {f.check for f in corroborate(summary, [], "s.log")}
    assert found == {"server-stalled", "server-prefix-cache-hits"}


def test_bench_with_server_log_sees_the_hang() -> None:
    report = analyze(
        [str(FIX / n) for n in CLEAN], server_logs=[str(FIX / "rundir_hang" / "server.log")]
    )
    assert report.server is not None and report.server.stalls
    assert any(f.check == "server-stalled" for f in report.findings)
    assert report.server.hypotheses[0]["signature"] == "engine-generation-stalled"


def test_run_dir_hang_ranks_engine_first(engine: Engine) -> None:
    report = engine.run([str(FIX / "rundir_hang")])
    top = report.hypotheses[0]
    assert top.layer in ("engine", "node"), [(h.signature, h.layer) for h in report.hypotheses]
    assert top.signature == "engine-generation-stalled"
    assert "client-timeout-shorter-than-request" in {e.signature for e in top.explains}
    assert report.failed


def test_run_dir_client_before_server_ready_ranks_harness_first(engine: Engine) -> None:
    report = engine.run([str(FIX / "rundir_not_ready")])
    top = report.hypotheses[0]
    assert top.layer == "harness" and top.signature == "client-connect-before-server-ready"
    assert not any(h.layer == "engine" and h.severity == "error" for h in report.hypotheses)


@pytest.mark.parametrize("name", ["bench_h256_00.json", "bench_h1m_01.json"])
def test_plot_written_for_each_case(tmp_path: Path, name: str) -> None:
    from triage.benchmarks.plot import plot

    points = load([str(FIX / name)])
    findings = run_checks(points)
    out = plot(points, findings, 60_000.0, tmp_path / "p.png")
    assert out.stat().st_size > 10_000
