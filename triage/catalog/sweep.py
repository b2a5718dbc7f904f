"""Signature authoring on the catalog: the version sweep of `kb lint` and the proposal of `draft`.

Sweep: each example line of a signature is located; every similar wording the same function printed
in the catalogued releases where the located one is not printed (its rewordings) is turned into
sample lines (placeholders filled with
numbers, words, addresses); a release whose wording no decisive pattern matches is a miss.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from triage.catalog.lookup import best_match, release_ranges
from triage.catalog.store import WILDCARD, CatalogStore, Site

SIMILAR = 0.6  # rapidfuzz ratio (0-1) a wording needs to the located one to count as a rewording
_FILLERS = ("1", "abc", "1.50", "0x7f3a", "/tmp/x", "'a'", "a b")
_EXC_KIND = re.compile(r"(?:Error|Exception|Warning)$")


class _Pattern(Protocol):
    regex: str


class SignatureLike(Protocol):
    """What the sweep and the applies_to derivation read of a signature."""

    id: str

    @property
    def decisive(self) -> Sequence[_Pattern]: ...


@dataclass(frozen=True)
class SweepMiss:
    signature: str
    project: str
    releases: str  # the catalogued releases with this wording
    file: str
    function: str
    wording: str  # the template no decisive pattern matches

    def __str__(self) -> str:
        return (
            f"{self.project} {self.releases} words it {self.wording[:140]!r} "
            f"({self.file}, {self.function}): no decisive pattern matches"
        )


def sample_lines(site: Site) -> list[str]:
    """Lines this site could print: its template with placeholders filled, with and without the
    prefix a log shows before it (the exception class, NCCL's WARN)."""
    pieces = site.template.split(WILDCARD)
    holes = len(pieces) - 1
    fills: Iterable[tuple[str, ...]]
    if holes == 0:
        fills = [()]
    elif holes <= 5:  # every mix of a number, a word and a quoted word ({x!r} prints quotes)
        fills = [*itertools.product(("1", "abc", "'a'"), repeat=holes)]
        fills += [(f,) * holes for f in _FILLERS]
    else:
        fills = [(f,) * holes for f in _FILLERS]
    prefixes = [""]
    if _EXC_KIND.search(site.kind):
        prefixes.append(f"{site.kind}: ")
    if site.kind.startswith(("TORCH_CHECK", "AT_ERROR", "C10")):
        prefixes.append("RuntimeError: ")
    if site.kind == "NCCL WARN":
        prefixes.append("host:1:2 [0] NCCL WARN ")
    out: list[str] = []
    for fill in fills:
        body = pieces[0] + "".join(f + p for f, p in zip(fill, pieces[1:], strict=True))
        out.extend(prefix + body for prefix in prefixes)
    return out


def _similar(a: str, b: str) -> bool:
    from rapidfuzz import fuzz

    return fuzz.ratio(a, b) / 100 >= SIMILAR


def sweep_signature(
    store: CatalogStore, sig: SignatureLike, examples: Sequence[str]
) -> list[SweepMiss]:
    """Misses of one signature: catalogued wordings of its message no decisive pattern matches."""
    from triage.regexes import compile_linear

    patterns = []
    for p in sig.decisive:
        try:
            patterns.append(compile_linear(p.regex))
        except Exception:  # a pattern the engines refuse: check_syntax reports it
            continue
    if not patterns:
        return []
    located: dict[tuple[str, str, str], Site] = {}
    for line in examples:
        found = best_match(store, line, {})
        if found is not None:
            s = found.site
            located.setdefault((s.project, s.file, s.function), s)
    misses: list[SweepMiss] = []
    seen: set[str] = set()
    for site in located.values():
        for variant in store.sites_in(site.project, site.function):
            if variant.template in seen or not _similar(variant.template, site.template):
                continue
            if variant.project == site.project and variant.releases & site.releases:
                continue  # printed beside it in one release: another message, not a rewording
            seen.add(variant.template)
            if variant.template == site.template:
                continue  # the example line itself is that wording (check_examples covers it)
            if any(pat.search(text) for text in sample_lines(variant) for pat in patterns):
                continue
            info = store.projects[variant.project]
            misses.append(
                SweepMiss(
                    sig.id,
                    variant.project,
                    release_ranges(variant, info),
                    variant.file,
                    variant.function,
                    variant.template,
                )
            )
    return misses


def applies_to(store: CatalogStore, line: str) -> tuple[str, str, str] | None:
    """(project, first release, last release) that print this line's message, from the catalog."""
    found = best_match(store, line, {})
    if found is None:
        return None
    pairs = found.site.release_lines(found.info)
    return (found.site.project, pairs[0][0], pairs[-1][0]) if pairs else None


_META = set(r"\.^$*+?()[]{}|")
MAX_PATTERN = 160


def _escape(text: str) -> str:
    return "".join("\\" + ch if ch in _META else ch for ch in text)


def template_pattern(template: str) -> str:
    """A portable regex for a template: its most literal stretch with at most two placeholders
    (lint allows two gaps), each `.*`, cut at `MAX_PATTERN` characters on a word boundary."""
    pieces = template.split(WILDCARD)
    best = (0, 0)
    best_len = -1
    for i in range(len(pieces)):
        j = min(len(pieces), i + 3)
        length = sum(len(p.strip()) for p in pieces[i:j])
        if length > best_len:
            best, best_len = (i, j), length
    chosen = list(pieces[best[0] : best[1]])
    chosen[0] = chosen[0].lstrip()
    chosen[-1] = chosen[-1].rstrip()
    out = ".*".join(_escape(p) for p in chosen)
    if len(out) > MAX_PATTERN:
        cut = out.rfind(" ", 0, MAX_PATTERN)
        out = out[: cut if cut > 40 else MAX_PATTERN]
        out = out.rstrip("\\")
    return out.strip()
