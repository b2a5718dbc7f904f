"""Open the message catalog (a read-only SQLite file built by scripts/build_message_catalog.py).

Nothing is read until a line needs locating: a healthy run never opens the file. Candidates are
found through the index on each template's anchor word, so only the few templates that share a
line's longest words are ever loaded.
"""

from __future__ import annotations

import os
import re
import sqlite3
import zlib
from dataclasses import dataclass
from pathlib import Path

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "catalog.sqlite"
WILDCARD = "<*>"
_WORD_RE = re.compile(r"[A-Za-z0-9_]+")
_MAX_PARAMS = 400


@dataclass(frozen=True, slots=True)
class ProjectInfo:
    name: str
    repo: str  # https://github.com/owner/name
    tag: str  # release -> tag, e.g. "v{release}" (Slurm's "slurm-{release_dashed}-1": 24-11-5)
    repo_prefix: str
    releases: tuple[str, ...]  # catalogued releases, oldest first (bit i of Site.releases)

    def url(self, release: str, path: str, line: int) -> str:
        tag = self.tag.format(release=release, release_dashed=release.replace(".", "-"))
        return f"{self.repo}/blob/{tag}/{path}#L{line}"


@dataclass(frozen=True, slots=True)
class Site:
    """One place that prints a template: project, file, function, call kind, in which releases."""

    template: str
    literal: int  # characters of literal text in the template
    project: str
    file: str
    function: str
    kind: str
    releases: int  # bit mask over ProjectInfo.releases
    # the line in each release of the mask, in order, as stored ("12,40"): parsed only for the
    # few sites that win (a lookup loads thousands of candidates)
    lines: str

    def release_lines(self, info: ProjectInfo) -> list[tuple[str, int]]:
        out = []
        lines = (int(x) for x in self.lines.split(",") if x)
        for i, rel in enumerate(info.releases):
            if self.releases >> i & 1:
                out.append((rel, next(lines, 0)))
        return out


def catalog_path() -> Path:
    """The catalog file: $TRIAGE_CATALOG when set (tests, a local rebuild), else the shipped one."""
    override = os.environ.get("TRIAGE_CATALOG")
    return Path(override) if override else DATA_FILE


class CatalogStore:
    """Read access to one catalog file (opened read-only, immutable: no journal, no locks)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        self._functions_column: bool | None = None
        self.projects = {
            name: ProjectInfo(name, repo, tag, prefix, tuple(r for r in rels.split(",") if r))
            for name, repo, tag, prefix, rels in self.conn.execute(
                "SELECT name, repo, tag, repo_prefix, releases FROM project"
            )
        }

    @property
    def _has_functions(self) -> bool:
        """Format 3 and later: the file table holds each file's functions."""
        if self._functions_column is None:
            columns = {row[1] for row in self.conn.execute("PRAGMA table_info(file)")}
            self._functions_column = "functions" in columns
        return self._functions_column

    def meta(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT key, value FROM meta"))

    def count_templates(self) -> int:
        (n,) = self.conn.execute("SELECT count(*) FROM message").fetchone()
        return int(n)

    def candidates(self, text: str, min_literal: int = 0) -> list[Site]:
        """Every site whose template's anchor word is a word of this text (and whose template has
        at least `min_literal` literal characters: shorter ones never match, so never load them)."""
        words = sorted({w for w in _WORD_RE.findall(text) if len(w) >= 3})
        out: list[Site] = []
        for i in range(0, len(words), _MAX_PARAMS):
            chunk = words[i : i + _MAX_PARAMS]
            marks = ",".join("?" * len(chunk))
            out.extend(
                self._sites(f"m.anchor IN ({marks}) AND m.literal >= {int(min_literal)}", chunk)
            )
        return out

    def sites_in(self, project: str, function: str) -> list[Site]:
        """Every template one function of one project prints (its rewordings across releases)."""
        return self._sites("s.project = ? AND s.function = ?", [project, function])

    def sites_of(self, project: str) -> list[Site]:
        """Every site of one project (the applies_to derivation scans them all with a pattern)."""
        return self._sites("s.project = ?", [project])

    def file_releases(self, project: str, file: str) -> int:
        """The release mask of one catalogued source file (0: not in the file table, which holds
        the Python files)."""
        row = self.conn.execute(
            "SELECT releases FROM file WHERE project = ? AND file = ?", (project, file)
        ).fetchone()
        return int(row[0]) if row else 0

    def files_ending(self, suffixes: list[str]) -> tuple[str, str, int] | None:
        """(project, file, release mask) of the longest catalogued path among these suffixes of a
        path (a repository path may have a prefix the installed one lacks: SGLang's python/)."""
        # CPython's Lib/ (a frame in /usr/lib/python3.12/json/...), the src/ layout (transformers,
        # accelerate, openai, ...), and each project's repository prefix with and without src/
        # (SGLang's python/, gguf's gguf-py/, AutoGen's python/packages/<package>/src/)
        prefixes = {"", "Lib/", "src/"}
        for info in self.projects.values():
            if info.repo_prefix:
                prefixes.update((info.repo_prefix, info.repo_prefix + "src/"))
        names = sorted({p + s for s in suffixes if "/" in s for p in prefixes})[:_MAX_PARAMS]
        if not names:
            return None
        marks = ",".join("?" * len(names))
        rows = self.conn.execute(
            f"SELECT project, file, releases FROM file WHERE file IN ({marks}) "
            "ORDER BY length(file) DESC, project, file",
            names,
        ).fetchall()
        return (str(rows[0][0]), str(rows[0][1]), int(rows[0][2])) if rows else None

    def functions_of(self, project: str, file: str) -> dict[str, int] | None:
        """{function: release mask} of the functions one catalogued Python file defines (-1: in
        every release that ships the file); None when the catalog has no function index."""
        if not self._has_functions:
            return None
        row = self.conn.execute(
            "SELECT functions FROM file WHERE project = ? AND file = ?", (project, file)
        ).fetchone()
        if row is None:
            return None
        out: dict[str, int] = {}
        for entry in zlib.decompress(row[0]).decode().split("\n"):
            if entry:
                name, _, mask = entry.partition("\t")
                out[name] = int(mask) if mask else -1
        return out

    def _sites(self, where: str, params: list[str]) -> list[Site]:
        rows = self.conn.execute(
            "SELECT m.template, m.literal, s.project, p.file, s.function, s.kind, s.releases, "
            "s.lines FROM message m JOIN site s ON s.message = m.id JOIN path p ON p.id = s.path "
            f"WHERE {where} ORDER BY m.id, s.project, p.file, s.function, s.kind",
            params,
        )
        return [Site(t, lit, p, f, fn, k, mask, lines) for t, lit, p, f, fn, k, mask, lines in rows]

    def close(self) -> None:
        self.conn.close()


_OPEN: dict[Path, CatalogStore | None] = {}


def open_store(path: Path | None = None) -> CatalogStore | None:
    """The catalog, opened once per process; None when the file is missing or unreadable."""
    path = path or catalog_path()
    if path not in _OPEN:
        try:
            _OPEN[path] = CatalogStore(path) if path.is_file() else None
        except sqlite3.Error:
            _OPEN[path] = None
    return _OPEN[path]
