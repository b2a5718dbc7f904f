"""`triage kb ...`: lint, eval, export-patterns and docs (build, search, show and stats live in
`triage.kb.commands`). A Typer app, imported only when a kb subcommand runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

kb_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="The knowledge base: lint, eval, docs, export-patterns, build, search, show, stats.",
)


@kb_app.command("lint")
def kb_lint(
    root: Annotated[Path | None, typer.Argument(help="Signature directory")] = None,
    fast: Annotated[bool, typer.Option("--fast", help="Skip the adversarial timing check")] = False,
) -> None:
    """Check every signature: schema, portable regexes, linear time, examples, overlaps."""
    from triage.kb.lint import lint

    issues = lint(root, timing=not fast)
    for issue in issues:
        typer.echo(str(issue))
    typer.echo(f"{len(issues)} issue(s)")
    raise typer.Exit(EXIT_FAILURE if issues else EXIT_OK)


@kb_app.command("applies")
def kb_applies(
    root: Annotated[Path | None, typer.Argument(help="Signature directory")] = None,
    write: Annotated[
        bool,
        typer.Option(
            "--write",
            help="Fill applies_to.versions where the message is release-bound and no range is "
            "hand-written (the YAML text is edited in place)",
        ),
    ] = False,
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Only this signature id (repeatable)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON instead of text")] = False,
    derive: Annotated[
        bool, typer.Option("--derive", help="Print the derivation (the default without --write)")
    ] = True,
) -> None:
    """Derive each signature's release ranges from the message catalog: per catalogued project,
    the releases that print its example lines' message, whether it is release-bound, and the
    VersionRange proposed (from catalogued releases only)."""
    from triage.kb.applies import derive_all, fill, format_rows, rows_json
    from triage.kb.load import load_signatures

    result = load_signatures(root)
    rows = derive_all(result, only or ())
    if rows is None:
        typer.echo(
            "triage: no message catalog is shipped (or $TRIAGE_CATALOG is unreadable)", err=True
        )
        raise typer.Exit(EXIT_USAGE)
    if derive:
        typer.echo(rows_json(rows) if as_json else "\n".join(format_rows(rows)))
    if write:
        changed = fill(rows)
        for path in changed:
            typer.echo(f"wrote {path}", err=True)
        typer.echo(f"{len(changed)} file(s) written", err=True)
    raise typer.Exit(EXIT_OK)


@kb_app.command("eval")
def kb_eval(
    corpus: Annotated[Path, typer.Argument(help="Corpus directory")] = Path("corpus"),
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List every miss")] = False,
    min_top1: Annotated[
        float | None,
        typer.Option(
            "--min-top1",
            metavar="PCT",
            help="Exit 1 when top-1 with the line is below PCT percent, or a healthy log alarms",
        ),
    ] = None,
    tag: Annotated[
        str | None, typer.Option("--tag", help="Only cases whose round: or tags: match (round-9)")
    ] = None,
    glob: Annotated[
        str | None, typer.Option("--glob", help="Only cases whose path matches (engine/*nccl*)")
    ] = None,
) -> None:
    """Measure quality on a corpus: top-1 with the line, right layer, top-3, silence, false
    alarms; of every case, or of the subset --tag / --glob select."""
    from triage.evaluate import evaluate, format_eval

    if not corpus.is_dir():
        typer.echo(f"triage: {corpus}: not a corpus directory", err=True)
        raise typer.Exit(EXIT_USAGE)
    result = evaluate(corpus, tag=tag, glob=glob)
    if not result.cases:
        typer.echo(f"triage: {corpus}: no corpus cases (*.expected.yaml) selected", err=True)
        raise typer.Exit(EXIT_USAGE)
    typer.echo(format_eval(result, verbose=verbose))
    if min_top1 is not None:
        failing = result.failing()
        top1 = 100.0 * sum(c.top1 for c in failing) / len(failing) if failing else 100.0
        alarms = sum(c.false_alarm for c in result.healthy())
        if top1 < min_top1 or alarms:
            typer.echo(
                f"triage: kb eval below the gate: top-1 {top1:.1f}% (minimum {min_top1:g}%), "
                f"{alarms} false alarm(s)",
                err=True,
            )
            raise typer.Exit(EXIT_FAILURE)
    raise typer.Exit(EXIT_OK)


@kb_app.command("export-patterns")
def kb_export_patterns(
    dialect: Annotated[str, typer.Option("--dialect", help="ere (grep -E) or rust (rg)")] = "rust",
) -> None:
    """Print every decisive/supporting pattern, one per line, for grep -E -f / rg -f baselines."""
    from triage.api import load_kb
    from triage.kb.export import export_patterns

    for line in export_patterns(load_kb().signatures, dialect):
        typer.echo(line)


@kb_app.command("docs")
def kb_docs(
    check: Annotated[
        bool, typer.Option("--check", help="Fail if docs/signatures.md is stale")
    ] = False,
    output: Annotated[Path, typer.Option("--output", "-o")] = Path("docs/signatures.md"),
) -> None:
    """Generate docs/signatures.md from the YAML."""
    from triage.api import load_kb
    from triage.kb.docs import render_docs

    text = render_docs(load_kb().signatures)
    if check:
        current = output.read_text(encoding="utf-8") if output.exists() else ""
        if current != text:
            typer.echo(f"{output} is stale: run `triage kb docs`", err=True)
            raise typer.Exit(EXIT_FAILURE)
        raise typer.Exit(EXIT_OK)
    from triage.kb.docs import HEADER
    from triage.safewrite import ForeignFileError, check_target, starts_with, write_atomic

    try:  # replace only a page this command wrote (its first line says so)
        header = HEADER.split("from", 1)[0].encode()  # "<!-- generated by `triage kb docs` "
        check_target(output, "a page written by `triage kb docs`", starts_with(header))
    except ForeignFileError as exc:
        typer.echo(f"triage: {exc}", err=True)
        raise typer.Exit(2) from None
    write_atomic(output, text)
    typer.echo(f"wrote {output}")


def _forward(name: str, app: typer.Typer) -> None:
    """List a `triage.kb.commands` subcommand in `triage kb --help`. `triage.cli` dispatches
    `triage kb NAME` straight to that app; this entry forwards when kb_app is called directly."""

    def forward(ctx: typer.Context) -> None:
        app(args=ctx.args, prog_name=f"triage kb {name}", standalone_mode=True)

    kb_app.command(
        name,
        help=str(app.info.help or ""),
        add_help_option=False,
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )(forward)


def _forward_all() -> None:
    from triage.kb.commands import APPS as COMMAND_APPS

    for name, app in COMMAND_APPS.items():
        _forward(name, app)


_forward_all()

APPS = {"kb": kb_app}
