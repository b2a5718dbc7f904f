"""Static check for regex shapes that backtrack catastrophically (ReDoS).

Every signature is confirmed on RE2 when it is installed, so these shapes cost nothing there; they
matter where a backtracking engine runs the pattern (the `regex` fallback on hosts without RE2,
someone pasting a signature into grep -P or Python `re`). The check walks the parse tree of the
pattern and reports three shapes:

1. **Nested variable quantifiers**: a repeated group whose body contains another variable-length
   repeat, `(a+)+`, `(\\w+\\s?)*`, `((a+))+`, `(.*a){11}` (exponential). Exempt: a body that
   contains a mandatory character no inner repeat can match, which splits iterations in exactly one
   way, e.g. `(?:\\d+\\.)+` (the `.` ends every iteration).
2. **Overlapping alternation under a repeat**: `(a|aa)+`, `(\\w|\\d)*`, `(\\s|.)*` (exponential):
   two branches can start with the same character, or a branch can match the empty string. Exempt:
   branches that are all literal strings of one length, and the same separator rule as above.
3. **Adjacent overlapping gaps**: two unbounded repeats in one sequence whose characters overlap
   with nothing mandatory between them, `.*.*`, `\\s*\\s*`, `\\w+\\s*\\w+` (polynomial: quadratic
   per start position, cubic per search); and an unanchored leading unbounded gap (`.*X`), which
   never changes whether a line matches, only the cost.

The analysis uses the standard library's regex parser; a pattern it cannot parse (syntax only the
`regex` module knows, such as `\\p{L}`) is checked on its text alone, conservatively.
"""

from __future__ import annotations

import re
from re import _constants as _c  # type: ignore[attr-defined]
from re import _parser as _p  # type: ignore[attr-defined]
from typing import Any

__all__ = ["redos_issues"]

# Characters are modelled as code points 0..255 plus four markers for the classes of everything
# above 255 (letters, digits, spaces, other), so that \s and \d stay disjoint beyond Latin-1.
_HW, _HD, _HS, _HP = 256, 257, 258, 259
_HIGH = 256  # the first marker; every code point at or above it is mapped to one
_HIGH_ALL = frozenset({_HW, _HD, _HS, _HP})
_ALL: frozenset[int] = frozenset(range(256)) | _HIGH_ALL
_DIGIT = frozenset(range(ord("0"), ord("9") + 1)) | {_HD}
_SPACE = frozenset({9, 10, 11, 12, 13, 28, 29, 30, 31, 32, 133, 160}) | {_HS}
_WORD = (
    frozenset(range(ord("0"), ord("9") + 1))
    | frozenset(range(ord("a"), ord("z") + 1))
    | frozenset(range(ord("A"), ord("Z") + 1))
    | {ord("_"), 170, 181, 186}
    | (frozenset(range(192, 256)) - {215, 247})
    | {_HW, _HD}
)
_CATEGORIES: dict[Any, frozenset[int]] = {
    _c.CATEGORY_DIGIT: _DIGIT,
    _c.CATEGORY_NOT_DIGIT: _ALL - _DIGIT,
    _c.CATEGORY_SPACE: _SPACE,
    _c.CATEGORY_NOT_SPACE: _ALL - _SPACE,
    _c.CATEGORY_WORD: _WORD,
    _c.CATEGORY_NOT_WORD: _ALL - _WORD,
}
_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", _c.MAX_REPEAT)}
_ZERO_WIDTH = {_c.AT, _c.ASSERT, _c.ASSERT_NOT}
_MAXREPEAT: int = _c.MAXREPEAT
# A bounded repeat this large backtracks like an unbounded one.
_LARGE = 10

Item = tuple[Any, Any]


def _code(ch: int) -> int:
    if ch < _HIGH:
        return ch
    c = chr(ch)
    if c.isdigit():
        return _HD
    if c.isspace():
        return _HS
    return _HW if c.isalnum() or c == "_" else _HP


def _case(chars: set[int], ignore_case: bool) -> frozenset[int]:
    if not ignore_case:
        return frozenset(chars)
    out = set(chars)
    for ch in chars:
        if ch < _HIGH:
            out.add(_code(ord(chr(ch).swapcase()[0])))
    return frozenset(out)


