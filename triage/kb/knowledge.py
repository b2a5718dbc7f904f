"""The knowledge base a run reads: the signature records, where they came from, and their digest.

It lives below the engine facade (`triage.api` re-exports it) so that the compiled store
(`triage.kb.store`) can return one without importing the facade that imports the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from triage.kb.records import Signature


@dataclass
class KnowledgeBase:
    signatures: list[Signature]
    source: str = "yaml"
    digest: str = ""
    by_id: dict[str, Signature] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_id = {s.id: s for s in self.signatures}
