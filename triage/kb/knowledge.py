"""The knowledge base a run reads: the signature records, where they came from, and their digest.

It lives below the engine facade (`triage.api` re-exports it) so that the compiled store
(`triage.kb.store`) can return one without importing the facade that imports the store.

Loaded from the compiled store, it is lazy: every signature's scan part (`SignatureCore`: id,
status, patterns) is decoded at start-up, a whole record only when something asks for it by id
(the ranking of the signatures that fired) or asks for all of them (`signatures`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeAlias

from triage.kb.records import Signature, SignatureCore

PatternSource: TypeAlias = Signature | SignatureCore


class LazyRecords(Mapping[str, Signature]):
    """Signature records by id, each decoded from its stored JSON on first access. `rows` are
    the JSON texts in knowledge-base order, or a function that reads one by id (the store reads
    a record only when it is asked for: reading all of them was most of a start-up's load)."""

    def __init__(self, ids: Sequence[str], rows: Sequence[str] | Callable[[str], str]) -> None:
        self._position = {ident: n for n, ident in enumerate(ids)}
        self._ids = list(ids)
        if callable(rows):
            self._read = rows
        else:
            texts = list(rows)
            self._read = lambda ident: texts[self._position[ident]]
        self._decoded: dict[str, Signature] = {}

    def __getitem__(self, ident: str) -> Signature:
        record = self._decoded.get(ident)
        if record is None:
            if ident not in self._position:
                raise KeyError(ident)
            record = Signature.from_dict(json.loads(self._read(ident)))
            self._decoded[ident] = record
        return record

    def __contains__(self, ident: object) -> bool:
        return ident in self._position

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def decoded(self) -> int:
        """How many records have been decoded so far."""
        return len(self._decoded)


class KnowledgeBase:
    """The signatures of one knowledge base: eager (a list of records) or lazy (`from_store`)."""

    def __init__(
        self, signatures: Sequence[Signature] = (), source: str = "yaml", digest: str = ""
    ) -> None:
        self.source = source
        self.digest = digest
        self._signatures: list[Signature] | None = list(signatures)
        self._by_id: Mapping[str, Signature] = {s.id: s for s in self._signatures}
        self._cores: Sequence[PatternSource] = self._signatures

    @classmethod
    def from_store(
        cls,
        cores: Sequence[SignatureCore],
        rows: Sequence[str] | Callable[[str], str],
        source: str,
        digest: str,
    ) -> KnowledgeBase:
        """Lazy: `cores` decoded, `rows` (each signature's JSON, in the same order, or a function
        that reads it by id) decoded on demand."""
        kb = cls((), source, digest)
        kb._signatures = None
        kb._by_id = LazyRecords([c.id for c in cores], rows)
        kb._cores = list(cores)
        return kb

    @property
    def signatures(self) -> list[Signature]:
        """Every record, in knowledge-base order (decodes them all when lazy)."""
        if self._signatures is None:
            self._signatures = [self._by_id[c.id] for c in self._cores]
        return self._signatures

    @property
    def by_id(self) -> Mapping[str, Signature]:
        return self._by_id

    @property
    def pattern_sources(self) -> Sequence[PatternSource]:
        """What the pattern table is built from: each signature's id, status and patterns."""
        return self._cores