def _class_chars(items: list[Item], ignore_case: bool) -> frozenset[int]:
    chars: set[int] = set()
    category_high: set[int] = set()  # markers a category covers entirely (safe to negate)
    negate = False
    for op, av in items:
        if op is _c.NEGATE:
            negate = True
        elif op is _c.LITERAL:
            chars.add(_code(av))
        elif op is _c.RANGE:
            lo, hi = av
            chars.update(range(min(lo, _HIGH), min(hi, _HIGH - 1) + 1))
            if hi >= _HIGH:
                chars.update(_HIGH_ALL)
        elif op is _c.CATEGORY:
            members = _CATEGORIES.get(av, _ALL)
            chars.update(members)
            category_high |= members & _HIGH_ALL
        else:  # unknown class member: assume anything
            chars.update(_ALL)
            category_high |= _HIGH_ALL
    result = _case(chars, ignore_case)
    if not negate:
        return result
    # a negated class still matches the other members of a high marker it only partly excludes
    return _ALL - (result - (_HIGH_ALL - category_high))


class _Analyzer:
    def __init__(self, flags: int) -> None:
        self.flags = flags
        self.issues: list[str] = []

    # -- character sets and lengths -------------------------------------------------------------

    def chars(self, seq: Any, ic: bool) -> frozenset[int]:
        out: set[int] = set()
        for item in seq:
            out |= self.item_chars(item, ic)
        return frozenset(out)

    def item_chars(self, item: Item, ic: bool) -> frozenset[int]:
        op, av = item
        if op is _c.LITERAL:
            return _case({_code(av)}, ic)
        if op is _c.NOT_LITERAL:
            return (_ALL - _case({_code(av)}, ic)) | _HIGH_ALL
        if op is _c.ANY:
            return _ALL if self.flags & re.DOTALL else _ALL - {10}
        if op is _c.IN:
            return _class_chars(av, ic)
        if op in _REPEATS:
            return self.chars(av[2], ic)
        if op is _c.SUBPATTERN:
            return self.chars(av[3], self._ic(av, ic))
        if op is _c.BRANCH:
            out: set[int] = set()
            for alt in av[1]:
                out |= self.chars(alt, ic)
            return frozenset(out)
        if op in _ZERO_WIDTH:
            return frozenset()
        if op is getattr(_c, "ATOMIC_GROUP", None):
            return self.chars(av, ic)
        return _ALL  # back-references, conditionals: anything

    def first_chars(self, seq: Any, ic: bool) -> frozenset[int]:
        """Characters the sequence can start with (approximate: a superset)."""
        out: set[int] = set()
        for item in seq:
            op, av = item
            if op in _ZERO_WIDTH:
                continue
            if op in _REPEATS:
                out |= self.first_chars(av[2], ic)
            elif op is _c.SUBPATTERN:
                out |= self.first_chars(av[3], self._ic(av, ic))
            elif op is _c.BRANCH:
                for alt in av[1]:
                    out |= self.first_chars(alt, ic)
            else:
                out |= self.item_chars(item, ic)
            if self.min_len_item(item) > 0:
                break
        return frozenset(out)

    def last_chars(self, seq: Any, ic: bool) -> frozenset[int]:
        """Characters the sequence can end with (approximate: a superset)."""
        out: set[int] = set()
        for item in reversed(list(seq)):
            op, av = item
            if op in _ZERO_WIDTH:
                continue
            if op in _REPEATS:
                out |= self.last_chars(av[2], ic)
            elif op is _c.SUBPATTERN:
                out |= self.last_chars(av[3], self._ic(av, ic))
            elif op is _c.BRANCH:
                for alt in av[1]:
                    out |= self.last_chars(alt, ic)
            else:
                out |= self.item_chars(item, ic)
            if self.min_len_item(item) > 0:
                break
        return frozenset(out)

    def min_len(self, seq: Any) -> int:
        return sum(self.min_len_item(item) for item in seq)

    def min_len_item(self, item: Item) -> int:
        op, av = item
        if op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
            return 1
        if op in _REPEATS:
            return int(av[0]) * self.min_len(av[2])
        if op is _c.SUBPATTERN:
            return self.min_len(av[3])
        if op is _c.BRANCH:
            return min(self.min_len(alt) for alt in av[1])
        if op is getattr(_c, "ATOMIC_GROUP", None):
            return self.min_len(av)
        return 0

    @staticmethod
    def _ic(av: Any, ic: bool) -> bool:
        add, remove = av[1], av[2]
        if add & re.IGNORECASE:
            return True
        if remove & re.IGNORECASE:
            return False
        return ic

    # -- the walk -------------------------------------------------------------------------------

    def walk(self, seq: Any, ic: bool, top: bool = False) -> None:
        items = list(seq)
        self._adjacent_gaps(items, ic)
        if top:
            self._leading_gap(items)
        for item in items:
            op, av = item
            if op in _REPEATS:
                _lo, hi, body = av
                if hi == _MAXREPEAT or hi >= _LARGE:
                    self._repeated_body(body, ic)
                self.walk(body, ic)
            elif op is _c.SUBPATTERN:
                self.walk(av[3], self._ic(av, ic))
            elif op is _c.BRANCH:
                for alt in av[1]:
                    self.walk(alt, ic)
            elif op is getattr(_c, "ATOMIC_GROUP", None):
                self.walk(av, ic)

    def _inner_variable(self, seq: Any, ic: bool) -> list[Item]:
        """Variable-length repeats anywhere inside seq."""
        found: list[Item] = []
        for item in seq:
            op, av = item
            if op in _REPEATS:
                if av[1] > av[0]:
                    found.append(item)
                found.extend(self._inner_variable(av[2], ic))
            elif op is _c.SUBPATTERN:
                found.extend(self._inner_variable(av[3], ic))
            elif op is _c.BRANCH:
                for alt in av[1]:
                    found.extend(self._inner_variable(alt, ic))
        return found

    def _separators(self, seq: Any, ic: bool) -> list[frozenset[int]]:
        """Character sets of the mandatory single-character steps of a sequence (through groups)."""
        out: list[frozenset[int]] = []
        for item in seq:
            op, av = item
            if op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
                out.append(self.item_chars(item, ic))
            elif op is _c.SUBPATTERN:
                out.extend(self._separators(av[3], self._ic(av, ic)))
            elif op in _REPEATS and av[0] >= 1:
                out.extend(self._separators(av[2], ic))
        return out

    def _separated(self, body: Any, parts: list[frozenset[int]], ic: bool) -> bool:
        """Does the body have a mandatory character that none of the ambiguous parts can match?"""
        union: set[int] = set()
        for p in parts:
            union |= p
        return any(not (sep & union) for sep in self._separators(body, ic))

    def _repeated_body(self, body: Any, ic: bool) -> None:
        if self.min_len(body) == 0 and self._inner_variable(body, ic):
            self.issues.append(
                "a repeated group whose body can match the empty string backtracks "
                "exponentially; make the body match at least one character"
            )
            return
        inner = self._inner_variable(body, ic)
        if inner:
            inner_chars = [self.item_chars(x, ic) for x in inner]
            if not self._separated(body, inner_chars, ic):
                self.issues.append(
                    "nested variable quantifiers (like (a+)+) backtrack exponentially; "
                    "quantify once, or end each repetition with a character the inner part "
                    "cannot match"
                )
                return
        for branch in self._branches(body, ic):
            alts = branch[1][1]
            if self._distinct_literals(alts, ic):
                continue
            if self.alternation_overlaps(alts, ic) and not self._separated(
                body, [self.chars(alt, ic) for alt in alts], ic
            ):
                self.issues.append(
                    "alternatives under a repeat overlap (like (a|aa)+ or (\\w|\\d)*) and "
                    "backtrack exponentially; make the branches start differently or use one "
                    "character class"
                )
                return

    def _branches(self, seq: Any, ic: bool) -> list[Item]:
        found: list[Item] = []
        for item in seq:
            op, av = item
            if op is _c.BRANCH:
                found.append(item)
            elif op is _c.SUBPATTERN:
                found.extend(self._branches(av[3], ic))
        return found

    @staticmethod
    def _distinct_literals(alts: list[Any], ic: bool) -> bool:
        """Branches that are distinct literal strings of one length never match the same text."""
        words = []
        for alt in alts:
            if not all(op is _c.LITERAL for op, _ in alt):
                return False
            word = "".join(chr(av) for _, av in alt)
            words.append(word.casefold() if ic else word)
        return len({len(w) for w in words}) == 1 and len(set(words)) == len(words)

    def alternation_overlaps(self, alts: list[Any], ic: bool) -> bool:
        """Can two branches start alike, or one match the empty string?"""
        if self._distinct_literals(alts, ic):
            return False
        if any(self.min_len(alt) == 0 for alt in alts):
            return True
        firsts = [self.first_chars(alt, ic) for alt in alts]
        return any(firsts[i] & firsts[j] for i in range(len(alts)) for j in range(i + 1, len(alts)))

    def _unbounded(self, item: Item) -> bool:
        op, av = item
        return op in _REPEATS and av[1] == _MAXREPEAT and self.min_len(av[2]) > 0

    def _adjacent_gaps(self, items: list[Item], ic: bool) -> None:
        for i, item in enumerate(items):
            if not self._unbounded(item):
                continue
            ends = self.last_chars([item], ic)
            for later in items[i + 1 :]:
                if self._unbounded(later) and ends & self.first_chars([later], ic):
                    self.issues.append(
                        "two unbounded repeats of overlapping characters with nothing "
                        "required between them (like .*.* or \\w+\\s*\\w+) backtrack "
                        "polynomially; merge them or put a required delimiter between"
                    )
                    return
                if self.min_len_item(later) > 0:
                    break

    def _leading_gap(self, items: list[Item]) -> None:
        rest = [x for x in items if x[0] not in _ZERO_WIDTH]
        if not rest or rest[0][0] not in _REPEATS:
            return
        lo, hi, body = rest[0][1]
        if lo == 0 and hi == _MAXREPEAT and len(body) == 1 and body[0][0] is _c.ANY:
            self.issues.append(
                "a leading unbounded gap (.*X) never changes whether a line matches but "
                "multiplies the cost of every search; drop it"
            )


