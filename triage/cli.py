"""The `triage` command: arguments, choice of source and renderer, exit status. No matching logic.

`triage [OPTIONS] [INPUT...]` triages logs (files, directories, '-' or a pipe on stdin).
Subcommands (`triage kb lint`, `triage kb eval`, ...) live in a Typer app; the first argument
decides which is meant. Exit status: 0 no failure diagnosed, 1 failure diagnosed or found,
2 usage or input error (one line on stderr, never a traceback).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from triage import __version__
from triage.render import Format

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="triage subcommands (run `triage --help` for log triage itself)",
)
kb_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="The knowledge base: lint, eval, docs, search, show, build.",
)
app.add_typer(kb_app, name="kb")

SUBCOMMANDS = {"kb"}

# Subcommands that live with their feature: name -> module exposing `APPS: dict[str, typer.Typer]`.
# Each app is run with the remaining arguments, so features stay in their own files.
PLUGIN_COMMANDS: dict[str, str] = {
    "comment": "triage.bot.cli",
    "bot": "triage.bot.cli",
    "serve": "triage.bot.cli",
    "run": "triage.bot.cli",
    "watch": "triage.bot.cli",
    "history": "triage.history.cli",
    "stats": "triage.history.cli",
    "unknown": "triage.history.cli",
    "draft": "triage.history.cli",
    "feedback": "triage.history.cli",
    "lint": "triage.preflight.cli",
    "probe": "triage.preflight.cli",
    "bench": "triage.benchmarks.cli",
}
# `triage kb <name>` subcommands provided by another module the same way.
KB_PLUGIN_COMMANDS: dict[str, str] = {
    "build": "triage.kb.commands",
    "search": "triage.kb.commands",
    "show": "triage.kb.commands",
    "stats": "triage.kb.commands",
}


def _run_plugin(module_name: str, name: str, args: list[str], prog: str) -> None:
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ImportError:
        typer.echo(f"triage: '{name}' is not available in this build", err=True)
        sys.exit(EXIT_USAGE)
    sub = module.APPS[name]
    sub(args=args, prog_name=prog, standalone_mode=True)


EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def _fail(message: str) -> typer.Exit:
    typer.echo(f"triage: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


triage_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def _version_callback(value: bool) -> None:
    if value:
        from triage.scanners import available_engines

        typer.echo(
            f"triage {__version__} (scanner: {available_engines()[0]}; "
            f"available: {', '.join(available_engines())})"
        )
        raise typer.Exit(0)


@triage_app.command(context_settings={"help_option_names": ["-h", "--help"]})
def triage_command(
    inputs: Annotated[
        list[str] | None,
        typer.Argument(
            help="Log files, run directories, .gz/.zst files, or '-' for stdin (default: stdin)"
        ),
    ] = None,
    format: Annotated[Format, typer.Option("--format", "-f", help="Output format")] = Format.text,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show the terms of every score")
    ] = False,
    color: Annotated[
        bool | None, typer.Option("--color/--no-color", help="Force colour on or off")
    ] = None,
    engine: Annotated[
        str | None, typer.Option("--engine", help="Scanner: hyperscan, re2 or re")
    ] = None,
    signatures: Annotated[
        Path | None, typer.Option("--signatures", help="Signature directory")
    ] = None,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-F", help="Follow the inputs like tail -F; one JSON line per new hypothesis"),
    ] = False,
    kb_path: Annotated[
        Path | None,
        typer.Option("--kb", envvar="TRIAGE_KB", help="Compiled knowledge base file (default: user cache)"),
    ] = None,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", min=1, max=64, help="Worker processes for large files")
    ] = 1,
    max_decompressed_mib: Annotated[
        int, typer.Option("--max-decompressed", help="Limit for .gz/.zst input, MiB")
    ] = 4096,
    no_history: Annotated[
        bool, typer.Option("--no-history", help="Do not record this run in the history database")
    ] = False,
    db: Annotated[
        Path | None,
        typer.Option("--db", envvar="TRIAGE_DB", help="History database (default: user data dir)"),
    ] = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Run id to record with the history")
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version_callback,
            is_eager=True,
            help="Show version and scanning engine",
        ),
    ] = False,
) -> None:
    """Triage LLM-serving logs: what broke, in which layer, the lines that show it, what to try."""
    from triage.api import Engine, RunOptions, load_kb
    from triage.read import InputError

    args = inputs or ["-"]
    if args == ["-"] and sys.stdin.isatty():
        raise _fail("no input: give a log file, a directory, or pipe a log on stdin (see --help)")
    if follow:
        from triage.api import load_kb as _load
        from triage.follow import run_follow
        from triage.kb.store import load_current

        kb = load_current(signatures, kb_path) if kb_path else _load(signatures)
        raise typer.Exit(run_follow(args, Engine(kb, RunOptions(engine=engine)), sys.stdout))
    try:
        if kb_path:
            from triage.kb.store import load_current

            kb = load_current(signatures, kb_path)
        else:
            kb = load_kb(signatures)
        eng = Engine(
            kb, RunOptions(engine=engine, max_decompressed=max_decompressed_mib << 20, jobs=jobs)
        )
        report = eng.run(args)
    except InputError as exc:
        raise _fail(str(exc)) from None
    if all(i.lines == 0 for i in report.inputs):
        raise _fail("empty input: nothing to triage")
    if not no_history:
        _record_history(report, db, run_id)
    _emit(report, format, explain, color)
    raise typer.Exit(EXIT_FAILURE if report.failed else EXIT_OK)


def _record_history(report: object, db: Path | None, run_id: str | None) -> None:
    """Record the run in the history database; a history problem never fails a triage."""
    try:
        from triage.history.recorder import record_run
    except ImportError:
        return
    try:
        record_run(report, db_path=db, run_id=run_id)  # type: ignore[arg-type]
    except Exception as exc:
        typer.echo(f"triage: note: history not recorded: {exc}", err=True)


def _emit(report: object, fmt: Format, explain: bool, color: bool | None) -> None:
    from triage.models import Report
    from triage.render.json import render_json
    from triage.render.markdown import render_markdown
    from triage.render.text import render_text

    assert isinstance(report, Report)
    if fmt is Format.json or fmt is Format.jsonl:
        sys.stdout.write(
            render_json(report, explain=explain)
            if fmt is Format.json
            else render_json(report, explain=explain).replace("\n", " ") + "\n"
        )
    elif fmt is Format.markdown:
        sys.stdout.write(render_markdown(report))
    else:
        render_text(report, explain=explain, color=color, stream=sys.stdout)
    sys.stdout.flush()


@kb_app.command("lint")
def kb_lint(
    root: Annotated[Path | None, typer.Argument(help="Signature directory")] = None,
    fast: Annotated[bool, typer.Option("--fast", help="Skip the adversarial timing check")] = False,
) -> None:
    """Check every signature: schema, portable regexes, linear time, examples, generic patterns, overlaps."""
    from triage.kb.lint import lint

    issues = lint(root, timing=not fast)
    for issue in issues:
        typer.echo(str(issue))
    typer.echo(f"{len(issues)} issue(s)")
    raise typer.Exit(EXIT_FAILURE if issues else EXIT_OK)


@kb_app.command("eval")
def kb_eval(
    corpus: Annotated[Path, typer.Argument(help="Corpus directory")] = Path("corpus"),
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List every miss")] = False,
) -> None:
    """Measure quality on a corpus: top-1 with evidence on the expected line, top-3, silence, false alarms."""
    from triage.evaluate import evaluate, format_eval

    result = evaluate(corpus)
    typer.echo(format_eval(result, verbose=verbose))
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
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {output}")


def main(argv: list[str] | None = None) -> None:
    """Entry point: dispatch to a subcommand or to log triage; turn every error into exit 2."""
    args = sys.argv[1:] if argv is None else argv
    os.environ.setdefault("COLUMNS", "110")
    try:
        # Subcommand names win over files of the same name: triage a file called `bench` as `./bench`.
        if args and args[0] in PLUGIN_COMMANDS:
            _run_plugin(PLUGIN_COMMANDS[args[0]], args[0], args[1:], f"triage {args[0]}")
        elif len(args) > 1 and args[0] == "kb" and args[1] in KB_PLUGIN_COMMANDS:
            _run_plugin(KB_PLUGIN_COMMANDS[args[1]], args[1], args[2:], f"triage kb {args[1]}")
        elif args and args[0] in SUBCOMMANDS:
            app(args=args, prog_name="triage", standalone_mode=True)
        else:
            triage_app(args=args, prog_name="triage", standalone_mode=True)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the interpreter's flush
        finally:
            sys.exit(EXIT_FAILURE)
    except SystemExit:
        raise
    except Exception as exc:  # never a traceback for the user
        typer.echo(f"triage: internal error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(EXIT_USAGE)


if __name__ == "__main__":
    main()
