"""The main command's `--llm*` options and the step's state across one triage run.

Kept apart from `triage.llm.cli` (a Typer app) so that the main command's start-up imports
nothing heavier than argparse for them. Nothing is sent without `--llm`: no environment variable
turns the step on. `TRIAGE_LLM_API_KEY`, when set, is sent as the bearer token, and only to the
`--llm` URL.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from triage.api import Engine, KnowledgeBase
    from triage.models import Report


def add_options(parser: argparse.ArgumentParser) -> None:
    """The main command's options (called by `triage.cli`)."""
    group = parser.add_argument_group("LLM step (docs/llm.md; off unless --llm is given)")
    group.add_argument(
        "--llm",
        metavar="URL",
        help="OpenAI-compatible base URL, e.g. "
        "http://127.0.0.1:8000/v1: ask it about what the knowledge base cannot explain",
    )
    group.add_argument("--llm-model", metavar="NAME", help="model name the server serves")
    group.add_argument(
        "--llm-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="give up on the server after S seconds (default 60)",
    )
    group.add_argument(
        "--llm-dry-run",
        action="store_true",
        help="print the exact request body instead of sending it",
    )
    group.add_argument("--llm-no-cache", action="store_true", help="ignore cached answers")
    group.add_argument("--llm-always", action="store_true", help=argparse.SUPPRESS)


class UsageError(Exception):
    pass


class LlmRun:
    """The step's state across one triage: the options, and stdin kept so it can be read again."""

    def __init__(self, opts: argparse.Namespace, args: list[str]) -> None:
        if not opts.llm or not opts.llm_model:
            raise UsageError("--llm URL and --llm-model NAME go together (see docs/llm.md)")
        if not 0 < opts.llm_timeout <= 600:
            raise UsageError("--llm-timeout must be between 0 and 600 seconds")
        from triage.llm.client import LlmError, endpoint

        try:
            endpoint(opts.llm)
        except LlmError as exc:
            raise UsageError(str(exc)) from None
        self.opts = opts
        self.args = args
        self.stdin: BinaryIO | None = None
        self._spool: Any = None
        if "-" in args:
            import shutil
            import tempfile

            # The engine reads stdin once; a copy lets the evidence windows read it again.
            self._spool = tempfile.NamedTemporaryFile(prefix="triage-stdin-")  # noqa: SIM115
            shutil.copyfileobj(sys.stdin.buffer, self._spool, 1 << 20)
            self._spool.flush()
            self.stdin = open(self._spool.name, "rb")  # noqa: SIM115 - closed with the spool

    def paths(self) -> dict[str, Path]:
        from triage.read import expand_inputs

        out: dict[str, Path] = {}
        for name, path in expand_inputs(self.args):
            if path is not None:
                out[name] = path
            elif self._spool is not None:
                out[name] = Path(self._spool.name)
        return out

    def attach(self, report: Any, kb: Any) -> bool:
        """Run the step on a finished report; True when a dry run printed the request body."""
        from triage.llm.step import Outcome, Settings, suggest

        opts = self.opts
        settings = Settings(
            url=opts.llm,
            model=opts.llm_model,
            timeout=opts.llm_timeout,
            dry_run=opts.llm_dry_run,
            force=opts.llm_always,
            use_cache=not opts.llm_no_cache,
            api_key=os.environ.get("TRIAGE_LLM_API_KEY") or None,
        )
        try:
            outcome = suggest(report, kb, self.paths(), settings)
        except Exception as exc:  # the step must never cost the user the deterministic report
            outcome = Outcome(note=f"llm: suggestion dropped: {type(exc).__name__}: {exc}")
        finally:
            self.close()
        if outcome.note:
            print(f"triage: note: {outcome.note}", file=sys.stderr)
        if outcome.body is not None:
            sys.stdout.buffer.write(outcome.body)
            sys.stdout.flush()
            return True
        return False

    def close(self) -> None:
        if self.stdin is not None:
            self.stdin.close()
        if self._spool is not None:
            self._spool.close()


def run_with_step(
    engine: Engine, args: list[str], opts: argparse.Namespace, kb: KnowledgeBase
) -> Report:
    """`Engine.run` for the main command with `--llm`: stdin kept for the evidence windows, then
    the step on the finished report. A usage error exits 2; a dry run prints the request body
    and exits with the report's status (nothing else is printed or recorded)."""
    try:
        step = LlmRun(opts, args)
    except UsageError as exc:
        print(f"triage: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    report = engine.run(args, stdin=step.stdin)
    if all(i.lines == 0 for i in report.inputs):
        step.close()
        return report  # the caller says "empty input"
    if step.attach(report, kb):
        raise SystemExit(1 if report.failed else 0)
    return report
