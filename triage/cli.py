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
import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from triage import __version__
from triage.completion import SHELLS

if TYPE_CHECKING:
    from triage.api import Engine, KnowledgeBase
    from triage.models import Report

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
FORMATS = ("text", "json", "markdown", "jsonl", "prom", "gha", "junit")
COLOR_CHOICES = ("auto", "always", "never")

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
    "ask": "triage.llm.cli",
    "mcp": "triage.mcp.cli",
    "node-check": "triage.fleet.cli",
    "export": "triage.fleet.cli",
    "batch": "triage.fleet.batch_cli",
}
# `triage kb <name>` subcommands of triage.kb.cli, and those provided by `triage.kb.commands`.
KB_SUBCOMMANDS = ("lint", "eval", "export-patterns", "docs", "build", "search", "show", "stats")
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


def _refused(opts: argparse.Namespace) -> bool:
    """Checks before a triage: a --db that is not a triage history is refused (never written
    into); a user's signature directory must load whole, each bad file and field named (a typo
    would otherwise disable that signature without a word). True: a line was printed, exit 2."""
    if opts.db is not None and not opts.no_history:
        from triage.history.schema import HistoryError, refuse_foreign

        try:
            refuse_foreign(opts.db)
        except HistoryError as exc:
            print(f"triage: {exc}", file=sys.stderr)
            return True
    if opts.signatures is not None:
        from triage.kb.load import unloaded_errors

        errors = unloaded_errors(opts.signatures, opts.kb_path)
        for error in errors:
            print(f"triage: {error}", file=sys.stderr)
        if errors:
            print(f"triage: {opts.signatures}: signature files that do not load", file=sys.stderr)
        return bool(errors)
    return False


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"triage: {message} (see triage --help)", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def _run(engine: Engine, args: list[str], opts: argparse.Namespace, kb: KnowledgeBase) -> Report:
    """The triage, and with --llm the optional LLM step on its report (docs/llm.md)."""
    asked = getattr(opts, "llm", None) or getattr(opts, "llm_model", None)
    if not asked or opts.quiet:  # -q prints nothing, so nothing is asked of a model either
        return engine.run(args)
    from triage.llm.options import run_with_step

    return run_with_step(engine, args, opts, kb)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="triage",
        description="Triage LLM-serving logs: what broke, in which layer, the lines that show it, "
        "what to try and what will prove the fix.",
        epilog="Subcommands: kb (lint, eval, docs, search, show, stats, build, export-patterns), "
        "comment, run, watch, bot, serve, history, stats, unknown, draft, feedback, lint, probe, "
        "bench. Run `triage SUBCOMMAND --help`. A first argument that names a subcommand is one: "
        "give ./run for a file called run. Exit status: 0 no failure, 1 failure diagnosed, "
        "2 usage or input error. Every run is recorded (redacted, file mode 0600) in the history "
        "database (~/.local/share/triage/history.db, or --db / TRIAGE_DB) for `triage history`, "
        "`stats` and `unknown`; --no-history turns it off.",
    )
    p.add_argument(
        "inputs",
        nargs="*",
        metavar="INPUT",
        help="log files, run directories, .gz/.zst files, or '-' for stdin (default)",
    )
    p.add_argument(
        "-f",
        "--format",
        choices=FORMATS,
        default="text",
        metavar="FORMAT",
        help=f"output format: {', '.join(FORMATS)} (default text)",
    )
    p.add_argument("--explain", action="store_true", help="show the terms of every score")
    p.add_argument(
        "--color",
        "--colour",
        dest="color",
        default="auto",
        choices=COLOR_CHOICES,
        metavar="WHEN",
        help="colour: auto (a terminal; NO_COLOR, FORCE_COLOR, CLICOLOR_FORCE, TERM=dumb "
        "honoured), always or never",
    )
    p.add_argument(
        "--no-color",
        dest="color",
        action="store_const",
        const="never",
        help="same as --color=never",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print nothing on stdout: the exit status says it (0 none, 1 failure)",
    )
    p.add_argument(
        "-F",
        "--follow",
        action="store_true",
        help="follow the inputs like tail -F; one JSON line per new hypothesis",
    )
    p.add_argument(
        "--prom-textfile",
        type=Path,
        metavar="PATH",
        help="also write Prometheus metrics to PATH atomically (node_exporter textfile collector)",
    )
    p.add_argument("-j", "--jobs", type=int, default=1, help="worker processes for large files")
    p.add_argument("--engine", choices=("hyperscan", "re2", "re"), help="scanner to use")
    with contextlib.suppress(ImportError):  # --llm URL --llm-model NAME ...: off unless given
        from triage.llm.options import add_options

        add_options(p)
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
        "--no-history",
        action="store_true",
        help="do not record this run (every run is recorded by default in the history database, "
        "see --db; env TRIAGE_NO_HISTORY=1)",
    )
    p.add_argument(
        "--no-redact",
        action="store_true",
        help="show secrets (tokens, passwords) as they are in the log; the history stays redacted",
    )
    p.add_argument(
        "--db",
        type=Path,
        default=os.environ.get("TRIAGE_DB") or None,
        help="history database (default: user data dir; env TRIAGE_DB)",
    )
    p.add_argument("--run-id", help="run id to record with the history")
    p.add_argument(
        "-V",
        "--version",
        action="store_true",
        help="show the version, the knowledge base and the scanning engine",
    )
    p.add_argument(
        "--completion",
        choices=SHELLS,
        metavar="SHELL",
        help="print a completion script for bash, zsh or fish",
    )
    return p


