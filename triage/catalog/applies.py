"""A signature's release ranges from the catalog: which catalogued releases print its message.

A signature's example lines are located (`best_match`, the lookup every run uses); a located site
counts only when its own template, filled in, fires a decisive pattern (so a wrapper message that
merely carries the signature's text in a placeholder never bounds it). The releases that print
the message are then widened by every other template of the same project that a decisive pattern
fires on (another wording, the message moved to another function): a signature applies wherever
the catalog shows text it fires on. The catalog knows catalogued releases only: a release between
two catalogued ones is unknown, so a range starts at the first catalogued release that prints the
message and ends (`fixed`, exclusive) at the first catalogued one after the last that prints it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from triage.catalog.lookup import best_match, normalise_line, piece_spans, release_runs
from triage.catalog.store import WILDCARD, CatalogStore, Site
from triage.catalog.sweep import SignatureLike as _Sig
from triage.catalog.sweep import sample_lines

# Catalog project -> the component name of `applies_to.versions` (triage.kb.schema.COMPONENTS).
# torch-cpp is PyTorch's C++ source: the same component as its Python side.
COMPONENT_OF = {
    "vllm": "vllm",
    "sglang": "sglang",
    "torch": "torch",
    "torch-cpp": "torch",
    "nccl": "nccl",
    "open-gpu-kernel-modules": "driver",
    "triton": "triton",
    "lmcache": "lmcache",
    "cpython": "python",
}
_SCAN_FILLERS = ("1", "abc", "'a'")  # one placeholder filling per scan of a whole project
_HOLE = "\x00"  # a placeholder in the joined lines of a project (no template holds a NUL)
SCAN_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Derived:
    """Where one project's catalogued releases print a signature's message."""

    signature: str
    project: str
    releases: tuple[str, ...]  # every catalogued release of the project, oldest first
    printing: tuple[str, ...]  # those that print text a decisive pattern fires on
    located: tuple[str, ...]  # the templates the example lines were located at
    # The catalog vouches that the release before the first printing one (after the last) does not
    # print it: the located site's function prints other messages there, or its Python file is
    # catalogued there. Otherwise the message may have moved where the catalog cannot see it.
    absent_before: bool = True
    absent_after: bool = True
    # Decisive patterns that fire on no template of the project (nor of the other engine): text
    # the catalog cannot date, which may fire on this project's logs in any release.
    uncovered: tuple[str, ...] = ()

    @property
    def component(self) -> str | None:
        return COMPONENT_OF.get(self.project)

    @property
    def bound(self) -> bool:
        """Release-bound: some catalogued release does not print it (and one does)."""
        return bool(self.printing) and len(self.printing) < len(self.releases)

    @property
    def gaps(self) -> bool:
        """The printing releases are not one run (a wording the catalog does not tie together)."""
        idx = [self.releases.index(r) for r in self.printing]
        return bool(idx) and idx[-1] - idx[0] + 1 != len(idx)

    @property
    def introduced(self) -> str | None:
        """Just after the last catalogued release before the first that prints it (that one does
        not print it; the releases between are not catalogued, so they are given the benefit of
        the doubt, as `fixed` gives it to those after the last), unless the oldest prints it."""
        before = self.before()
        return just_after(before) if before else None

    @property
    def fixed(self) -> str | None:
        """The first catalogued release after the last that prints it (exclusive), if any."""
        if not self.bound or self.printing[-1] == self.releases[-1] or not self.absent_after:
            return None
        return self.after()

    def after(self) -> str | None:
        """The catalogued release just after the last that prints it."""
        if not self.printing or self.printing[-1] == self.releases[-1]:
            return None
        return self.releases[self.releases.index(self.printing[-1]) + 1]

    def before(self) -> str | None:
        """The catalogued release just before the first that prints it (which does not)."""
        if not self.bound or self.printing[0] == self.releases[0] or not self.absent_before:
            return None
        return self.releases[self.releases.index(self.printing[0]) - 1]

    def range(self) -> dict[str, str]:
        """The proposed VersionRange fields (hull of the printing releases)."""
        out = {}
        if self.introduced:
            out["introduced"] = self.introduced
        if self.fixed:
            out["fixed"] = self.fixed
        return out

    def note(self) -> str:
        """What the range rests on, in the catalog's granularity."""
        parts = [
            f"catalogued {self.project} releases {_runs(self.printing, self.releases)} print it"
        ]
        if self.introduced:
            parts.append(
                f"first seen in catalogued {self.printing[0]}; catalogued {self.before()} does not "
                f"print it, so the range starts just after {self.before()} (the releases between "
                "are not catalogued)"
            )
        elif self.bound and not self.absent_before:
            parts.append(
                f"{self.printing[0]} is the first that does, but the catalog cannot tell whether "
                "older releases print it elsewhere"
            )
        if self.fixed:
            parts.append(
                f"last seen in catalogued {self.printing[-1]}; catalogued {self.fixed} does not "
                "print it, so the range ends there (the releases between are not catalogued)"
            )
        elif self.bound and not self.absent_after and self.after():
            parts.append(
                f"{self.printing[-1]} is the last that does, but the catalog cannot tell whether "
                "newer releases print it elsewhere"
            )
        return "; ".join(parts)


