"""Where signature files live, their digest, and load errors: what a run needs to find a current
compiled knowledge base without importing the YAML parser or the pydantic schema."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from triage.kb.records import LAYERS


@dataclass
class LoadError:
    path: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: {self.field}" if self.field else self.path
        return f"{where}: {self.message}"


def default_signature_dir() -> Path:
    """The knowledge base shipped with the package (repo checkout or installed data)."""
    here = Path(__file__).resolve().parent.parent.parent / "signatures"
    if here.is_dir():
        return here
    installed = Path(__file__).resolve().parent.parent / "data" / "signatures"
    return installed


def signature_files(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*/*.yaml") if p.parent.name in LAYERS)


def content_hash(root: Path) -> str:
    """A digest of every signature file's name and bytes: the cache key of compiled artefacts."""
    digest = hashlib.sha256()
    for path in signature_files(root):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()
