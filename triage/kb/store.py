"""Load the knowledge base for the engine.

YAML under `signatures/` is the source of truth; `load_current` returns the valid signatures and
remembers the errors of invalid files (reported by `triage kb lint`, never fatal to a triage run).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from triage.kb.load import content_hash, default_signature_dir, load_signatures

if TYPE_CHECKING:
    from triage.api import KnowledgeBase


def load_current(root: Path | None = None) -> KnowledgeBase:
    from triage.api import KnowledgeBase

    root = root or default_signature_dir()
    result = load_signatures(root)
    return KnowledgeBase(result.signatures, source="yaml", digest=content_hash(root))