def just_after(release: str) -> str:
    """The smallest version spelling above a release: its next post release ('0.5.5' ->
    '0.5.5.post1', '0.8.5.post1' -> '0.8.5.post2'), so a range starting there excludes the release
    itself and nothing after it."""
    m = _POST.search(release)
    if m:
        return f"{release[: m.start()]}.post{int(m.group(1)) + 1}"
    return f"{release}.post1"


_POST = re.compile(r"\.post(\d+)$")


def _runs(chosen: Sequence[str], releases: Sequence[str]) -> str:
    return release_runs(releases, [rel in chosen for rel in releases])


class ProjectText:
    """Every template of one project filled in with one value, one line each, to scan at once."""

    def __init__(self, sites: Sequence[Site], text: str) -> None:
        self.sites = sites
        self.text = text

    @staticmethod
    def template_lines(sites: Sequence[Site]) -> str:
        """The project's lines with each placeholder a NUL, to be filled by one `str.replace`."""
        return "".join(_filled(site, _HOLE) + "\n" for site in sites)

    def fired(self, compiled: Any) -> set[int]:
        """Indexes of the sites whose filled template the pattern fires on (a match that crossed
        a line end of the joined text does not count)."""
        try:
            matches = list(compiled.finditer(self.text, timeout=SCAN_TIMEOUT_S))
        except TimeoutError:  # a pattern too slow for a whole project: the located sites only
            return set()
        out: set[int] = set()
        for m in matches:
            end = self.text.find("\n", m.start())
            if end < 0 or m.end() <= end:  # the line of its start is the site's (one per line)
                out.add(self.text.count("\n", 0, m.start()))
        return out


def _filled(site: Site, filler: str) -> str:
    """The line a log shows for this site with every placeholder `filler` (and the text a log
    shows before the message, as the sweep's sample lines do)."""
    prefix = ""
    if site.kind.endswith(("Error", "Exception", "Warning")):
        prefix = f"{site.kind}: "
    elif site.kind.startswith(("TORCH_CHECK", "AT_ERROR", "C10")):
        prefix = "RuntimeError: "
    elif site.kind == "NCCL WARN":
        prefix = "host:1:2 [0] NCCL WARN "
    return prefix + site.template.replace(WILDCARD, filler)


def _carries(site: Site, line: str, patterns: Sequence[Any]) -> tuple[set[int], list[str]]:
    """Which decisive patterns' matches in this line touch the template's literal text (not only
    what a placeholder stood for: then the template is a wrapper around the message)? And the
    values the placeholders stood for in the line (the scan fills templates with them too: a
    pattern may need a class name where the template has a placeholder)."""
    spans = piece_spans(site.template, line)
    if not spans:
        return set(), []
    carries = set()
    for j, pat in enumerate(patterns):
        m = pat.search(line)
        if m is not None and any(m.start < e and m.end > s for s, e in spans):
            carries.add(j)
    values = [line[a:b].strip() for (_, a), (b, _) in itertools.pairwise(spans)]
    pieces = site.template.split(WILDCARD)
    if len(pieces) > 1 and not pieces[0].strip():
        values.append(
            line[: spans[0][0]].rsplit(None, 1)[-1] if line[: spans[0][0]].strip() else ""
        )
    if len(pieces) > 1 and not pieces[-1].strip():
        rest = line[spans[-1][1] :].split(None, 1)
        values.append(rest[0] if rest else "")
    return carries, [v for v in values if 0 < len(v) <= MAX_FILLER]


MAX_FILLER = 80
MAX_EXAMPLE_FILLERS = 4


