"""`triage mcp`: serve the MCP tools over stdio (an MCP client starts it; docs/llm.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from triage.cliapp import subcommand_app

mcp_app = subcommand_app("Serve triage_log, kb_search and kb_show to an agent over MCP (stdio).")
APPS: dict[str, typer.Typer] = {"mcp": mcp_app}


@mcp_app.command()
def mcp(
    root: Annotated[
        Path | None,
        typer.Option("--root", help="Refuse paths outside this directory (default: any path)"),
    ] = None,
    signatures: Annotated[
        Path | None, typer.Option("--signatures", help="Signature directory (default: shipped)")
    ] = None,
) -> None:
    """Speak MCP on stdin/stdout until the client closes it. Nothing is recorded in the history
    and no LLM is called: the tools return the deterministic report and knowledge base."""
    from triage.mcp.server import build

    try:
        server = build(signatures, root)
    except RuntimeError as exc:
        typer.echo(f"triage: {exc}", err=True)
        raise typer.Exit(2) from None
    server.run("stdio")