_ALTERNATION_MESSAGE = (
    "alternatives under a repeat overlap (like (a|aa)+ or (\\w|\\d)*) and backtrack "
    "exponentially; make the branches start differently or use one character class"
)
_BOUNDS = re.compile(r"\{(\d*)(,?)(\d*)\}")


def _quantified_groups(pattern: str) -> list[str]:
    """Bodies of the groups directly followed by a large or unbounded quantifier, as text.

    The standard parser folds single-character branches into a class (`(a|a)` becomes `[a]`),
    which hides overlapping alternatives from the tree walk; this looks at the text instead."""
    out: list[str] = []
    stack: list[int] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
            i += 1
            continue
        if ch == "[":
            in_class = True
            i += 2 if pattern.startswith("[^]", i) else 1
            if i < n and pattern[i] == "]":
                i += 1
            continue
        if ch == "(":
            stack.append(i)
        elif ch == ")" and stack:
            start = stack.pop()
            rest = pattern[i + 1 : i + 12]
            repeated = rest[:1] in ("*", "+")
            m = _BOUNDS.match(rest)
            if m:
                hi = m.group(3)
                repeated = (m.group(2) == "," and not hi) or int(hi or m.group(1) or 0) >= _LARGE
            if repeated:
                out.append(pattern[start + 1 : i])
        i += 1
    return out


