"""The `triage batch` command: arguments and the closing line; the job is `triage.fleet.batch`.

Exit status: 0 done (rows written, whatever they diagnose), 2 usage error, Ray missing or an input
without its row (one line on stderr).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from triage.cliapp import subcommand_app

EXIT_OK, EXIT_USAGE = 0, 2

batch_app = subcommand_app(
    "Triage every log of an archive on Ray Data (or serially with --local): one row per file "
    "in DIR/rows.jsonl (and rows.parquet), counts and the largest unknown clusters in "
    "DIR/summary.json. Load the rows into the history with `triage history import`."
)
APPS: dict[str, typer.Typer] = {"batch": batch_app}


@batch_app.command()
def batch(
    paths: Annotated[list[str], typer.Argument(help="Log files and directories (walked)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for rows and summary")],
    local: Annotated[
        bool, typer.Option("--local", help="Run serially in this process, without Ray")
    ] = False,
    workers: Annotated[
        int, typer.Option("--workers", "-w", help="Ray actors, each one CPU (default 2)")
    ] = 2,
    address: Annotated[
        str | None,
        typer.Option("--address", help="Join this Ray cluster instead of starting a local one"),
    ] = None,
    top: Annotated[int, typer.Option("--top", help="Unknown clusters in the summary")] = 20,
    signatures: Annotated[
        Path | None, typer.Option("--signatures", help="Signature directory")
    ] = None,
    kb_path: Annotated[
        Path | None,
        typer.Option("--kb", envvar="TRIAGE_KB", help="Compiled knowledge base file"),
    ] = None,
    engine: Annotated[
        str | None, typer.Option("--engine", help="Scanner: hyperscan, re2 or re")
    ] = None,
    max_decompressed: Annotated[
        int, typer.Option("--max-decompressed", metavar="MIB", help="Limit for .gz/.zst")
    ] = 4096,
) -> None:
    """Examples: `triage batch corpus/ --out /tmp/fleet`, `triage batch --local logs/ -o out/`,
    `triage batch s3-mirror/ -o out/ --address auto --workers 16`."""
    from triage.fleet.batch import BatchError, EngineSpec, run_batch

    if not 1 <= workers <= 1024:
        _fail("--workers must be between 1 and 1024")
    if engine not in (None, "hyperscan", "re2", "re"):
        _fail(f"--engine {engine!r}: choose hyperscan, re2 or re")
    spec = EngineSpec(
        signatures=str(signatures) if signatures else None,
        kb_path=str(kb_path) if kb_path else None,
        scanner=engine,
        max_decompressed=max_decompressed << 20,
    )
    try:
        result = run_batch(
            paths, out, local=local, workers=workers, address=address, spec=spec, top=top
        )
    except BatchError as exc:
        _fail(str(exc))
    how = "serially" if result.mode == "local" else f"on Ray, {result.workers} workers"
    start = f"; Ray start-up {result.startup_seconds:.1f} s" if result.mode == "ray" else ""
    typer.echo(
        f"{result.rows} files, {result.bytes / 1e6:.1f} MB in {result.seconds:.1f} s "
        f"({how}{start}) -> {', '.join(result.files)}"
    )


def _fail(message: str) -> None:
    typer.echo(f"triage: {message}", err=True)
    raise typer.Exit(EXIT_USAGE)
