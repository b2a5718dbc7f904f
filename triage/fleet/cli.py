"""`triage node-check` and `triage export npd` (dispatched here by `triage.cli.PLUGIN_COMMANDS`).

node-check speaks node-problem-detector's plugin protocol whatever happens: one line on stdout
and exit 0 (OK), 1 (NonOK) or 2 (Unknown). An input it cannot read, a knowledge base it cannot
load, even a bug of its own, is an Unknown with a short message, never a traceback or a silent OK.
"""

from __future__ import annotations

import re
import sys
import zlib
from pathlib import Path
from typing import Annotated

import typer

from triage.cliapp import subcommand_app
from triage.fleet.node import DEFAULT_MAX_OUTPUT, Verdict, unknown

node_app = subcommand_app("Check this node's recent kernel log and journal (NPD plugin).")
export_app = subcommand_app("Export the knowledge base to other tools' formats.")

_SIZE = re.compile(r"(\d+)\s*([kmg]?)i?b?", re.IGNORECASE)


def parse_size(text: str) -> int:
    m = _SIZE.fullmatch(text.strip())
    if not m:
        raise typer.BadParameter(f"{text!r}: give bytes, or a size like 512K, 8M, 1G")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


@node_app.command("node-check")
def node_check(
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Kernel log or journal files to read instead of the kernel journal "
            "(their last --max-bytes; .gz/.zst read through)",
            show_default=False,
        ),
    ] = None,
    family: Annotated[
        str | None,
        typer.Option("--family", help="Only this signature family (see `triage export npd`)"),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Time window: -10min, 2h, boot or all (default: the journal's last 10 minutes; "
            "files are windowed by bytes only unless given)",
        ),
    ] = None,
    units: Annotated[
        list[str] | None,
        typer.Option("--unit", "-u", help="Also read this systemd unit's journal (repeatable)"),
    ] = None,
    journal_dir: Annotated[
        Path | None,
        typer.Option("--journal-dir", help="Journal directory (journalctl --directory)"),
    ] = None,
    max_bytes: Annotated[
        str, typer.Option("--max-bytes", help="Bytes read from the end of each source")
    ] = "8M",
    max_output_length: Annotated[
        int, typer.Option("--max-output-length", help="Longest message (NPD's setting)")
    ] = DEFAULT_MAX_OUTPUT,
    severity: Annotated[
        str, typer.Option("--severity", help="Lowest severity that is NonOK: error or warning")
    ] = "error",
    signatures: Annotated[
        Path | None, typer.Option("--signatures", help="Signature directory")
    ] = None,
    kb_path: Annotated[
        Path | None, typer.Option("--kb", envvar="TRIAGE_KB", help="Compiled knowledge base file")
    ] = None,
    record: Annotated[
        bool,
        typer.Option(
            "--record",
            help="Record failures and unrecognized lines in the history (each once)",
        ),
    ] = False,
    db: Annotated[
        Path | None, typer.Option("--db", envvar="TRIAGE_DB", help="History database")
    ] = None,
    prom_textfile: Annotated[
        Path | None,
        typer.Option("--prom-textfile", help="Also write the window's metrics here, atomically"),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Print the window's report on stderr")
    ] = False,
) -> None:
    """Triage this node's recent kernel log (and unit journals or files) for node-problem-detector:
    exit 0 OK, 1 NonOK, 2 Unknown; one line on stdout names the top node-layer hypothesis."""
    try:
        verdict = _check(
            files or [],
            family,
            since,
            units or [],
            journal_dir,
            max_bytes,
            max_output_length,
            severity,
            signatures,
            kb_path,
        )
    except Exception as exc:  # the protocol has no room for a traceback
        verdict = unknown(f"internal error: {type(exc).__name__}", max_output_length)
    if verdict.report is not None:
        _side_effects(verdict, family, record, db, prom_textfile, verbose)
    sys.stdout.write(verdict.message + "\n")
    sys.stdout.flush()
    raise typer.Exit(verdict.status)


