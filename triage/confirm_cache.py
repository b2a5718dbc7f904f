"""Confirm a repeated candidate line once: the exact-pattern search memoised per masked line.

A failing node repeats the same NCCL warning or Xid on every rank thousands of times, differing
only in numbers (timestamps, ranks, PIDs, counters). Confirming each copy with RE2 was most of a
run's time on such logs (docs/performance.md). Here every run of ASCII digits in a line is masked
to one `0`, and a pattern's result on a line is reused for every line with the same masked text,
but only for *digit-blind* patterns, where reuse is provably exact:

A pattern is digit-blind when none of its atoms can match an ASCII digit and it cannot match the
empty string. A match of such a pattern consumes non-digit characters only, so it lies inside one
digit-free stretch of the line, and masking leaves every digit-free stretch intact with a digit on
each side where there was one (word boundaries, anchors and lookarounds see the same neighbours).
Matches on the line and on its masked text are then the same substrings, found in the same
leftmost-first order: whether it matches and what it captures are equal for every line that masks
alike. Patterns that mention digits (`Xid \\d+`, `rank (?P<rank>\\d+)`, `.`) are memoised by
the exact line only. Which patterns are blind is read off Python's own parse of the pattern;
anything it cannot parse, or any construct not listed below, counts as not blind.

`TRIAGE_NO_CONFIRM_CACHE=1` turns the memo off (the test that reports are identical either way).
"""

from __future__ import annotations

import importlib
import os
import re
from functools import lru_cache
from typing import Any

from triage.regexes import LinearRegex
from triage.textutil import strip_ansi
from triage.usertext import elide_user_text

_DIGIT_RUN = re.compile(r"[0-9]+")
_ASCII_DIGITS = frozenset(range(ord("0"), ord("9") + 1))
_ASCII_DIGITS_TEXT = frozenset("0123456789")
_METACHARS = frozenset("\\.[](){}*+?|^$")
# Lines longer than this are searched directly: a long line rarely repeats, and its key would cost
# memory in proportion to its length.
MAX_CACHED_LINE = 2048
# Entries kept before the memo starts again: bounded memory on logs that never repeat (at most
# MAX_ENTRIES distinct lines of MAX_CACHED_LINE characters, 32 MiB; a few MiB on real lines).
MAX_ENTRIES = 1 << 14
# Compiled patterns a run keeps for confirming, the least recently used dropped first. Each RE2
# object grows its DFA state cache (and a reverse program) as it searches: about 40 KB a pattern,
# 80 MB for the 2,000 patterns the real-log benchmark confirms, most of them once or twice
# (docs/performance.md, ninth session). The hot ones stay compiled; one dropped and needed again
# is compiled again (about 0.4% of the candidate searches on that benchmark).
MAX_COMPILED = 1024


def confirm_text(raw: str) -> str:
    """What patterns are confirmed against: ANSI stripped, logged user text elided (the same
    text `frame.frame_line` keeps as `Line.text`)."""
    return elide_user_text(strip_ansi(raw))


@lru_cache(maxsize=8192)
def digit_blind(regex: str) -> bool:
    """True when the pattern provably finds the same matches in a line and in its masked text."""
    if not _METACHARS.intersection(regex):  # a plain literal, most evidence patterns
        return bool(regex) and _ASCII_DIGITS_TEXT.isdisjoint(regex)
    if "[:" in regex or "\\p" in regex or "\\P" in regex or "{," in regex:
        # POSIX and Unicode classes, and `x{,3}` (a repeat to Python, literal text to RE2): syntax
        # Python's parser reads differently from the engine that confirms
        return False
    try:
        # the parser of `re` itself: its tree, not a re-implementation
        parsed: Any = importlib.import_module("re._parser").parse(regex)
        if parsed.getwidth()[0] < 1:
            return False
        return _blind(parsed)
    except Exception:
        return False


@lru_cache(maxsize=1)
def _sre_constants() -> Any:
    return importlib.import_module("re._constants")


