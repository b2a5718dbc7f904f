"""What every subcommand's Typer app shares: how it is built and the text/json output choice."""

from __future__ import annotations

from enum import StrEnum

import typer


class Output(StrEnum):
    text = "text"
    json = "json"


def subcommand_app(help_text: str) -> typer.Typer:
    """A single-command Typer app as `triage.cli` dispatches to it (no completion, no pretty
    tracebacks, -h and --help)."""
    return typer.Typer(
        add_completion=False,
        pretty_exceptions_enable=False,
        help=help_text,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
