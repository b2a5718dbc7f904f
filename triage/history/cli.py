"""History commands: `triage history`, `triage stats`, `triage unknown`, `triage draft`,
`triage feedback`. `triage.cli` dispatches to `APPS[name]`.

Every command takes `--db PATH` (or `TRIAGE_DB`); the default is the user's data directory.
Exit status: 0 done, 2 usage error or unusable database (one line on stderr, never a traceback).
"""

from __future__ import annotations

import functools
import getpass
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer

from triage.cliapp import Output, subcommand_app
from triage.history import query
from triage.history.cluster import parse_cluster_id
from triage.history.schema import HistoryError, opened, resolve
from triage.textutil import neutralise

EXIT_OK, EXIT_USAGE = 0, 2
P = ParamSpec("P")
R = TypeVar("R")


history_app = subcommand_app("List recent triage runs recorded in the history database.")
stats_app = subcommand_app(
    "Hit counts per signature over time: first and last seen, per host and version."
)
unknown_app = subcommand_app(
    "The queue of unexplained failures: unrecognized lines clustered across runs."
)
draft_app = subcommand_app("Write a signature YAML skeleton from a cluster of unrecognized lines.")
feedback_app = subcommand_app("Record a human verdict on a run's diagnosis.")

APPS: dict[str, typer.Typer] = {
    "history": history_app,
    "stats": stats_app,
    "unknown": unknown_app,
    "draft": draft_app,
    "feedback": feedback_app,
}

DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        envvar="TRIAGE_DB",
        help="History database (default: $XDG_DATA_HOME/triage/history.db)",
    ),
]
SinceOption = Annotated[
    str | None,
    typer.Option("--since", help="Only runs newer than this: 30d, 12h, 2w, or a date (2025-01-31)"),
]
FormatOption = Annotated[Output, typer.Option("--format", "-f", help="text or json")]


