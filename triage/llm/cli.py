"""`triage ask LOG --llm URL --llm-model NAME`: the main command with the LLM step forced on.

It asks even when the knowledge base is confident, and does not record a history run (it is a
second look at a log, not a new failure). The main command's own `--llm` (see
`triage.llm.options`) asks only when the report needs it (`triage.llm.step.reason_to_ask`).
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Annotated

import typer

from triage.api import KnowledgeBase
from triage.cliapp import subcommand_app
from triage.history.draft import Draft

ask_app = subcommand_app(
    "Ask your own OpenAI-compatible model about a log, grounded in the knowledge base."
)
APPS: dict[str, typer.Typer] = {"ask": ask_app}


@ask_app.command()
def ask(
    inputs: Annotated[list[str], typer.Argument(help="log files, run directories, or '-'")],
    llm: Annotated[str, typer.Option("--llm", help="OpenAI-compatible base URL")],
    llm_model: Annotated[str, typer.Option("--llm-model", help="model name")],
    format: Annotated[str, typer.Option("--format", "-f", help="text, json or markdown")] = "text",
    dry_run: Annotated[
        bool, typer.Option("--llm-dry-run", "--dry-run", help="print the request, send nothing")
    ] = False,
    timeout: Annotated[float, typer.Option("--llm-timeout", help="seconds")] = 60.0,
    no_cache: Annotated[bool, typer.Option("--llm-no-cache", help="ignore cached answers")] = False,
    signatures: Annotated[Path | None, typer.Option("--signatures")] = None,
) -> None:
    """Triage the log, then ask the model about it even when the knowledge base is confident.

    The answer is shown apart from the hypotheses, labelled as the model's suggestion, and only
    when every line it cites is in the evidence sent. The run is not recorded in the history.
    """
    from triage.cli import triage_main

    argv = [*inputs, "--llm", llm, "--llm-model", llm_model, "--llm-always", "--no-history"]
    argv += ["--format", format, "--llm-timeout", str(timeout)]
    argv += ["--llm-dry-run"] if dry_run else []
    argv += ["--llm-no-cache"] if no_cache else []
    argv += ["--signatures", str(signatures)] if signatures else []
    raise typer.Exit(triage_main(argv))


def draft_by_llm(
    conn: sqlite3.Connection,
    cluster_id: int,
    kb: KnowledgeBase,
    url: str | None,
    model: str | None,
    timeout: float,
    dry_run: bool,
    healthy: Path | None,
) -> Draft | None:
    """`triage draft --llm`: the checked draft, None after a dry run; exit 1 with the reasons
    when the model's draft fails a check (nothing is written then)."""
    import os

    from triage.kb.paths import default_signature_dir
    from triage.llm.draft import draft_with_llm
    from triage.llm.step import Settings

    if not url or not model:
        typer.echo("triage: --llm URL and --llm-model NAME go together", err=True)
        raise typer.Exit(2)
    settings = Settings(
        url=url,
        model=model,
        timeout=timeout,
        dry_run=dry_run,
        api_key=os.environ.get("TRIAGE_LLM_API_KEY") or None,
    )
    corpus = healthy or default_signature_dir().parent / "corpus" / "healthy"
    outcome = draft_with_llm(conn, cluster_id, kb, settings, corpus)
    if outcome.body is not None:
        sys.stdout.buffer.write(outcome.body)
        return None
    if outcome.text is None:
        typer.echo(
            f"triage: the model's draft was not written ({len(outcome.problems)} problem(s)):",
            err=True,
        )
        for problem in outcome.problems:
            typer.echo(f"  {problem}", err=True)
        raise typer.Exit(1)
    return Draft(outcome.sig_id, outcome.text, [], [], [])