def _color_argument(argv: list[str]) -> list[str]:
    """grep's `--color[=WHEN]`: a bare `--color` means always unless WHEN follows it, so
    `--color server.log` keeps its file (and `--color never` still works)."""
    out: list[str] = []
    args = iter(range(len(argv)))
    for i in args:
        arg = argv[i]
        if arg in ("--color", "--colour"):
            if i + 1 < len(argv) and argv[i + 1] in COLOR_CHOICES:
                out.append(f"--color={argv[i + 1]}")
                next(args)
            else:
                out.append("--color=always")
        elif arg == "--":
            out.extend(argv[i:])
            break
        else:
            out.append(arg)
    return out


def triage_main(argv: list[str]) -> int:
    opts = _parser().parse_args(_color_argument(argv))
    if opts.completion:
        from triage.completion import script

        sys.stdout.write(
            script(opts.completion, _parser(), sorted(PLUGIN_COMMANDS), sorted(KB_SUBCOMMANDS))
        )
        return EXIT_OK
    if opts.version:
        return _version(opts.signatures, opts.kb_path)
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

    no_history = opts.no_history or os.environ.get("TRIAGE_NO_HISTORY", "") not in ("", "0")
    kb = load_current(opts.signatures, opts.kb_path)
    if _refused(opts):
        return EXIT_USAGE
    options = RunOptions(
        engine=opts.engine,
        max_decompressed=opts.max_decompressed << 20,
        jobs=opts.jobs,
        digest=not no_history,  # the digest is the history's content key
        redact=not opts.no_redact,
    )
    if opts.follow:
        from triage.follow import run_follow

        if opts.prom_textfile:
            from triage.fleet.promfile import follow_textfile

            return follow_textfile(opts.prom_textfile, args, Engine(kb, options), sys.stdout)
        return run_follow(args, Engine(kb, options), sys.stdout)
    progress = None
    from triage import progress as progress_line

    if progress_line.wanted(opts.quiet):
        progress = progress_line.ProgressLine()
        options.progress = progress
    try:
        report = _run(Engine(kb, options), args, opts, kb)
    except InputError as exc:
        print(f"triage: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if progress is not None:
            progress.close()
    if all(i.lines == 0 for i in report.inputs):
        reasons = [i for i in report.inputs if i.skipped and i.skipped != "empty"]
        for info in reasons:
            print(f"triage: {info.name}: {info.skipped}", file=sys.stderr)
        if not reasons:
            print("triage: empty input: nothing to triage", file=sys.stderr)
        return EXIT_USAGE
    if not opts.quiet:
        _emit(report, opts.format, opts.explain, opts.color, args)
    if not no_history:
        _record_history(report, opts.db, opts.run_id)
    if opts.prom_textfile:
        from triage.fleet.promfile import report_textfile

        if not report_textfile(opts.prom_textfile, report):
            return EXIT_USAGE
    return EXIT_FAILURE if report.failed else EXIT_OK


def _version(signatures: Path | None, kb_path: Path | None) -> int:
    """`triage --version`: the package, the knowledge base it will use, and the scanner."""
    from triage.kb.store import load_current
    from triage.scanners import available_engines, chosen_engine
    from triage.usertext import blanking

    kb = load_current(signatures, kb_path)  # a missing knowledge base stops here, exit 2
    engines = available_engines()
    print(f"triage {__version__} (scanner: {chosen_engine()}; available: {', '.join(engines)})")
    print(f"knowledge base: {len(kb.signatures)} signatures, digest {kb.digest[:12]}")
    print(f"logged user text: {blanking()}")
    return EXIT_OK


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


def _emit(
    report: Report, fmt: str, explain: bool, color: str, args: list[str] | None = None
) -> None:
    if fmt in ("prom", "gha", "junit"):  # CI and metrics formats: triage/render/<fmt>.py
        import importlib

        importlib.import_module(f"triage.render.{fmt}").write_report(report, sys.stdout, args)
    elif fmt in ("json", "jsonl"):
        from triage.render.json import render_json

        text = render_json(report, explain=explain)
        sys.stdout.write(text if fmt == "json" else text.replace("\n", " ").rstrip() + "\n")
    elif fmt == "markdown":
        from triage.render.markdown import render_markdown

        sys.stdout.write(render_markdown(report))
    else:
        from triage.render.text import render_text, use_color

        render_text(report, explain=explain, color=use_color(sys.stdout, color), stream=sys.stdout)
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> None:
    """Entry point: dispatch to a subcommand or to log triage; turn every error into exit 2."""
    from triage.kb.paths import KnowledgeBaseMissing

    args = sys.argv[1:] if argv is None else argv
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
        _die_of_sigpipe()
    except KnowledgeBaseMissing as exc:
        print(f"triage: {exc}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except SystemExit:
        raise
    except Exception as exc:  # never a traceback for the user
        from triage.safewrite import ForeignFileError

        if isinstance(exc, ForeignFileError):  # a path to write holds a file that is not ours
            print(f"triage: {exc}", file=sys.stderr)
            sys.exit(EXIT_USAGE)
        print(f"triage: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def _die_of_sigpipe() -> None:
    """The reader closed the pipe (`triage big.log | head -1`): end the way grep does, killed by
    SIGPIPE (the shell sees 141), never with 1, which would mean "failure found"."""
    import contextlib
    import signal

    with contextlib.suppress(OSError):
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the interpreter's flush
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
    sys.exit(128 + 13)


if __name__ == "__main__":
    main()