def _guarded(func: Callable[P, R]) -> Callable[P, R]:
    """Turn a history problem into one line on stderr and exit 2."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except HistoryError as exc:
            typer.echo(f"triage: {exc}", err=True)
            raise typer.Exit(EXIT_USAGE) from None

    return wrapper


def _clip(text: str, width: int) -> str:
    text = neutralise(text).replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    cells = [[str(c) for c in headers], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = []
    for i, r in enumerate(cells):
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def _echo_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def _open_existing(db: Path | None) -> Any:
    path = resolve(db)
    if not path.exists():
        typer.echo(
            f"no history yet at {path} (every `triage LOG` run records there; --no-history skips)"
        )
        raise typer.Exit(EXIT_OK)
    return opened(path, create=False)


# -- triage history ------------------------------------------------------------------------------


@history_app.command()
@_guarded
def history(
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many runs")] = 20,
    since: SinceOption = None,
    signature: Annotated[
        str | None, typer.Option("--signature", help="Only runs where it fired")
    ] = None,
    host: Annotated[str | None, typer.Option("--host", help="Only runs on this host")] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Run PRAGMA integrity_check and exit")
    ] = False,
    db: DbOption = None,
    format: FormatOption = Output.text,
) -> None:
    """List recent runs: when, host, inputs, what fired, unexplained lines.

    Examples: `triage history`, `triage history --since 7d --signature kv-cache-no-memory`.
    """
    with _open_existing(db) as conn:
        if check:
            status = conn.execute("PRAGMA integrity_check").fetchone()[0]
            typer.echo(f"{resolve(db)}: integrity_check {status}")
            raise typer.Exit(EXIT_OK if status == "ok" else EXIT_USAGE)
        runs = query.list_runs(
            conn, limit=limit, since=query.parse_since(since), signature=signature, host=host
        )
    if format is Output.json:
        _echo_json([r.__dict__ for r in runs])
        return
    if not runs:
        typer.echo("no runs recorded" + (" in that window" if since else ""))
        return
    rows = []
    for r in runs:
        fired = ", ".join(r.signatures[:3]) + (" …" if len(r.signatures) > 3 else "") or "-"
        names = ", ".join(Path(n).name for n in r.inputs[:2]) + (" …" if len(r.inputs) > 2 else "")
        rows.append(
            (
                r.number,
                query.when(r.ts),
                _clip(r.host or "-", 20),
                _clip(r.run_id or "-", 16),
                _clip(names or "-", 32),
                fired,
                r.unknown or "-",
            )
        )
    for line in _table(("run", "when (UTC)", "host", "run id", "inputs", "fired", "unknown"), rows):
        typer.echo(line)


# -- triage stats --------------------------------------------------------------------------------

_BARS = " ▁▂▃▄▅▆▇█"


def _spark(counts: list[int]) -> str:
    top = max(counts) if counts else 0
    if not top:
        return "·" * len(counts)
    return "".join(_BARS[min(8, -(-c * 8 // top))] if c else "·" for c in counts)


@stats_app.command()
@_guarded
def stats(
    since: SinceOption = "30d",
    signature: Annotated[
        str | None, typer.Option("--signature", help="Only this signature")
    ] = None,
    weeks: Annotated[int, typer.Option("--weeks", help="Weeks in the per-week trend")] = 8,
    db: DbOption = None,
    format: FormatOption = Output.text,
) -> None:
    """Hit counts per signature: runs, first and last seen, hosts, engine versions, weekly trend.

    Examples: `triage stats`, `triage stats --since 90d`, `triage stats --since all`.
    """
    window = None if since in (None, "", "all") else query.parse_since(since)
    with _open_existing(db) as conn:
        sigs = query.signature_stats(
            conn, since=window, signatures=[signature] if signature else None
        )
        trend = {s.signature: query.weekly_counts(conn, s.signature, weeks) for s in sigs}
        hosts = query.breakdown(conn, "host", since=window)
        versions = query.breakdown(conn, "engine_version", since=window)
    if format is Output.json:
        _echo_json(
            {
                "since": window,
                "signatures": [
                    {
                        "signature": s.signature,
                        "runs": s.runs,
                        "first_seen": s.first_ts,
                        "last_seen": s.last_ts,
                        "last_host": s.last_host,
                        "hosts": dict(s.hosts),
                        "versions": dict(s.versions),
                        "weekly": trend[s.signature],
                    }
                    for s in sigs
                ],
                "hosts": [{"host": h, "runs": n, "diagnosed": d} for h, n, d in hosts],
                "engine_versions": [
                    {"version": v, "runs": n, "diagnosed": d} for v, n, d in versions
                ],
            }
        )
        return
    label = "all time" if window is None else f"since {query.when(window)} UTC"
    typer.echo(f"signatures that fired ({label}):")
    if not sigs:
        typer.echo("  none")
    rows = [
        (
            s.signature,
            s.runs,
            query.when(s.first_ts),
            query.when(s.last_ts),
            _clip(", ".join(f"{h}×{n}" for h, n in s.hosts.most_common(3)), 36),
            _clip(", ".join(v for v, _ in s.versions.most_common(2)), 28),
            _spark(trend[s.signature]),
        )
        for s in sigs
    ]
    if rows:
        for line in _table(
            (
                "signature",
                "runs",
                "first seen",
                "last seen",
                "hosts",
                "versions",
                f"last {weeks} weeks",
            ),
            rows,
        ):
            typer.echo("  " + line)
    for title, data in (("per host", hosts), ("per engine version", versions)):
        typer.echo(f"\n{title}:")
        for line in _table(("", "runs", "diagnosed"), [(_clip(a, 40), b, c) for a, b, c in data]):
            typer.echo("  " + line)


# -- triage unknown ------------------------------------------------------------------------------


@unknown_app.command()
@_guarded
def unknown(
    args: Annotated[
        list[str] | None,
        typer.Argument(help="Nothing to list clusters; `show CLUSTER` (or just CLUSTER) for one"),
    ] = None,
    since: SinceOption = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many clusters")] = 30,
    db: DbOption = None,
    format: FormatOption = Output.text,
) -> None:
    """Unrecognized lines clustered across runs, by size and recency, with an example line.

    Examples: `triage unknown`, `triage unknown show 3`, then `triage draft 3`.
    """
    words = list(args or [])
    if words and words[0] == "show":
        words = words[1:]
        if not words:
            raise HistoryError("usage: triage unknown show CLUSTER")
    if len(words) > 1:
        raise HistoryError(f"unexpected arguments: {' '.join(words[1:])}")
    with _open_existing(db) as conn:
        if words:
            cid = parse_cluster_id(words[0])
            if cid is None:
                raise HistoryError(f"not a cluster id: {words[0]!r} (see `triage unknown`)")
            _show_cluster(query.cluster_detail(conn, cid), format)
            return
        clusters = query.list_clusters(conn, since=query.parse_since(since), limit=limit)
    if format is Output.json:
        _echo_json([c.__dict__ for c in clusters])
        return
    if not clusters:
        typer.echo("no unrecognized lines recorded")
        return
    rows = [
        (
            c.id,
            c.runs,
            c.lines,
            query.when(c.last_ts),
            _clip(", ".join(c.hosts), 18),
            _clip(c.example, 70),
        )
        for c in clusters
    ]
    for line in _table(("cluster", "runs", "lines", "last seen", "hosts", "example"), rows):
        typer.echo(line)
    typer.echo(
        "\n`triage unknown show CLUSTER` for details, `triage draft CLUSTER` for a signature"
    )


def _show_cluster(detail: query.ClusterDetail, format: Output) -> None:
    row = detail.row
    if format is Output.json:
        _echo_json(
            {
                "cluster": row.__dict__,
                "templates": [
                    {"template": t, "similarity": s, "lines": n} for t, s, n in detail.templates
                ],
                "lines": [
                    {"run": r, "text": t, "input": i, "line": ln, "count": c}
                    for r, t, i, ln, c in detail.lines
                ],
                "runs": [
                    {"run": n, "run_id": rid, "ts": ts, "host": h, "engine_version": v}
                    for n, rid, ts, h, v in detail.runs
                ],
            }
        )
        return
    typer.echo(
        f"cluster {row.id}: {row.lines} lines in {row.runs} runs, first "
        f"{query.when(row.first_ts)}, last {query.when(row.last_ts)} UTC"
    )
    typer.echo("templates:")
    for template, score, n in detail.templates:
        joined = "" if score >= 100 else f"  (joined at similarity {score:.0f})"
        typer.echo(f"  {n}×  {_clip(template, 200)}{joined}")
    typer.echo("lines:")
    for text in list(dict.fromkeys(t for _, t, _, _, _ in detail.lines))[:10]:
        typer.echo(f"  {_clip(text, 200)}")
    typer.echo("runs:")
    for line in _table(
        ("run", "when (UTC)", "run id", "host", "engine"),
        [
            (n, query.when(ts), _clip(rid or "-", 24), _clip(h or "-", 24), v or "-")
            for n, rid, ts, h, v in detail.runs
        ],
    ):
        typer.echo("  " + line)
    names = {(r, i, ln) for r, _, i, ln, _ in detail.lines}
    typer.echo(
        "where: "
        + ", ".join(sorted(f"run {r} {Path(i or '-').name}:{ln}" for r, i, ln in names)[:8])
    )


# -- triage draft --------------------------------------------------------------------------------


@draft_app.command()
@_guarded
def draft(
    cluster: Annotated[str, typer.Argument(help="Cluster id from `triage unknown`")],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="File to write ('-' for stdout; default ./<id>.yaml)"),
    ] = None,
    signatures: Annotated[
        Path | None,
        typer.Option("--signatures", help="Signature directory (for the nearest known signatures)"),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file")] = False,
    db: DbOption = None,
    llm: Annotated[
        str | None, typer.Option("--llm", help="OpenAI-compatible base URL: a model drafts it")
    ] = None,
    llm_model: Annotated[str | None, typer.Option("--llm-model", help="model name")] = None,
    llm_timeout: Annotated[float, typer.Option("--llm-timeout", help="seconds")] = 120.0,
    llm_dry_run: Annotated[bool, typer.Option("--llm-dry-run", help="print the request")] = False,
    healthy: Annotated[
        Path | None, typer.Option("--healthy", help="healthy logs the draft must not fire on")
    ] = None,
) -> None:
    """Write a signature skeleton: pattern from the template, examples, related, provenance.

    It fails `triage kb lint` until title, layer and fixes are filled in. With `--llm URL
    --llm-model NAME` a model drafts every field instead, and the draft is written only when it
    passes the schema, lint, the cluster's lines and the healthy corpus (docs/llm.md).
    """
    from triage.api import load_kb
    from triage.history.draft import draft_cluster

    cid = parse_cluster_id(cluster)
    if cid is None:
        raise HistoryError(f"not a cluster id: {cluster!r} (see `triage unknown`)")
    kb = load_kb(signatures)
    if llm or llm_model:
        from triage.llm.cli import draft_by_llm

        with _open_existing(db) as conn:
            drafted = draft_by_llm(conn, cid, kb, llm, llm_model, llm_timeout, llm_dry_run, healthy)
        if drafted is None:
            return  # a dry run printed the request
        result = drafted
    else:
        with _open_existing(db) as conn:
            result = draft_cluster(conn, cid, kb.signatures)
    if output is not None and str(output) == "-":
        sys.stdout.write(result.text)
        return
    path = output or Path(f"{result.id}.yaml")
    if path.exists() and not force:
        raise HistoryError(f"{path} exists: pass --force to overwrite or -o another file")
    from triage.safewrite import write_atomic

    write_atomic(path, result.text)  # a reader (or an editor) never sees half a draft
    todo = "review it (its fixes are leads)" if llm else "fill in title, layer and fixes"
    typer.echo(
        f"wrote {path}: {todo}, move it to "
        f"signatures/<layer>/{result.id}.yaml, run `triage kb lint`"
    )


# -- triage feedback -----------------------------------------------------------------------------


@feedback_app.command()
@_guarded
def feedback(
    run: Annotated[str, typer.Argument(help="Run number (from `triage history`) or run id")],
    wrong: Annotated[
        str | None, typer.Option("--wrong", help="This signature was a wrong diagnosis")
    ] = None,
    confirm: Annotated[
        str | None, typer.Option("--confirm", help="This signature was right")
    ] = None,
    fixed_by: Annotated[
        str | None,
        typer.Option(
            "--fixed-by", help="The fix that worked: its number in the signature's list, or text"
        ),
    ] = None,
    signature: Annotated[
        str | None,
        typer.Option(
            "--signature", help="With --fixed-by: the signature (default: the run's top one)"
        ),
    ] = None,
    note: Annotated[str | None, typer.Option("--note", help="Free text")] = None,
    db: DbOption = None,
) -> None:
    """Record a verdict: `--confirm SIG`, `--wrong SIG`, or `--fixed-by FIX` (a confirmation).

    Per-signature precision from these verdicts is shown by `triage kb stats`.
    """
    chosen = [x for x in (wrong, confirm, fixed_by) if x]
    if len(chosen) != 1:
        raise HistoryError(
            "give exactly one of --wrong SIGNATURE, --confirm SIGNATURE, --fixed-by FIX"
        )
    try:
        user: str | None = getpass.getuser()
    except Exception:  # no login name (containers): recorded without one
        user = None
    path = resolve(db)
    if not path.exists():
        raise HistoryError(f"no history database at {path}: nothing to give feedback on")
    with opened(path, create=False) as conn:
        number = query.find_run(conn, run)
        fired = query.run_signatures(conn, number)
        fix: str | None = None
        if wrong:
            sig, verdict = wrong, "wrong"
        elif confirm:
            sig, verdict = confirm, "confirm"
        else:
            top = signature or (fired[0] if fired else None)
            if top is None:
                raise HistoryError(f"run {number} has no diagnosis: name it with --signature")
            sig, verdict, fix = top, "confirm", _fix_text(top, fixed_by or "")
        if sig not in fired and not _known(sig):
            raise HistoryError(f"unknown signature {sig!r} (see `triage kb search WORDS`)")
        query.add_feedback(conn, number, sig, verdict, fix=fix, note=note, user=user)
    where = "" if sig in fired else " (it did not fire in that run: recorded as a miss)"
    extra = f", fixed by {fix!r}" if fix else ""
    word = "confirmed" if verdict == "confirm" else "wrong"
    typer.echo(f"run {number}: {sig} {word}{extra}{where}")


def _known(signature: str) -> bool:
    from triage.api import load_kb

    kb = load_kb()
    return signature in kb.by_id or any(signature in s.aliases for s in kb.signatures)


def _fix_text(signature: str, fix: str) -> str:
    """'2' -> '#2: <the second fix of the signature>'; any other text is kept as given."""
    if not fix.strip().isdigit():
        return fix
    from triage.api import load_kb

    sig = load_kb().by_id.get(signature)
    index = int(fix.strip())
    if sig is None or not 1 <= index <= len(sig.fixes):
        return fix
    return f"#{index}: {sig.fixes[index - 1].do}"


# -- triage history import / serve ---------------------------------------------------------------

import_app = subcommand_app(
    "Load the rows of `triage batch` (DIR/rows.jsonl) into the history: one run per file."
)
serve_app = subcommand_app(
    "Open the history read-only in Datasette: canned queries and a chart of failures per day."
)


@import_app.command("import")
@_guarded
def import_rows(
    rows: Annotated[Path, typer.Argument(help="rows.jsonl written by `triage batch --out DIR`")],
    host: Annotated[
        str | None,
        typer.Option(
            "--host", help="Record every run under this host (default: each file's directory name)"
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Record each row as a run (time: the file's mtime), so `triage history`, `triage stats`
    and `triage unknown` cover the whole archive. Rows already imported are skipped.

    Example: `triage batch logs/ --out out/ && triage history import out/rows.jsonl`.
    """
    from triage.history import importer

    with opened(resolve(db)) as conn:
        result = importer.import_rows(conn, importer.read_rows(rows), host=host)
    typer.echo(
        f"imported {result.imported} runs into {resolve(db)}"
        + (f", {result.already} already there" if result.already else "")
        + (
            f", {result.errors} rows without a report (their input could not be read)"
            if result.errors
            else ""
        )
    )


