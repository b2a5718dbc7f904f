"""`triage bench RESULTS... [--plot] [--ceiling TOKS] [--ledger PATH] [--format text|json]`.

Exit status: 0 nothing flagged, 1 something flagged, 2 usage or input error.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from triage.benchmarks import BenchInputError, BenchReport, Thresholds, analyze
from triage.benchmarks import ledger as ledger_mod
from triage.benchmarks.checks import DEFAULT_CEILING_TPS

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

bench_app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Check benchmark results for rows the harness made untrustworthy.",
)
APPS: dict[str, typer.Typer] = {"bench": bench_app}


class BenchFormat(StrEnum):
    text = "text"
    json = "json"


@bench_app.command()
def bench(
    results: Annotated[
        list[str],
        typer.Argument(
            help="vllm bench serve JSON, SGLang bench_serving JSONL, AIPerf/GenAI-Perf exports, "
            "GuideLLM benchmarks.json, per-request CSV, or directories holding them"
        ),
    ],
    plot: Annotated[
        bool, typer.Option("--plot", help="Write a PNG of TTFT vs input length")
    ] = False,
    plot_file: Annotated[
        Path | None,
        typer.Option("--plot-file", help="Where the PNG goes (default: beside the results)"),
    ] = None,
    ceiling: Annotated[
        float,
        typer.Option(
            "--ceiling",
            help="Plausible uncached prefill ceiling, tokens/s (per GPU and model size)",
        ),
    ] = DEFAULT_CEILING_TPS,
    min_input: Annotated[
        int,
        typer.Option(
            "--min-input", help="Prompts shorter than this are not screened for implied prefill"
        ),
    ] = 1024,
    max_error_rate: Annotated[
        float,
        typer.Option(
            "--max-error-rate", help="Share of failed requests above which a point is flagged"
        ),
    ] = 0.05,
    ledger: Annotated[
        Path | None,
        typer.Option(
            "--ledger",
            help="Invalid-row ledger CSV (default: triage_invalid_rows.csv beside the results)",
        ),
    ] = None,
    no_ledger: Annotated[bool, typer.Option("--no-ledger", help="Do not write the ledger")] = False,
    server_log: Annotated[
        list[str] | None,
        typer.Option(
            "--server-log",
            help="Server log(s) of the same run: stats lines corroborate the findings",
        ),
    ] = None,
    format: Annotated[
        BenchFormat, typer.Option("--format", "-f", help="Output format")
    ] = BenchFormat.text,
) -> None:
    """Flag benchmark rows that measured the cache, re-sent prompts, failed or hit a cliff."""
    if ceiling <= 0:
        raise _fail("--ceiling must be positive")
    t = Thresholds(ceiling_tps=ceiling, min_input_tokens=min_input, max_error_rate=max_error_rate)
    try:
        report = analyze(results, t, server_log)
    except BenchInputError as exc:
        raise _fail(str(exc)) from None
    if not no_ledger and any(f.invalid for f in report.findings):
        path = ledger or ledger_mod.default_path(report.inputs)
        try:
            ledger_mod.write(path, report.findings, report.inputs)
        except (ValueError, OSError) as exc:
            raise _fail(f"ledger: {exc}") from None
        report.ledger = path
    if plot or plot_file:
        from triage.benchmarks.plot import PLOT_NAME
        from triage.benchmarks.plot import plot as draw
        from triage.safewrite import check_target

        target = plot_file or ledger_mod.default_path(report.inputs).with_name(PLOT_NAME)
        # A PNG triage drew before carries matplotlib's Software chunk; anything else is not ours.
        check_target(
            target,
            "a triage benchmark plot",
            lambda _p, head: head.startswith(b"\x89PNG") and b"Matplotlib" in head,
        )
        try:
            report.plot = draw(report.points, report.findings, t.ceiling_tps, target)
        except RuntimeError as exc:
            raise _fail(str(exc)) from None
    if format == BenchFormat.json:
        typer.echo(json.dumps(report.to_json_dict(), indent=2, default=str))
    else:
        typer.echo(render_text(report))
    raise typer.Exit(EXIT_FAILURE if report.flagged else EXIT_OK)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"triage bench: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def render_text(report: BenchReport) -> str:
    lines = []
    n_req = sum(len(p.requests) for p in report.points)
    lines.append(
        f"{len(report.points)} point(s), {n_req} request row(s) from "
        f"{len(report.inputs)} file(s); implied-prefill ceiling "
        f"{report.thresholds.ceiling_tps:,.0f} tok/s"
    )
    by_point: dict[str, list[str]] = {}
    for f in report.findings:
        where = "" if f.row is None else f"row {f.row}: "
        by_point.setdefault(f.point, []).append(f"  [{f.severity}] {f.check}: {where}{f.message}")
    for p in report.points:
        detail = []
        if p.concurrency is not None:
            detail.append(f"concurrency {p.concurrency:g}")
        if p.request_rate is not None:
            detail.append(f"rate {p.request_rate:g}/s")
        if p.typical_input_len:
            detail.append(f"~{p.typical_input_len:,} input tokens")
        if p.seed is not None:
            detail.append(f"seed {p.seed}")
        ok, total = p.n_success, p.n_total
        status = f"{ok}/{total} ok" if ok is not None and total is not None else ""
        items = by_point.get(p.label, [])
        head = "FLAGGED" if any("[error]" in i or "[warning]" in i for i in items) else "ok"
        lines.append(f"\n{head}  {p.label} ({p.fmt}; {', '.join(filter(None, [status, *detail]))})")
        lines.extend(items)
    if report.server is not None:
        s = report.server
        lines.append(f"\nserver logs: {', '.join(s.inputs)} ({s.stats_rows} stats lines)")
        lines.extend(by_point.get("server", []))
        if s.hypotheses:
            top = s.hypotheses[0]
            lines.append(
                f"  triage of the server log ranks first: {top['signature']} "
                f"({top['layer']}, {top['severity']})"
            )
    if report.ledger:
        n = sum(1 for f in report.findings if f.invalid)
        lines.append(f"\nledger: {report.ledger} ({n} line(s); the results files are unchanged)")
    if report.plot:
        lines.append(f"plot: {report.plot}")
    if not report.flagged:
        lines.append("\nnothing flagged (a screen, not proof: see docs/bench.md)")
    return "\n".join(lines)
