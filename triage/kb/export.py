"""Export the knowledge base's patterns for outside scanners (grep -E -f, rg -f): the baselines of
the benchmark. Named groups are dropped (rg rejects repeated names, ERE has none)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from triage.kb.records import Signature

_NAMED = re.compile(r"\(\?P<[A-Za-z_]\w*>")
_NONCAPTURE = re.compile(r"\(\?:")


# Escapes the Rust regex crate (ripgrep 13) rejects: a backslash before a character that is
# neither a metacharacter nor a class/escape letter (Python accepts `\'`, `\"`, `\ `, ...).
_RUST_META = set("\\.+*?()|[]{}^$#&-~")
_LAZY = re.compile(r"([*+?}])\?")


def to_rust(pattern: str) -> str:
    """Pattern for `rg --no-unicode -f` (Rust regex syntax, bytes).

    With Unicode off, ripgrep rejects a literal non-ASCII character ("Unicode not allowed
    here"), so each is written as the escapes of its UTF-8 bytes, which match the same text."""
    return "".join(
        ch if ord(ch) < 0x80 else "".join(f"\\x{b:02X}" for b in ch.encode())
        for ch in _rust_syntax(pattern)
    )


def _rust_syntax(pattern: str) -> str:
    """Python escapes the Rust regex crate rejects, rewritten; characters kept as they are."""
    p = _NAMED.sub("(?:", pattern)
    out = []
    i = 0
    while i < len(p):
        ch = p[i]
        if ch == "\\" and i + 1 < len(p):
            nxt = p[i + 1]
            out.append(nxt if not (nxt.isalnum() or nxt in _RUST_META) else ch + nxt)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def to_ere(pattern: str) -> str:
    """POSIX ERE for GNU grep -E: groups become plain groups, \\d and \\s become classes.

    Inline flags and lazy quantifiers have no ERE form: they are dropped (grep then matches a
    superset or, for the two case-insensitive patterns, a subset)."""
    p = _NONCAPTURE.sub("(", _NAMED.sub("(", _rust_syntax(pattern)))
    p = p.replace("(?i)", "")
    p = _LAZY.sub(r"\1", p)
    p = p.replace(r"\d", "[0-9]").replace(r"\s", "[[:space:]]").replace(r"\S", "[^[:space:]]")
    return p.replace(r"\w", "[[:alnum:]_]")


def export_patterns(signatures: Iterable[Signature], dialect: str = "rust") -> Iterator[str]:
    """Every pattern triage scans for: signatures (match and differential evidence), facts and
    salient lines; so a grep/rg baseline does the same search."""
    from triage.events import SALIENT_PATTERNS
    from triage.facts import FACT_PATTERNS

    patterns: list[str] = []
    for sig in signatures:
        patterns += [p.regex for p in sig.match]
        patterns += [ev for d in sig.differential for ev in d.evidence]
    patterns += [regex for _, regex in FACT_PATTERNS]
    patterns += [regex for _, regex in SALIENT_PATTERNS]
    for pattern in patterns:
        yield to_ere(pattern) if dialect == "ere" else to_rust(pattern)