class Deriver:
    """Derivations over one catalog (a project's sites, and their scan texts with the generic
    fillers, are read once)."""

    def __init__(self, store: CatalogStore) -> None:
        self.store = store
        self._sites: dict[str, list[Site]] = {}
        self._lines: dict[str, str] = {}
        self._texts: dict[tuple[str, str], ProjectText] = {}

    def project_text(self, project: str, filler: str) -> ProjectText:
        if project not in self._sites:
            sites = [x for x in self.store.sites_of(project) if "\n" not in x.template]
            self._sites[project] = sites
            self._lines[project] = ProjectText.template_lines(sites)
        key = (project, filler)
        if key in self._texts:
            return self._texts[key]
        text = ProjectText(self._sites[project], self._lines[project].replace(_HOLE, filler))
        if filler in _SCAN_FILLERS:
            self._texts[key] = text
        return text

    def derive(self, sig: _Sig, examples: Sequence[str]) -> list[Derived]:
        """Per catalogued project that prints a message of the signature (found by locating its
        example lines), the releases that print text a decisive pattern fires on, and the decisive
        patterns that fire on no template of the project."""
        import regex

        from triage.regexes import compile_linear

        patterns: list[tuple[str, Any, Any]] = []
        for p in sig.decisive:
            try:
                patterns.append(
                    (p.regex, compile_linear(p.regex), regex.compile(p.regex, regex.V0))
                )
            except Exception:  # a pattern the engines refuse: check_syntax reports it
                continue
        if not patterns:
            return []
        linear = [lin for _, lin, _ in patterns]
        located: dict[str, list[Site]] = {}
        fillers: dict[str, list[str]] = {}
        carried: dict[str, set[int]] = {}
        for example in examples:
            found = best_match(self.store, example, {})
            if found is None:
                continue
            site = found.site
            which, values = _carries(site, normalise_line(example), linear)
            if not which:
                continue  # the decisive text is in a placeholder: a wrapper, not the message
            located.setdefault(site.project, []).append(site)
            fillers.setdefault(site.project, []).extend(values)
            carried.setdefault(site.project, set()).update(which)
        out = []
        for project, sites in sorted(located.items()):
            info = self.store.projects[project]
            values = list(dict.fromkeys(fillers[project]))[:MAX_EXAMPLE_FILLERS]
            covered = set(carried[project])
            mask = 0
            for site in sites:
                mask |= site.releases
                for variant in self.store.sites_in(site.project, site.function):
                    lines = sample_lines(variant) + [_filled(variant, v) for v in values]
                    fired = {j for j, lin in enumerate(linear) if any(lin.search(t) for t in lines)}
                    if fired:
                        mask |= variant.releases  # a rewording of the same function
                        covered |= fired
            for j, found_sites in self._scan(project, patterns, values).items():
                covered.add(j)
                for site in found_sites:
                    mask |= site.releases
            uncovered = [j for j in range(len(patterns)) if j not in covered]
            sibling = {"vllm": "sglang", "sglang": "vllm"}.get(project)
            if sibling and uncovered:  # the other engine's wording: never fires on this one's log
                uncovered = [j for j in uncovered if j not in self._scan(sibling, patterns, values)]
            printing = tuple(r for i, r in enumerate(info.releases) if mask >> i & 1)
            templates = tuple(dict.fromkeys(s.template for s in sites))
            first = next((i for i in range(len(info.releases)) if mask >> i & 1), 0)
            last = mask.bit_length() - 1
            out.append(
                Derived(
                    sig.id,
                    project,
                    info.releases,
                    printing,
                    templates,
                    absent_before=first == 0 or self._vouched(sites, first - 1, new_file_ok=True),
                    absent_after=last < 0
                    or last == len(info.releases) - 1
                    or self._vouched(sites, last + 1, new_file_ok=False),
                    uncovered=tuple(patterns[j][0] for j in uncovered),
                )
            )
        return out

    def _scan(
        self, project: str, patterns: Sequence[tuple[str, Any, Any]], values: Sequence[str]
    ) -> dict[int, list[Site]]:
        """Per decisive pattern (by index), the project's sites whose filled template it fires
        on."""
        out: dict[int, list[Site]] = {}
        for filler in (*_SCAN_FILLERS, *values):
            text = self.project_text(project, filler)
            for j, (_, _, compiled) in enumerate(patterns):
                for i in text.fired(compiled):
                    out.setdefault(j, []).append(text.sites[i])
        return out

    def _vouched(self, sites: Sequence[Site], release: int, *, new_file_ok: bool) -> bool:
        """Can the catalog say these sites' message is not printed in this release? Yes when one
        site's function prints another message there. For the release before the first that
        prints it, also when the site's file is a catalogued Python file: it was there without
        the message, or it is new (a new file is a new feature; a message moved with its wording
        is found by the scan). Not
        for the release after the last: a function that left its file may print it elsewhere in
        a way the catalog does not read (SGLang 0.5.10's memory-leak check builds its message for
        a helper that raises or warns)."""
        for site in sites:
            if any(
                v.releases >> release & 1 for v in self.store.sites_in(site.project, site.function)
            ):
                return True
            if not new_file_ok:
                continue
            if self.store.file_releases(site.project, site.file):
                return True  # the file existed there without it, or is new: a new message
        return False


def component_ranges(derived: Sequence[Derived]) -> dict[str, Derived]:
    """The derivation to write per component: one project per component, release-bound, every
    decisive pattern the project's (or the other engine's) text. A component printed unbounded
    by any of its projects (torch's Python side and its C++) is not bounded by the other."""
    by_component: dict[str, list[Derived]] = {}
    for d in derived:
        if d.component:
            by_component.setdefault(d.component, []).append(d)
    return {
        comp: ds[0]
        for comp, ds in by_component.items()
        if len(ds) == 1 and ds[0].bound and ds[0].range() and not ds[0].uncovered
    }
