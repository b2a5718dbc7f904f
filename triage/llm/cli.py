"""`triage ask LOG --llm URL --llm-model NAME`: the main command with the LLM step forced on.

It asks even when the knowledge base is confident, and does not record a history run (it is a
second look at a log, not a new failure). The main command's own `--llm` (see
`triage.llm.options`) asks only when the report needs it (`triage.llm.step.reason_to_ask`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from triage.cliapp import subcommand_app

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
