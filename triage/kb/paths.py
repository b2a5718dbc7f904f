"""Where signature files live, their digest, and load errors: what a run needs to find a current
compiled knowledge base without importing the YAML parser or the pydantic schema."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from triage.kb.records import LAYERS


@dataclass
class LoadError:
    """A signature file that failed to load, and why."""

    path: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: {self.field}" if self.field else self.path
        return f"{where}: {self.message}"


class KnowledgeBaseMissing(Exception):
    """The signature directory is missing or holds no signature: nothing could be diagnosed.

    Every command that needs the knowledge base stops on it with exit 2 and this one line, so an
    install without its knowledge (or a `--signatures` typo) is never a silent all-clear."""


def default_signature_dir() -> Path:
    """The knowledge base shipped with the package (`$TRIAGE_SIGNATURES` wins).

    A built wheel carries it as package data (`triage/data/signatures/`, copied by setup.py); a
    source checkout or an editable install reads the checkout's `signatures/` (the package's parent
    directory must be the project itself, so a stray `site-packages/signatures` is never taken).
    """
    explicit = os.environ.get("TRIAGE_SIGNATURES")
    if explicit:
        return Path(explicit)
    package = Path(__file__).resolve().parent.parent
    installed = package / "data" / "signatures"
    if installed.is_dir():
        return installed
    checkout = package.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "signatures").is_dir():
        return checkout / "signatures"
    return installed


def require_signature_dir(root: Path | None = None) -> Path:
    """root (default: the shipped knowledge base) when it holds signatures, else raise
    KnowledgeBaseMissing."""
    root = root or default_signature_dir()
    if not root.is_dir():
        raise KnowledgeBaseMissing(
            f"{root}: no signature directory (the knowledge base is missing)"
        )
    if not any(_layer_entries(root)):
        raise KnowledgeBaseMissing(
            f"{root}: no signature files (expected <layer>/<id>.yaml under node/, harness/, "
            "engine/, model/)"
        )
    return root


def signature_files(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*/*.yaml") if p.parent.name in LAYERS)


def _layer_entries(root: Path) -> list[os.DirEntry[str]]:
    """The signature files as directory entries, in `signature_files` order (what a run's cache
    check walks: `os.scandir` costs a fraction of `Path.glob` and the `Path` objects)."""
    entries: list[os.DirEntry[str]] = []
    for layer in sorted(LAYERS):
        try:
            with os.scandir(root / layer) as it:
                found = [e for e in it if e.name.endswith(".yaml") and e.is_file()]
        except (FileNotFoundError, NotADirectoryError):
            continue
        entries += sorted(found, key=lambda e: e.name)
    return entries


def stat_key(root: Path) -> str:
    """A cheap digest of every signature file's name, size, inode and mtime.

    When it matches the one stored at build time the content hash is not recomputed (no file is
    read); when it differs the content hash decides, so a `touch` or a checkout never forces a
    rebuild on its own.
    """
    digest = hashlib.sha256()
    for entry in _layer_entries(root):
        st = entry.stat()
        layer = os.path.basename(os.path.dirname(entry.path))
        digest.update(
            f"{layer}/{entry.name}\0{st.st_size}\0{st.st_ino}\0{st.st_mtime_ns}\0".encode(
                "utf-8", "surrogateescape"
            )
        )
    return digest.hexdigest()


def content_hash(root: Path) -> str:
    """A digest of every signature file's name and bytes: the cache key of compiled artefacts."""
    digest = hashlib.sha256()
    for path in signature_files(root):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()