def _split_alternatives(body: str) -> list[str]:
    if body.startswith("?"):
        m = re.match(r"\?(?::|P<\w+>|<\w+>|[aiLmsux-]+:)", body)
        if m is None:  # look-around and other special groups: not an alternation to check
            return []
        body = body[m.end() :]
    parts, depth, start, i, in_class = [], 0, 0, 0, False
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if body.startswith("[]", i) or body.startswith("[^]", i):
                i += 2 if body[i + 1] == "]" else 3
                continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            parts.append(body[start:i])
            start = i + 1
        i += 1
    parts.append(body[start:])
    return parts if len(parts) > 1 else []


def _text_alternations(pattern: str, flags: int) -> list[str]:
    analyzer = _Analyzer(flags)
    ic = bool(flags & re.IGNORECASE)
    for body in _quantified_groups(pattern):
        alternatives = _split_alternatives(body)
        if not alternatives:
            continue
        try:
            parsed = [list(_p.parse(alt, flags & ~re.VERBOSE)) for alt in alternatives]
        except (re.error, RecursionError, OverflowError, ValueError):
            continue
        if analyzer.alternation_overlaps(parsed, ic):
            return [_ALTERNATION_MESSAGE]
    return []


_TEXT_NESTED = re.compile(r"\((?:[^()\\]|\\.)*[*+](?:[^()\\]|\\.)*\)(?:[*+]|\{\d*,\d*\})")


def redos_issues(pattern: str) -> list[str]:
    """Reasons the pattern can backtrack catastrophically; empty when none is found."""
    try:
        parsed = _p.parse(pattern, 0)
    except (re.error, RecursionError, OverflowError, ValueError):
        # regex-module-only syntax: fall back to the textual shape of nested quantifiers
        if _TEXT_NESTED.search(pattern):
            return ["nested quantifiers (like (a+)+) backtrack exponentially"]
        return []
    analyzer = _Analyzer(parsed.state.flags)
    try:
        analyzer.walk(parsed, bool(parsed.state.flags & re.IGNORECASE), top=True)
    except RecursionError:
        return ["pattern nests too deeply to analyse"]
    seen: list[str] = []
    for issue in analyzer.issues + _text_alternations(pattern, parsed.state.flags):
        if issue not in seen:
            seen.append(issue)
    return seen
