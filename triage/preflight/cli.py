"""`triage lint` and `triage probe` (dispatched here by `triage.cli.PLUGIN_COMMANDS`)."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2

lint_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
probe_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


class LintFormat(StrEnum):
    text = "text"
    json = "json"


@lint_app.command(context_settings={"help_option_names": ["-h", "--help"]})
def lint_command(
    configs: Annotated[
        list[Path],
        typer.Argument(
            help="Shell scripts, compose files, systemd units/drop-ins, .env, Kubernetes manifests, "
            "llama-swap YAML, or directories of them"
        ),
    ],
    engine_version: Annotated[
        str | None,
        typer.Option(
            "--engine-version",
            help="Engine version to check against (default: image tag, then the installed engine)",
        ),
    ] = None,
    format: Annotated[LintFormat, typer.Option("--format", "-f")] = LintFormat.text,
    signatures: Annotated[
        Path | None, typer.Option("--signatures", help="Signature directory")
    ] = None,
) -> None:
    """Lint launch configurations against the knowledge base before the engine starts."""
    from triage.api import load_kb
    from triage.preflight.lint import lint_paths, render_json, render_text

    missing = [str(p) for p in configs if not p.exists()]
    if missing:
        typer.echo(f"triage lint: no such file: {', '.join(missing)}", err=True)
        raise typer.Exit(EXIT_USAGE)
    kb = load_kb(signatures)
    result = lint_paths(list(configs), kb.signatures, engine_version)
    sys.stdout.write(render_json(result) if format is LintFormat.json else render_text(result))
    if result.errors and not result.findings:
        raise typer.Exit(EXIT_USAGE)
    raise typer.Exit(EXIT_FINDINGS if result.findings else EXIT_OK)


@probe_app.command(context_settings={"help_option_names": ["-h", "--help"]})
def probe_command(
    out: Annotated[Path, typer.Option("--out", "-o", help="Bundle directory")] = Path(
        "triage-probe"
    ),
    p2p: Annotated[
        bool,
        typer.Option(
            "--p2p", help="Run the pairwise GPU P2P round-trip check (needs PyTorch and 2+ GPUs)"
        ),
    ] = False,
    p2p_timeout: Annotated[
        float, typer.Option("--p2p-timeout", help="Seconds for the P2P check")
    ] = 60.0,
    kernel_log: Annotated[
        Path | None,
        typer.Option(
            "--kernel-log",
            help="Read kernel messages from this file (a saved `dmesg -T`) instead of dmesg",
        ),
    ] = None,
    path: Annotated[
        list[Path] | None,
        typer.Option("--path", help="Also report free space here (model directory, cache)"),
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per command")] = 15.0,
) -> None:
    """Collect read-only evidence from this host into a bundle that `triage` accepts as input."""
    from triage.preflight.probe import Probe, ProbeOptions, write_bundle

    options = ProbeOptions(
        out=out,
        p2p=p2p,
        p2p_timeout=p2p_timeout,
        kernel_log=kernel_log,
        paths=list(path or []),
        timeout=timeout,
    )
    bundle = Probe(options).collect()
    jpath, tpath = write_bundle(bundle, out)
    typer.echo(f"wrote {jpath} and {tpath}")
    msgs = bundle["sections"].get("kernel", {}).get("data", {}).get("messages", [])
    typer.echo(f"kernel messages of interest: {len(msgs)}")
    if bundle["not_collected"]:
        typer.echo(f"could not collect {len(bundle['not_collected'])} item(s):")
        for item in bundle["not_collected"]:
            typer.echo(f"  - {item}")
    typer.echo(f"next: triage {tpath} <server log>")
    raise typer.Exit(EXIT_OK)


APPS: dict[str, typer.Typer] = {"lint": lint_app, "probe": probe_app}
