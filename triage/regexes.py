"""Compile signature regexes for confirmation on candidate lines: RE2 first (linear time), `regex`
with a timeout where RE2 is unavailable or rejects the pattern.

This is the only place that decides which backtracking-free engine confirms a line.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

try:  # google-re2: linear-time, no backtracking
    import re2 as _re2

    _RE2_OPTIONS: Any = _re2.Options()
    _RE2_OPTIONS.max_mem = 64 << 20
    _RE2_OPTIONS.log_errors = False
except ImportError:  # pragma: no cover - exercised on hosts without the wheel
    _re2 = None

CONFIRM_TIMEOUT_S = 0.5


@dataclass(frozen=True, slots=True)
class Found:
    """A linear-time regex match: its span and groups."""

    start: int
    end: int
    captures: dict[str, str]


class LinearRegex:
    """A pattern that searches in linear time when RE2 accepts it, else under a timeout."""

    __slots__ = ("_fallback", "_re2", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._re2: Any = None
        self._fallback: Any = None
        if _re2 is not None:
            try:
                self._re2 = _re2.compile(pattern, _RE2_OPTIONS)
            except Exception:  # RE2 rejects some constructs: fall back to `regex` + timeout
                self._re2 = None
        if self._re2 is None:
            import regex  # imported only when needed: it costs start-up time

            self._fallback = regex.compile(pattern, regex.V0)  # raises regex.error on bad syntax

    def search(self, text: str) -> Found | None:
        """First match in text, or None; a timed-out backtracking search raises TimeoutError."""
        if self._re2 is not None:
            m = self._re2.search(text)
        else:
            m = self._fallback.search(text, timeout=CONFIRM_TIMEOUT_S)
        if m is None:
            return None
        groups = {k: v for k, v in m.groupdict().items() if v is not None}
        return Found(m.start(), m.end(), groups)

    @property
    def linear(self) -> bool:
        return self._re2 is not None


@lru_cache(maxsize=8192)
def compile_linear(pattern: str) -> LinearRegex:
    return LinearRegex(pattern)
