"""The `triage` command: arguments, choice of source and renderer, exit status. No matching logic.

`triage [OPTIONS] [INPUT...]` triages logs (files, directories, '-' or a pipe on stdin). It is
parsed with argparse so that a triage starts fast; subcommands (`triage kb lint`, `triage comment`,
...) are Typer apps that live with their feature and are imported only when used. The first argument
decides which is meant (subcommand names win over files of that name: use `./bench` for a file).
Exit status: 0 no failure diagnosed, 1 failure diagnosed or found, 2 usage or input error (one line
on stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from triage import __version__

if TYPE_CHECKING:
    from triage.models import Report

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
FORMATS = ("text", "json", "markdown", "jsonl")

# Subcommands: name -> module exposing `APPS: dict[str, typer.Typer]`, run with the remaining args.
PLUGIN_COMMANDS: dict[str, str] = {
    "kb": "triage.kb.cli",
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
    "batch": "triage.fleet.batch_cli",
}
# `triage kb <name>` subcommands provided by `triage.kb.commands`.
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
    except ImportError as exc:
        print(f"triage: '{name}' is not available in this build ({exc})", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    module.APPS[name](args=args, prog_name=prog, standalone_mode=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"triage: {message} (see triage --help)", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="triage",
        description="Triage LLM-serving logs: what broke, in which layer, the lines that show it, "
        "what to try and what will prove the fix.",
        epilog="Subcommands: kb (lint, eval, docs, search, show, stats, build, export-patterns), "
        "comment, run, watch, bot, serve, history, stats, unknown, draft, feedback, lint, probe, "
        "bench. Run `triage SUBCOMMAND --help`. Exit status: 0 no failure, 1 failure diagnosed, "
        "2 usage or input error.",
    )
    p.add_argument(
        "inputs",
        nargs="*",
        metavar="INPUT",
        help="log files, run directories, .gz/.zst files, or '-' for stdin (default)",
    )
    p.add_argument("-f", "--format", choices=FORMATS, default="text", help="output format")
    p.add_argument("--explain", action="store_true", help="show the terms of every score")
    color = p.add_mutually_exclusive_group()
    color.add_argument(
        "--color",
        dest="color",
        action="store_const",
        const=True,
        default=None,
        help="force colour on",
    )
    color.add_argument(
        "--no-color",
        dest="color",
        action="store_const",
        const=False,
        help="force colour off (NO_COLOR is honoured too)",
    )
    p.add_argument(
        "-F",
        "--follow",
        action="store_true",
        help="follow the inputs like tail -F; one JSON line per new hypothesis",
    )
    p.add_argument("-j", "--jobs", type=int, default=1, help="worker processes for large files")
    p.add_argument("--engine", choices=("hyperscan", "re2", "re"), help="scanner to use")
    p.add_argument("--signatures", type=Path, help="signature directory (default: the shipped one)")
    p.add_argument(
        "--kb",
        dest="kb_path",
        type=Path,
        default=os.environ.get("TRIAGE_KB") or None,
        help="compiled knowledge base file (default: user cache; env TRIAGE_KB)",
    )
    p.add_argument(
        "--max-decompressed",
        type=int,
        default=4096,
        metavar="MIB",
        help="limit for .gz/.zst input, MiB (default 4096)",
    )
    p.add_argument(
        "--no-history", action="store_true", help="do not record this run in the history"
    )
    p.add_argument(
        "--db",
        type=Path,
        default=os.environ.get("TRIAGE_DB") or None,
        help="history database (default: user data dir; env TRIAGE_DB)",
    )
    p.add_argument("--run-id", help="run id to record with the history")
    p.add_argument("--version", action="store_true", help="show version and scanning engine")
    return p


def triage_main(argv: list[str]) -> int:
    opts = _parser().parse_args(argv)
    if opts.version:
        from triage.scanners import available_engines, chosen_engine
        from triage.usertext import blanking

        engines = available_engines()
        print(f"triage {__version__} (scanner: {chosen_engine()}; available: {', '.join(engines)})")
        print(f"logged user text: {blanking()}")
        return EXIT_OK
    if not 1 <= opts.jobs <= 64:
        print("triage: --jobs must be between 1 and 64", file=sys.stderr)
        return EXIT_USAGE
    args = opts.inputs or ["-"]
    if args == ["-"] and sys.stdin.isatty():
        print(
            "triage: no input: give a log file, a directory, or pipe a log on stdin (see --help)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    from triage.api import Engine, RunOptions
    from triage.kb.store import load_current
    from triage.read import InputError

    kb = load_current(opts.signatures, opts.kb_path)
    options = RunOptions(
        engine=opts.engine,
        max_decompressed=opts.max_decompressed << 20,
        jobs=opts.jobs,
        digest=not opts.no_history,  # the digest is the history's content key
    )
    if opts.follow:
        from triage.follow import run_follow

        return run_follow(args, Engine(kb, options), sys.stdout)
    try:
        report = Engine(kb, options).run(args)
    except InputError as exc:
        print(f"triage: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if all(i.lines == 0 for i in report.inputs):
        print("triage: empty input: nothing to triage", file=sys.stderr)
        return EXIT_USAGE
    if not opts.no_history:
        _record_history(report, opts.db, opts.run_id)
    _emit(report, opts.format, opts.explain, opts.color)
    return EXIT_FAILURE if report.failed else EXIT_OK


def _record_history(report: Report, db: Path | None, run_id: str | None) -> None:
    """Record the run in the history database; a history problem never fails a triage."""
    try:
        from triage.history.recorder import record_run
    except ImportError:
        return
    try:
        record_run(report, db_path=db, run_id=run_id)
    except Exception as exc:
        print(f"triage: note: history not recorded: {exc}", file=sys.stderr)


def _emit(report: Report, fmt: str, explain: bool, color: bool | None) -> None:
    if fmt in ("json", "jsonl"):
        from triage.render.json import render_json

        text = render_json(report, explain=explain)
        sys.stdout.write(text if fmt == "json" else text.replace("\n", " ").rstrip() + "\n")
    elif fmt == "markdown":
        from triage.render.markdown import render_markdown

        sys.stdout.write(render_markdown(report))
    else:
        from triage.render.text import render_text

        render_text(report, explain=explain, color=color, stream=sys.stdout)
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> None:
    """Entry point: dispatch to a subcommand or to log triage; turn every error into exit 2."""
    args = sys.argv[1:] if argv is None else argv
    os.environ.setdefault("COLUMNS", "110")
    try:
        if len(args) > 1 and args[0] == "kb" and args[1] in KB_PLUGIN_COMMANDS:
            _run_plugin(KB_PLUGIN_COMMANDS[args[1]], args[1], args[2:], f"triage kb {args[1]}")
        elif args and args[0] in PLUGIN_COMMANDS:
            _run_plugin(PLUGIN_COMMANDS[args[0]], args[0], args[1:], f"triage {args[0]}")
        else:
            sys.exit(triage_main(args))
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
        print(f"triage: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


if __name__ == "__main__":
    main()