def _check(
    files: list[Path],
    family_name: str | None,
    since_text: str | None,
    units: list[str],
    journal_dir: Path | None,
    max_bytes_text: str,
    limit: int,
    severity: str,
    signatures: Path | None,
    kb_path: Path | None,
) -> Verdict:
    from triage.fleet.families import FAMILY_NAMES, UnknownFamily, family, family_of
    from triage.fleet.node import SEVERITY_ORDER, triage_windows, verdict
    from triage.fleet.window import WindowError, collect, parse_since

    try:
        fam = family(family_name) if family_name else None
        since = parse_since(since_text) if since_text else None
        size = parse_size(max_bytes_text)
        if severity not in SEVERITY_ORDER:
            raise ValueError(f"--severity {severity!r}: error or warning")
    except (UnknownFamily, ValueError, typer.BadParameter) as exc:
        return unknown(str(exc), limit)
    try:
        windows = collect(files, units, since, size, journal_dir=journal_dir)
    except WindowError as exc:
        return unknown(str(exc), limit)
    try:
        from triage.api import Engine, RunOptions
        from triage.kb.store import load_current

        engine = Engine(load_current(signatures, kb_path), RunOptions(digest=False))
    except Exception as exc:
        return unknown(f"knowledge base: {type(exc).__name__}", limit)
    # a knowledge base that loaded empty (a broken signature directory) would say OK forever
    wanted = {fam.name} if fam else set(FAMILY_NAMES)
    if not wanted & {family_of(s) for s in engine.kb.signatures}:
        return unknown(f"knowledge base: no {fam.name if fam else 'node'} signatures", limit)
    report = triage_windows(engine, windows)
    return verdict(report, engine, fam, min_severity=severity, limit=limit)


def _side_effects(
    result: Verdict,
    family: str | None,
    record: bool,
    db: Path | None,
    prom_textfile: Path | None,
    verbose: bool,
) -> None:
    """What a check writes besides its verdict; none of it may change the verdict."""
    report = result.report
    assert report is not None
    if verbose:
        from triage.render.text import render_text

        render_text(report, explain=False, color=False, stream=sys.stderr)
    if prom_textfile is not None:
        from triage.fleet.promfile import report_textfile

        report_textfile(prom_textfile, report)
    if record and (result.status == 1 or report.unrecognized):
        try:
            _record_once(result, family, db)
        except Exception as exc:
            print(f"triage: note: history not recorded: {exc}", file=sys.stderr)


def record_key(result: Verdict, family: str | None) -> str:
    """The run id a check is recorded under: the failure lines it saw, not the window's bytes, so
    that the same Xid seen by twenty checks in a row is one run in the history."""
    report = result.report
    assert report is not None
    parts = [result.message]
    if result.top is not None:
        parts += sorted({e.text for e in result.top.evidence})
    parts += sorted({u.fingerprint for u in report.unrecognized})
    digest = zlib.crc32("\n".join(parts).encode("utf-8", "replace"))
    return f"node-check/{family or 'all'}/{digest:08x}"


def _record_once(result: Verdict, family: str | None, db: Path | None) -> None:
    from triage.history.recorder import record_run
    from triage.history.schema import opened

    assert result.report is not None
    key = record_key(result, family)
    with opened(db) as conn:
        if conn.execute("SELECT 1 FROM runs WHERE run_id = ? LIMIT 1", (key,)).fetchone():
            return
        record_run(result.report, run_id=key, conn=conn)


@export_app.callback()
def _export() -> None:
    """Export the knowledge base to other tools' formats."""


@export_app.command("npd")
def export_npd(
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write here (default: stdout)")
    ] = None,
    path: Annotated[
        str, typer.Option("--path", help="The triage executable as NPD's container sees it")
    ] = "/usr/local/bin/triage",
    interval: Annotated[str, typer.Option("--interval", help="NPD invoke_interval")] = "60s",
    timeout: Annotated[
        str, typer.Option("--timeout", help="NPD timeout (global and rule)")
    ] = "30s",
    max_output_length: Annotated[
        int, typer.Option("--max-output-length", help="NPD max_output_length")
    ] = DEFAULT_MAX_OUTPUT,
    since: Annotated[
        str | None,
        typer.Option("--since", help="One window for every family (default: each family's)"),
    ] = None,
    units: Annotated[
        list[str] | None, typer.Option("--unit", "-u", help="Unit journal every check reads")
    ] = None,
    journal_dir: Annotated[
        Path | None, typer.Option("--journal-dir", help="Journal directory inside NPD's container")
    ] = None,
    families: Annotated[
        list[str] | None, typer.Option("--family", help="Export only these families")
    ] = None,
) -> None:
    """A node-problem-detector custom-plugin-monitor config: one condition per signature family,
    each rule running `triage node-check --family F`."""
    from triage.fleet.families import FAMILY_NAMES
    from triage.fleet.npd import ExportOptions, render_npd

    unknown_names = sorted(set(families or ()) - set(FAMILY_NAMES))
    if unknown_names:
        typer.echo(
            f"triage export npd: unknown family {', '.join(unknown_names)} "
            f"(one of: {', '.join(FAMILY_NAMES)})",
            err=True,
        )
        raise typer.Exit(2)
    text = render_npd(
        ExportOptions(
            path=path,
            interval=interval,
            timeout=timeout,
            max_output_length=max_output_length,
            since=since,
            units=units or [],
            journal_dir=journal_dir,
            families=families or (),
        )
    )
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")


APPS = {"node-check": node_app, "export": export_app}
