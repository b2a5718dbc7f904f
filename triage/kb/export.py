"""Export the knowledge base's patterns for outside scanners (grep -E -f, rg -f): the baselines of
the benchmark. Named groups are dropped (rg rejects repeated names, ERE has none)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from triage.kb.schema import Signature

_NAMED = re.compile(r"\(\?P<[A-Za-z_]\w*>")
_NONCAPTURE = re.compile(r"\(\?:")


def to_ere(pattern: str) -> str:
    """POSIX ERE for GNU grep -E: groups become plain groups, \\d and \\s become classes."""
    p = _NONCAPTURE.sub("(", _NAMED.sub("(", pattern))
    p = p.replace(r"\d", "[0-9]").replace(r"\s", "[[:space:]]").replace(r"\S", "[^[:space:]]")
    return p.replace(r"\w", "[[:alnum:]_]")


def export_patterns(signatures: Iterable[Signature], dialect: str = "rust") -> Iterator[str]:
    for sig in signatures:
        for pattern in sig.match:
            p = _NAMED.sub("(?:", pattern.regex)
            yield to_ere(pattern.regex) if dialect == "ere" else p