@serve_app.command("serve")
@_guarded
def serve(
    host: Annotated[
        str, typer.Option("--host", help="Address to bind (default loopback only)")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", help="Port")] = 8001,
    db: DbOption = None,
) -> None:
    """Serve a snapshot of the history in Datasette (immutable), with canned queries: failures
    per signature and layer over time, per host and run, the largest unknown clusters, the
    signatures that stopped firing; and a chart of failures per day. Restart to see new runs.

    Example: `triage history serve --db fleet.db` then open http://127.0.0.1:8001/history
    """
    from triage.fleet.serve import serve as run_view

    run_view(resolve(db), host, port)


class _WithSubcommands(typer.Typer):
    """`triage history` lists runs; `triage history import|serve` are commands of their own
    (the listing takes no positional argument, so the first word is free to choose one)."""

    def __init__(self, listing: typer.Typer, commands: dict[str, typer.Typer]) -> None:
        # The listing's own state (its command, help, settings): anything that builds the click
        # command from this app (CliRunner, --help) sees the listing exactly as before.
        self.__dict__.update(vars(listing))
        self.subcommands = commands

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        argv = list(kwargs.get("args") or [])
        if argv and argv[0] in self.subcommands:
            prog = kwargs.get("prog_name") or "triage history"
            kwargs.update(args=argv[1:], prog_name=f"{prog} {argv[0]}")
            return self.subcommands[argv[0]](*args, **kwargs)
        return super().__call__(*args, **kwargs)


APPS["history"] = _WithSubcommands(history_app, {"import": import_app, "serve": serve_app})
