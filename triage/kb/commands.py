"""`triage kb build | search | show | stats`: the compiled knowledge base from the command line.

`triage.cli` dispatches `triage kb <name>` to `APPS[name]`. The compiled SQLite file is rebuilt
when stale by every command here, as by `triage` itself.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from triage.cliapp import Output, subcommand_app
from triage.kb import store
from triage.kb.records import Signature
from triage.safewrite import ForeignFileError
from triage.textutil import neutralise

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


build_app = subcommand_app(
    "Compile signatures/ into the SQLite knowledge base (atomic; full-text index)."
)
search_app = subcommand_app(
    "Full-text search of the knowledge base, with a fuzzy fallback for pasted lines."
)
show_app = subcommand_app(
    "Show one signature: summary, patterns, differential, fixes, examples, how often it fired."
)
stats_app = subcommand_app(
    "Knowledge base counts: layer, status, severity, fix confidence, never fired, precision."
)

APPS: dict[str, typer.Typer] = {
    "build": build_app,
    "search": search_app,
    "show": show_app,
    "stats": stats_app,
}

SignaturesOption = Annotated[
    Path | None,
    typer.Option("--signatures", help="Signature directory (default: the shipped knowledge base)"),
]
KbOption = Annotated[
    Path | None,
    typer.Option(
        "--kb", envvar="TRIAGE_KB", help="Compiled knowledge base file (default: user cache dir)"
    ),
]
DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db", envvar="TRIAGE_DB", help="History database, for fire counts and precision"
    ),
]
FormatOption = Annotated[Output, typer.Option("--format", "-f", help="text or json")]


def _fail(message: str) -> typer.Exit:
    typer.echo(f"triage: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def _root(signatures: Path | None) -> Path:
    from triage.kb.paths import KnowledgeBaseMissing, require_signature_dir

    try:
        return require_signature_dir(signatures)
    except KnowledgeBaseMissing as exc:
        raise _fail(str(exc)) from None


def open_kb(signatures: Path | None, kb: Path | None) -> sqlite3.Connection:
    """A read-only connection to a current compiled KB, building it first when needed."""
    root = _root(signatures)
    path = kb or store.default_db_path(root)
    conn = store.open_current(root, path)
    if conn is None:
        try:
            store.build(root, path)
        except ForeignFileError as exc:
            raise _fail(str(exc)) from None
        except (store.StoreError, sqlite3.Error, OSError) as exc:
            raise _fail(
                f"cannot build the knowledge base at {path}: {exc} "
                "(pass --kb PATH or set TRIAGE_CACHE_DIR to a writable place)"
            ) from None
        conn = store.open_current(root, path)
        if conn is None:
            raise _fail(f"{path}: the compiled knowledge base is not readable after a build")
    return conn


# -- kb build ------------------------------------------------------------------------------------


@build_app.command()
def build(
    signatures: SignaturesOption = None,
    kb: KbOption = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when current")] = False,
) -> None:
    """Compile the YAML into SQLite: written to a temporary file, checked, moved into place."""
    root = _root(signatures)
    path = kb or store.default_db_path(root)
    if not force:
        conn = store.open_current(root, path)
        if conn is not None:
            with contextlib.closing(conn):
                meta = store.read_meta(conn)
            built = meta.values.get("built_at")
            typer.echo(f"{path}: up to date ({meta.rows} signatures, built {built})")
            _fail_on_unloaded(path)
            raise typer.Exit(EXIT_OK)
    try:
        result = store.build(root, path)
    except ForeignFileError as exc:
        raise _fail(str(exc)) from None
    except (store.StoreError, sqlite3.Error, OSError) as exc:
        raise _fail(f"cannot build {path}: {exc}") from None
    typer.echo(
        f"{result.path}: {len(result.signatures)} signatures compiled in "
        f"{result.seconds:.2f}s"
        + (f", {len(result.errors)} file error(s) (see `triage kb lint`)" if result.errors else "")
    )
    _fail_on_unloaded(result.path)


def _fail_on_unloaded(path: Path) -> None:
    """A signature file that does not load is missing from the KB: name each one and why, and
    fail the build (exit 2), whether it was just built or already up to date."""
    from triage.kb.load import unloaded

    with contextlib.closing(store.connect_ro(path)) as conn:
        loaded = {row[0] for row in conn.execute("SELECT path FROM signatures")}
        dropped = unloaded(store.read_errors(conn), loaded)
    for error in dropped:
        typer.echo(f"triage: {error}", err=True)
    if dropped:
        files = len({e.path for e in dropped})
        raise _fail(f"{files} signature file(s) did not load: the KB was built without them")


# -- kb search -----------------------------------------------------------------------------------

_WORD_RE = re.compile(r"[^\W_]+|_+", re.UNICODE)


@dataclass
class Found:
    id: str
    title: str
    layer: str
    score: float
    why: str
    fires: bool = False


def fts_query(text: str, *, any_word: bool = False) -> str:
    """An FTS5 query from free text: every word quoted (no operators from the user), all
    required (or any, with `any_word`)."""
    words = [w for w in _WORD_RE.findall(text) if w.strip("_")]
    quoted = [f'"{w}"' for w in dict.fromkeys(words)]
    return (" OR " if any_word else " ").join(quoted)


def search_fts(conn: sqlite3.Connection, text: str, limit: int = 10) -> list[Found]:
    q = fts_query(text)
    if not q:
        return []
    weights = ", ".join(str(w) for _, w in store.FTS_COLUMNS)
    rows = conn.execute(
        f"SELECT s.id, s.title, s.layer, bm25(signatures_fts, {weights}) AS score "
        "FROM signatures_fts JOIN signatures s ON s.rowid = signatures_fts.rowid "
        "WHERE signatures_fts MATCH ? ORDER BY score LIMIT ?",
        (q, limit),
    ).fetchall()
    return [Found(i, t, ly, -float(sc), "full text") for i, t, ly, sc in rows]


def closest_known(
    signatures: Sequence[Signature], text: str, limit: int = 3, cutoff: float = 65.0
) -> list[tuple[Signature, float, str]]:
    """Known signatures closest to a line: rapidfuzz token-set similarity of masked texts (numbers,
    paths, addresses masked on both sides) over titles and example lines. Best first."""
    from rapidfuzz import fuzz, process, utils

    from triage.textutil import mask

    choices: list[str] = []
    owners: list[tuple[Signature, str]] = []
    for sig in signatures:
        for candidate in (sig.title, *sig.examples.match, *sig.examples.todo_match):
            choices.append(mask(candidate))
            owners.append((sig, candidate))
    best: dict[str, tuple[Signature, float, str]] = {}
    for _, score, index in process.extract(
        mask(text),
        choices,
        scorer=fuzz.token_set_ratio,
        processor=utils.default_process,
        limit=limit * 10,
        score_cutoff=cutoff,
    ):
        sig, candidate = owners[index]
        if sig.id not in best or best[sig.id][1] < score:
            best[sig.id] = (sig, float(score), candidate)
    return sorted(best.values(), key=lambda x: -x[1])[:limit]


def search_fuzzy(conn: sqlite3.Connection, text: str, limit: int = 5) -> list[Found]:
    """The closest known signatures to a pasted line: those whose decisive pattern fires on it
    first, then by rapidfuzz similarity to their titles and example lines."""
    from triage.kb.lint import line_fires

    sigs = store.read_signatures(conn)
    similar = {
        sig.id: (score, candidate)
        for sig, score, candidate in closest_known(sigs, text, limit=len(sigs), cutoff=0.0)
    }
    out: list[Found] = []
    for sig in sigs:
        score, candidate = similar.get(sig.id, (0.0, ""))
        fires = False
        with contextlib.suppress(Exception):
            fires = sig.kind != "knowledge" and line_fires(sig, text)
        if fires or score >= 55.0:
            why = "its pattern fires on this line" if fires else f"similar to {candidate[:80]!r}"
            out.append(Found(sig.id, sig.title, sig.layer, score, why, fires))
    return sorted(out, key=lambda f: (not f.fires, -f.score, f.id))[:limit]


@search_app.command()
def search(
    query: Annotated[list[str], typer.Argument(help="Words, or a pasted error line")],
    limit: Annotated[int, typer.Option("--limit", "-n")] = 10,
    signatures: SignaturesOption = None,
    kb: KbOption = None,
    format: FormatOption = Output.text,
) -> None:
    """Rank signatures by full-text relevance over titles, summaries, patterns, fixes and examples.

    Examples: `triage kb search "illegal memory access"`,
    `triage kb search 'RuntimeError: NCCL error in: ..., unhandled system error'`.
    A query that matches nothing exactly falls back to the closest known signatures (rapidfuzz).
    """
    text = " ".join(query)
    conn = open_kb(signatures, kb)
    with contextlib.closing(conn):
        found = search_fts(conn, text, limit)
        fuzzy = not found
        if fuzzy:
            found = search_fuzzy(conn, text, limit=min(limit, 5))
    if format is Output.json:
        sys.stdout.write(
            json.dumps(
                {
                    "query": text,
                    "mode": "fuzzy" if fuzzy else "fts",
                    "results": [f.__dict__ for f in found],
                },
                indent=2,
            )
            + "\n"
        )
        raise typer.Exit(EXIT_OK if found else EXIT_FAILURE)
    if not found:
        typer.echo(f"no signature matches {neutralise(text)!r}")
        raise typer.Exit(EXIT_FAILURE)
    if fuzzy:
        typer.echo("no exact match; closest known:")
    for f in found:
        score = "fires" if f.fires else f"{f.score:5.1f}" if fuzzy else f"{f.score:5.2f}"
        why = f"  ({neutralise(f.why)})" if fuzzy else ""
        typer.echo(f"  {score}  {f.id:<44} {f.layer:<8} {f.title}{why}")


# -- kb show -------------------------------------------------------------------------------------


def _find(conn: sqlite3.Connection, ident: str) -> Signature | None:
    row = conn.execute("SELECT json FROM signatures WHERE id = ?", (ident,)).fetchone()
    if row is None:
        row = conn.execute(
            "SELECT s.json FROM aliases a JOIN signatures s ON s.id = a.id WHERE a.alias = ?",
            (ident,),
        ).fetchone()
    return Signature.from_dict(json.loads(row[0])) if row else None


def _history_line(db: Path | None, sig_id: str) -> str:
    from triage.history import query
    from triage.history.schema import HistoryError, opened, resolve

    path = resolve(db)
    if not path.exists():
        return f"no history recorded yet ({path})"
    try:
        with opened(path, create=False) as hconn:
            all_time = query.signature_stats(hconn, signatures=[sig_id])
            recent = query.seen_summary(path, [sig_id], 30)
            prec = query.precision(hconn).get(sig_id)
    except HistoryError as exc:
        return f"history unavailable: {exc}"
    if not all_time:
        line = "never fired in the recorded history"
    else:
        st = all_time[0]
        line = (
            f"fired in {st.runs} run(s), first {query.when(st.first_ts)}, last "
            f"{query.when(st.last_ts)} UTC on {len(st.hosts)} host(s)"
        )
        if sig_id in recent:
            line += f"; {recent[sig_id]}"
    if prec and prec.value is not None:
        line += (
            f"; feedback: {prec.confirmed} confirmed, {prec.wrong} wrong "
            f"({prec.value:.0%} precision)"
        )
    return line


def render_signature(sig: Signature, fired: str) -> list[str]:
    out = [
        f"{sig.id}: {sig.title}",
        f"  layer {sig.layer} · kind {sig.kind} · severity {sig.severity} · status {sig.status} "
        f"· priority {sig.priority}",
    ]
    if sig.aliases:
        out.append(f"  aliases: {', '.join(sig.aliases)}")
    out += ["", *_wrap(sig.summary, "  ")]
    if sig.details:
        out += ["", *_wrap(sig.details, "  ")]
    out += ["", "patterns:"]
    out += [f"  {p.role:<10} {p.regex}" for p in sig.match] or ["  (none: a knowledge entry)"]
    out += [f"  {'not':<10} {p.regex}" for p in sig.not_]
    if sig.explains or sig.related:
        out += [
            "",
            f"explains: {', '.join(sig.explains) or '-'}   "
            f"related: {', '.join(sig.related) or '-'}",
        ]
    if sig.applies_to.versions or sig.applies_to.gpu_arch:
        ranges = [
            f"{name} [{r.introduced or '0'}, {r.fixed or r.last_affected or '∞'})"
            for name, r in sig.applies_to.versions.items()
        ]
        out += ["", "applies to: " + ", ".join(ranges + sig.applies_to.gpu_arch)]
    if sig.differential:
        out += ["", "differential checks:"]
        for d in sig.differential:
            out += _wrap(f"{d.branch}: {d.check}", "  - ", "    ")
            if d.ask:
                out.append(f"    ask: {d.ask}")
    if sig.fixes:
        out += ["", "fixes (in order):"]
        for i, f in enumerate(sig.fixes, 1):
            out += _wrap(f"[{f.confidence}] {f.do}", f"  {i}. ", "     ")
            for label, value in (("when", f.when), ("branch", f.branch), ("caveat", f.caveat)):
                if value:
                    out += _wrap(f"{label}: {value}", "     ", "     ")
    if sig.verify:
        out += ["", "verify:"] + [f"  - {v}" for v in sig.verify]
    refs = list(dict.fromkeys([*sig.references, *sig.provenance.urls]))
    if refs:
        out += ["", "references:"] + [f"  {r}" for r in refs]
    if sig.examples.match:
        out += ["", "examples:"] + [f"  {neutralise(x)}" for x in sig.examples.match]
    out += ["", f"fired: {fired}"]
    return out


def _wrap(text: str, first: str, rest: str | None = None, width: int = 100) -> list[str]:
    import textwrap

    return textwrap.wrap(
        " ".join(text.split()),
        width=width,
        initial_indent=first,
        subsequent_indent=rest if rest is not None else first,
    ) or [first.rstrip()]


@show_app.command()
def show(
    signature: Annotated[str, typer.Argument(help="Signature id or alias")],
    signatures: SignaturesOption = None,
    kb: KbOption = None,
    db: DbOption = None,
    format: FormatOption = Output.text,
) -> None:
    """Render one signature, with how often it fired in the history.

    Example: `triage kb show kv-cache-no-memory`.
    """
    conn = open_kb(signatures, kb)
    with contextlib.closing(conn):
        sig = _find(conn, signature)
        if sig is None:
            from rapidfuzz import process

            ids = [r[0] for r in conn.execute("SELECT id FROM signatures")]
            close = [c for c, _, _ in process.extract(signature, ids, limit=3, score_cutoff=60)]
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise _fail(f"no signature {signature!r}{hint} (try `triage kb search WORDS`)")
    fired = _history_line(db, sig.id)
    if format is Output.json:
        sys.stdout.write(
            json.dumps(
                {**sig.to_dict(), "fired": fired},
                indent=2,
                ensure_ascii=False,
            )
            + "\n"
        )
        return
    for line in render_signature(sig, fired):
        typer.echo(line)


# -- kb stats ------------------------------------------------------------------------------------


def _counts(
    conn: sqlite3.Connection, column: str, table: str = "signatures"
) -> list[tuple[str, int]]:
    allowed = {
        ("signatures", "layer"),
        ("signatures", "status"),
        ("signatures", "severity"),
        ("signatures", "kind"),
        ("fixes", "confidence"),
    }
    if (table, column) not in allowed:
        raise ValueError(column)
    return [
        (str(a), int(b))
        for a, b in conn.execute(
            f"SELECT {column}, count(*) FROM {table} GROUP BY 1 ORDER BY 2 DESC, 1"
        )
    ]


@stats_app.command()
def stats(
    signatures: SignaturesOption = None,
    kb: KbOption = None,
    db: DbOption = None,
    format: FormatOption = Output.text,
) -> None:
    """Counts by layer, status, severity, fix confidence; signatures that never fired; precision."""
    from triage.history import query
    from triage.history.schema import HistoryError, opened, resolve

    conn = open_kb(signatures, kb)
    with contextlib.closing(conn):
        groups = {
            name: _counts(conn, col, table)
            for name, col, table in (
                ("layer", "layer", "signatures"),
                ("kind", "kind", "signatures"),
                ("status", "status", "signatures"),
                ("severity", "severity", "signatures"),
                ("fix confidence", "confidence", "fixes"),
            )
        }
        ids = [
            (r[0], r[1]) for r in conn.execute("SELECT id, kind FROM signatures ORDER BY layer, id")
        ]
    total = len(ids)
    path = resolve(db)
    fired: dict[str, tuple[int, float]] | None = None
    prec: dict[str, query.Precision] = {}
    note = ""
    try:
        fired = query.fired_counts(path)
        if fired is not None:
            with opened(path, create=False) as hconn:
                prec = query.precision(hconn)
    except HistoryError as exc:
        note = f"history unavailable: {exc}"
    never = [i for i, kind in ids if kind != "knowledge" and fired is not None and i not in fired]
    if format is Output.json:
        sys.stdout.write(
            json.dumps(
                {
                    "signatures": total,
                    **{k.replace(" ", "_"): dict(v) for k, v in groups.items()},
                    "history": str(path) if fired is not None else None,
                    "never_fired": never if fired is not None else None,
                    "precision": {
                        s: {
                            "confirmed": p.confirmed,
                            "wrong": p.wrong,
                            "missed": p.missed,
                            "precision": p.value,
                        }
                        for s, p in sorted(prec.items())
                    },
                },
                indent=2,
            )
            + "\n"
        )
        return
    typer.echo(f"{total} signatures")
    for name, data in groups.items():
        typer.echo(f"  {name + ':':<16}" + ", ".join(f"{k} {v}" for k, v in data))
    typer.echo("")
    if note:
        typer.echo(note)
    elif fired is None:
        typer.echo(f"no history at {path}: fire counts and precision need recorded runs")
    else:
        top = sorted(fired.items(), key=lambda kv: -kv[1][0])[:10]
        typer.echo(
            f"history {path}: {len(fired)} signature(s) fired; most often: "
            + (", ".join(f"{s} ({n})" for s, (n, _) in top) or "-")
        )
        typer.echo(
            f"never fired ({len(never)} of {sum(1 for _, k in ids if k != 'knowledge')} "
            "with patterns):"
        )
        for line in _columns(never):
            typer.echo("  " + line)
        if prec:
            typer.echo(
                "\nprecision from feedback (confirmed / judged where it fired; misses apart):"
            )
            for s, p in sorted(prec.items(), key=lambda kv: (kv[1].value or 0, kv[0])):
                share = f"{p.value:.0%}" if p.value is not None else "-"
                missed = f"  missed {p.missed}" if p.missed else ""
                typer.echo(f"  {s:<44} {p.confirmed}/{p.confirmed + p.wrong}  {share}{missed}")
        else:
            typer.echo("\nno feedback yet (`triage feedback RUN --confirm|--wrong SIGNATURE`)")


def _columns(items: Sequence[str], width: int = 108) -> list[str]:
    if not items:
        return ["-"]
    col = max(len(i) for i in items) + 2
    per = max(1, width // col)
    return [
        "".join(i.ljust(col) for i in items[k : k + per]).rstrip()
        for k in range(0, len(items), per)
    ]