def _blind(items: Any) -> bool:
    c = _sre_constants()
    for op, av in items:
        if op is c.LITERAL:
            if av in _ASCII_DIGITS:
                return False
        elif op is c.IN:
            if _set_matches_digit(av):
                return False
        elif op is c.ANY:
            return False
        elif op is c.AT or op is c.GROUPREF:
            continue  # anchors see the same neighbours; a group's text is digit-free
        elif op is c.BRANCH:
            if not all(_blind(branch) for branch in av[1]):
                return False
        elif op is c.SUBPATTERN:
            if not _blind(av[3]):
                return False
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            if not _blind(av[2]):
                return False
        elif op in (c.ASSERT, c.ASSERT_NOT):
            if not _blind(av[1]):
                return False
        elif op is c.ATOMIC_GROUP:
            if not _blind(av):
                return False
        else:
            return False  # NOT_LITERAL, GROUPREF_EXISTS, anything new: assume it sees digits
    return True


def _set_matches_digit(members: Any) -> bool:
    """Whether a character class `[...]` can match some ASCII digit."""
    c = _sre_constants()
    covered: set[int] = set()
    negated = False
    for op, av in members:
        if op is c.NEGATE:
            negated = True
        elif op is c.LITERAL:
            covered.add(av)
        elif op is c.RANGE:
            covered.update(range(av[0], av[1] + 1))
        elif op is c.CATEGORY:
            if av in (c.CATEGORY_DIGIT, c.CATEGORY_WORD, c.CATEGORY_NOT_SPACE):
                covered.update(_ASCII_DIGITS)
            elif av not in (c.CATEGORY_NOT_DIGIT, c.CATEGORY_SPACE, c.CATEGORY_NOT_WORD):
                return True
        else:
            return True
    digits = covered & _ASCII_DIGITS
    return digits != _ASCII_DIGITS if negated else bool(digits)


class ConfirmCache:
    """The exact-pattern search of one run, memoised per (pattern, masked line) where exact."""

    def __init__(self, enabled: bool | None = None) -> None:
        if enabled is None:
            enabled = os.environ.get("TRIAGE_NO_CONFIRM_CACHE", "") in ("", "0")
        self.enabled = enabled
        self._memo: dict[tuple[str, str, bool], dict[str, str] | None] = {}
        self._text = ""
        self._masked = ""
        self.searches = 0  # RE2 (or `regex`) searches actually run
        self.reused = 0  # results taken from the memo

    def clear(self) -> None:
        """Forget every remembered result (the counters stay)."""
        self._memo.clear()
        self._text = self._masked = ""

    def captures(self, regex: str, text: str) -> dict[str, str] | None:
        """The named groups of the pattern's first match in text, or None when it does not
        match; a timed-out backtracking search raises TimeoutError (never memoised)."""
        if not self.enabled or len(text) > MAX_CACHED_LINE:
            return self._search(regex, text)
        if text is not self._text:  # every pattern of one line shares its mask
            self._text = text
            self._masked = _DIGIT_RUN.sub("0", text)
        # a pattern that can see digits is reused only on the very same line
        blind = digit_blind(regex)
        key = (regex, self._masked if blind else text, blind)
        memo = self._memo
        if key in memo:
            self.reused += 1
            return memo[key]
        found = self._search(regex, text)
        if len(memo) >= MAX_ENTRIES:
            memo.clear()
        memo[key] = found
        return found

    def _search(self, regex: str, text: str) -> dict[str, str] | None:
        self.searches += 1
        found = _confirmer(regex).search(text)
        return None if found is None else found.captures


@lru_cache(maxsize=MAX_COMPILED)
def _confirmer(regex: str) -> LinearRegex:
    """The run's compiled pattern (bounded, unlike `regexes.compile_linear`, which `kb lint` and
    rank share and which keeps every pattern it compiled)."""
    return LinearRegex(regex)
