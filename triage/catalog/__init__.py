"""The message catalog: which source line of the serving stack printed a log line.

The facade (`triage.api`) calls `locate` as the stage after events: every salient line that no
curated signature explains is looked up; a located one becomes a hypothesis with basis "located"
(below every curated one), the rest stay unrecognized. `kb lint` (version sweep, applies_to
check), `kb applies` (release ranges) and `triage draft` (a proposed pattern) use `open_catalog`
and `Catalog`. Nothing outside imports the modules below.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from triage.catalog.applies import (
    COMPONENT_OF,
    Derived,
    Deriver,
    component_ranges,
    just_after,
)
from triage.catalog.frames import (
    FRAME_PATTERN,
    Frame,
    chain_after,
    chain_before,
    exception_class,
    frame_above,
    innermost_frame,
    is_source_line,
    locate_frame,
    own_frame,
    raised_class,
)
from triage.catalog.layers import LAYER_RULES, caller_layer, caller_package, layer_of
from triage.catalog.lookup import (
    Match,
    best_match,
    hinted_release,
    pick_release,
    prints_in,
    release_ranges,
    release_runs,
    version_key,
)
from triage.catalog.native import (
    GO_FRAME_PATTERN,
    NativePlace,
    function_place,
    go_place,
    inline_place,
)
from triage.catalog.native import file_releases as native_releases
from triage.catalog.store import (
    WILDCARD,
    CatalogStore,
    ProjectInfo,
    Site,
    catalog_path,
    open_store,
)
from triage.catalog.sweep import SweepMiss, applies_to, sweep_signature, template_pattern
from triage.events import TRACEBACK_HEAD, UnexplainedLine, process_key
from triage.models import EvidenceOut, Hypothesis, Line, SourceOut

__all__ = [
    "COMPONENT_OF",
    "FRAME_PATTERN",
    "GO_FRAME_PATTERN",
    "LAYER_RULES",
    "WILDCARD",
    "Catalog",
    "Derived",
    "Located",
    "Proposal",
    "SweepMiss",
    "catalog_path",
    "component_ranges",
    "just_after",
    "layer_of",
    "locate",
    "open_catalog",
]

# NCCL's WARN is how NCCL reports a failure (it has no error level): not a warning here
_WARNING_KIND = re.compile(r"Warning|warning|TORCH_WARN|WARNING|NOTICE|notice")
# Calls that name no level: the driver's nv_printf/NV_PRINTF in a catalog built before levels
# were kept, its console print, fprintf, systemd's LOG_UNIT_MESSAGE (its log_unit_struct's level
# is often a variable).
_UNLEVELED_KIND = re.compile(
    r"^(?:nv_printf|NV_PRINTF|NV_DEV_PRINTF|portDbgPrintf|fprintf|LOG_UNIT_MESSAGE|LOG_MESSAGE|log)$"
)
# Text that says a failure (in the template's own words, never in a value the log filled in)
_ERROR_TEXT = re.compile(
    r"\b(?:error|errors|failed|failure|fatal|cannot|can't|unable|abort(?:ed|ing)?|panic|"
    r"invalid|corrupt(?:ed)?|timed out|timeout)\b",
    re.I,
)
_ERROR_LEVELS = ("error", "err", "critical", "crit", "fatal", "alert", "emerg", "emergency")


def severity_of(kind: str, template: str = "", line_level: str | None = None) -> str:
    """error for exceptions, checks and error-level records; warning for warnings and notices.
    A call that names no level (`nv_printf` in an old catalog, `fprintf(stderr)`, systemd's
    LOG_UNIT_MESSAGE) takes one from the log line's own level, else from its template's words
    (a failure word: error), else it is a warning at most: the call does not say it is an error."""
    if _UNLEVELED_KIND.match(kind):
        if line_level and line_level.lower() in _ERROR_LEVELS:
            return "error"
        if _ERROR_TEXT.search(template.replace(WILDCARD, " ")):
            return "error"
        return "warning"
    if _WARNING_KIND.search(kind):
        return "warning"
    return "error"


@dataclass(frozen=True)
class Located:
    """A log line and where its message is printed."""

    text: str
    match: Match
    source: SourceOut
    layer: str
    layer_why: str
    how: str = ""  # set when the log's own text gave the place (see `triage.catalog.native`)


@dataclass(frozen=True)
class Proposal:
    pattern: str  # a portable regex from the template (at most two gaps)
    references: list[str]
    project: str
    first: str  # the oldest catalogued release that prints it
    last: str  # the newest that does
    newest: bool  # `last` is the newest catalogued release (the message is still printed)
    located: Located


class Catalog:
    """Lookup over one catalog file."""

    def __init__(self, store: CatalogStore) -> None:
        self.store = store
        self._deriver: Deriver | None = None

    @property
    def path(self) -> Path:
        return self.store.path

    def templates(self) -> int:
        return self.store.count_templates()

    def locate_text(self, text: str, facts: dict[str, Any] | None = None) -> Located | None:
        facts = facts or {}
        found = best_match(self.store, text, facts)
        if found is None:
            return None
        site, info = found.site, found.info
        version_fact = facts.get(_version_fact(site.project))
        hinted = hinted_release(site, info, text)
        release, line = pick_release(
            site, info, str(version_fact) if version_fact else None, hinted
        )
        ranges = release_ranges(site, info)
        note = None
        if found.in_version is False:
            note = (
                f"{site.project} {version_fact} (the log's version) does not print this message; "
                f"the catalogued releases {ranges} do: the log may not be from the version it "
                "claims, or the message moved"
            )
        source = SourceOut(
            project=site.project,
            file=site.file,
            function=site.function,
            kind=site.kind,
            releases=ranges,
            release=release,
            line=line,
            url=info.url(release, site.file, line) if release else "",
            template=site.template,
            version_note=note,
        )
        layer, why = layer_of(site.project, site.file, site.function)
        return Located(text, found, source, layer, why)

    def locate_frame(
        self,
        frames: Sequence[tuple[str, int, str]],
        stream: str,
        number: int,
        text: str,
        facts: dict[str, Any],
    ) -> Located | None:
        """An exception line located by the innermost traceback frame before it (same stream)."""
        exception = exception_class(text)
        frame = innermost_frame(frames, stream, number) if exception else None
        if frame is None or exception is None:
            return None
        return self._at_frame(frame, exception, f"{exception} (traceback frame)", text, facts)

    def locate_traceback_line(
        self,
        line: Line,
        frames: Sequence[tuple[str, int, str]],
        exceptions: Sequence[tuple[str, int, str]],
        facts: dict[str, Any],
    ) -> Located | None:
        """A line of a traceback itself (the first line of a cut one, in an ERROR record): a frame
        line by the frame it shows; a source line or its ^^^^ markers by the frame line just above
        it; a `raise X(` line with no frame above by the exception line of class X just below it,
        located by its template (the raise statement is that template's site)."""
        text = line.message or line.text or line.raw
        stream = process_key(line)
        bare = f"{line.input}|-"
        if TRACEBACK_HEAD in text:
            # a traceback cut before its exception line: where it was when the text stopped
            return self._in_chain(
                chain_after(frames, stream, bare, line.number, exceptions), text, facts
            )
        frame = own_frame(text)
        if frame is not None:
            return self._at_frame(frame, "", "traceback frame", text, facts)
        if not is_source_line(line.text or line.raw, text):
            return None
        frame = frame_above(frames, stream, bare, line.number)
        if frame is not None:
            return self._at_frame(frame, "", "traceback source line", text, facts)
        raised = self._raise_below(line, text, stream, exceptions, facts)
        if raised is not None:
            return raised
        # the top of a cut traceback (its own frame is above the cut): the traceback the
        # following frames show, located by its innermost catalogued frame
        return self._in_chain(
            chain_after(frames, stream, bare, line.number, exceptions), text, facts
        )

    def _raise_below(
        self,
        line: Line,
        text: str,
        stream: str,
        exceptions: Sequence[tuple[str, int, str]],
        facts: dict[str, Any],
    ) -> Located | None:
        """A `raise X(` line by the exception line of class X at most three lines below it, when
        a template raised as X locates that line (the raise statement is the template's site)."""
        raised = raised_class(text)
        below = [
            exc_text
            for key, number, exc_text in exceptions
            if key == stream and line.number < number <= line.number + 3
        ]
        if raised is None or not below:
            return None
        named = exception_class(below[0])
        if named is None or named.rsplit(".", 1)[-1] != raised:
            return None  # the exception below is another raise's
        found = self.locate_text(below[0], facts)
        if found is None or found.source.kind.rsplit(".", 1)[-1] != raised:
            return None
        return Located(text, found.match, found.source, found.layer, found.layer_why)

    def _in_chain(self, chain: Sequence[Frame], text: str, facts: dict[str, Any]) -> Located | None:
        """A line of a traceback cut before its exception line, located by the innermost frame
        of the chain (innermost first) whose file is catalogued: a user's script or an
        uncatalogued library below it says nothing the catalog can cite, the library frame
        above it is where the failure passed through (a frame whose function no catalogued
        release of its file defines is not catalogued either)."""
        for frame in chain:
            found = self._at_frame(frame, "", CUT_KIND, text, facts)
            if found is not None:
                return found
        return None

    def _at_frame(
        self,
        frame: Frame,
        exception: str,
        kind: str,
        text: str,
        facts: dict[str, Any],
    ) -> Located | None:
        site = locate_frame(self.store, frame, exception)
        if site is None:
            return None
        info = self.store.projects[site.project]
        as_site = Site("", 0, site.project, site.file, site.function, kind, site.releases, "")
        if site.defined is False:
            # no catalogued release of the file defines the frame's function: the log's copy is
            # another release, and no release the catalog could cite has that code
            return None
        version = facts.get(_version_fact(site.project))
        shipped = [r for i, r in enumerate(info.releases) if site.releases >> i & 1]
        release = str(version) if version else (shipped[-1] if shipped else "")
        if version and shipped:
            below = [r for r in shipped if version_key(r) <= version_key(str(version))]
            release = below[-1] if below else shipped[0]
        exact = bool(version) and version_key(release) == version_key(str(version))
        url = (
            info.url(release, site.file, site.line)
            if exact
            else (info.url(release, site.file, 0).removesuffix("#L0") if release else "")
        )
        source = SourceOut(
            project=site.project,
            file=site.file,
            function=site.function,
            kind=kind,
            releases=release_ranges(as_site, info),
            release=release,
            line=site.line,
            url=url,
            template=text.strip()[:300],
        )
        layer, why = layer_of(site.project, site.file, site.function)
        return Located(text, Match(as_site, info, None), source, layer, why)

    def locate_native(
        self, line: Line, text: str, go_frames: Sequence[tuple[str, int, str]]
    ) -> Located | None:
        """A Go panic by its goroutine's frames, an assertion by the file:line it prints (see
        `triage.catalog.native`): the log's own account of where the code stopped."""
        place = (
            go_place(text, line.number, go_frames, line.input)
            or inline_place(text)
            or function_place(text)
        )
        return self._at_native(place, text) if place is not None else None

    def _at_native(self, place: NativePlace, text: str) -> Located:
        info = self.store.projects.get(place.project)
        mask = native_releases(self.store, place.project, place.file) if info else 0
        shipped = [r for i, r in enumerate(info.releases) if mask >> i & 1] if info else []
        release = shipped[-1] if shipped else ""
        # the log's build is of an unknown release: the link names the file, not a line
        url = info.url(release, place.file, 0).removesuffix("#L0") if info and release else ""
        ranges = (
            release_runs(info.releases, [bool(mask >> i & 1) for i in range(len(info.releases))])
            if info
            else ""
        )
        source = SourceOut(
            project=place.project,
            file=place.file,
            function=place.function,
            kind=place.kind,
            releases=ranges,
            release=release,
            line=place.line,
            url=url,
            template=text.strip()[:300],
        )
        site = Site("", 0, place.project, place.file, place.function, place.kind, mask, "")
        info = info or ProjectInfo(place.project, "", "", "", ())
        layer, why = layer_of(place.project, place.file, place.function)
        return Located(text, Match(site, info, None), source, layer, why, how=place.how)

    def sweep(self, sig: Any, examples: Sequence[str]) -> list[SweepMiss]:
        """The version sweep of one signature (see `triage.catalog.sweep`)."""
        return sweep_signature(self.store, sig, examples)

    def derive_applies(self, sig: Any, examples: Sequence[str]) -> list[Derived]:
        """The catalogued releases printing the signature's message, per project (see
        `triage.catalog.applies`)."""
        if self._deriver is None:
            self._deriver = Deriver(self.store)
        return self._deriver.derive(sig, examples)

    def proposal(self, line: str) -> Proposal | None:
        """What `triage draft` proposes from the catalog entry of a line: a pattern from the
        template, the source link of every release's wording, and `applies_to` from its releases."""
        found = self.locate_text(line)
        if found is None or by_frame(found.source.kind):
            return None
        src = found.source
        span = applies_to(self.store, line)
        refs = [src.url] if src.url else []
        return Proposal(
            pattern=template_pattern(src.template),
            references=refs,
            project=src.project,
            first=span[1] if span else "",
            last=span[2] if span else "",
            newest=self.releases(src.project)[-1:] == (span[2],) if span else False,
            located=found,
        )

    def rewordings(self, site: Site) -> list[Site]:
        """Every template the same function of the same project prints (its wording per release)."""
        return self.store.sites_in(site.project, site.function)

    def releases(self, project: str) -> tuple[str, ...]:
        info = self.store.projects.get(project)
        return info.releases if info else ()

    def prints_in(self, site: Site, version: str) -> bool | None:
        info = self.store.projects.get(site.project)
        return prints_in(site, info, version) if info else None


def _version_fact(project: str) -> str:
    from triage.catalog.lookup import VERSION_FACTS

    return VERSION_FACTS.get(project, "")


def open_catalog(path: Path | None = None) -> Catalog | None:
    """The shipped catalog (or $TRIAGE_CATALOG); None when it is missing."""
    store = open_store(path)
    return Catalog(store) if store is not None else None


def raised_by(source: SourceOut) -> str:
    """The one line text and Markdown show: 'raised by vllm 0.10.0-0.11.2, file, function'."""
    where = ", ".join(x for x in (source.file, source.function) if x)
    verb = (
        "printed"
        if severity_of(source.kind, source.template) == "warning" or "log" in source.kind.lower()
        else "raised"
    )
    releases = f" {source.releases}" if source.releases else ""
    return f"{verb} by {source.project}{releases}, {where}"


def by_frame(kind: str) -> bool:
    """Located by a traceback frame (the frame's file and function), not by a template."""
    return kind.endswith("(traceback frame)") or kind in FRAME_KINDS


CUT_KIND = "traceback cut (innermost frame)"
FRAME_KINDS = ("traceback frame", "traceback source line", CUT_KIND)


def locate(
    loose: Sequence[UnexplainedLine],
    facts: dict[str, Any],
    first_rank: int,
    frames: Sequence[tuple[str, int, str]] = (),
    exceptions: Sequence[tuple[str, int, str]] = (),
    go_frames: Sequence[tuple[str, int, str]] = (),
) -> tuple[list[Hypothesis], list[UnexplainedLine]]:
    """The stage: (located hypotheses, the lines that stay unrecognized). Opens the catalog only
    when there is a line to look up. `frames` are the traceback frame lines of the inputs
    ((stream, line, text), stream as `events.process_key`), for exception lines no template
    explains and for a traceback's own lines; `exceptions` the exception lines (same shape), for a
    `raise X(` line whose exception line follows it; `go_frames` the Go stack frame lines
    ((input, line, text)), for a Go panic. A line that prints its own place (a Go panic, an
    assertion's file:line) is located by that place first: a template of another project that
    shares its words ("index out of range") is not where it was raised."""
    if not loose:
        return [], []
    catalog = open_catalog()
    if catalog is None:
        return [], list(loose)
    hypotheses: list[Hypothesis] = []
    remaining: list[UnexplainedLine] = []
    for item in loose:
        text = item.line.message or item.line.text or item.line.raw
        found = catalog.locate_native(item.line, text, go_frames)
        if found is None:
            found = catalog.locate_text(text, facts)
        if found is None and frames:
            found = catalog.locate_frame(
                frames, process_key(item.line), item.line.number, text, facts
            )
        if found is None:
            found = catalog.locate_traceback_line(item.line, frames, exceptions, facts)
        if found is None:
            remaining.append(item)
            continue
        if frames and not found.how:
            found = _called_from(catalog, found, item.line, text, frames)
        hypotheses.append(_hypothesis(found, item, first_rank + len(hypotheses)))
    return hypotheses, remaining


# Projects whose messages belong to whatever code ran into them: the runtime's own errors (a
# KeyError, a JSON decode error, an asyncio time-out) live where the traceback says they arose.
RUNTIME_PROJECTS = frozenset({"cpython"})


def _called_from(
    catalog: Catalog,
    found: Located,
    line: Line,
    text: str,
    frames: Sequence[tuple[str, int, str]],
) -> Located:
    """The located line with the layer its traceback gives it: the caller's when a driving
    program's call raised it (see `layers.caller_layer`); for a message of the Python runtime
    itself, the layer of the innermost frame of a catalogued project (or of a driving program)."""
    chain = chain_before(frames, process_key(line), f"{line.input}|-", line.number)
    callers = [(n, pkg) for n, frame in chain if (pkg := caller_package(frame.path))]
    rule = caller_layer(found.layer, exception_class(text), callers)
    if rule is None and found.source.project in RUNTIME_PROJECTS:
        rule = _innermost_owner(catalog, chain)
    if rule is None:
        return found
    return replace(found, layer=rule[0], layer_why=rule[1])


def _innermost_owner(
    catalog: Catalog, chain: Sequence[tuple[int, Frame]]
) -> tuple[str, str] | None:
    """(layer, why) of the innermost traceback frame that belongs to a catalogued project other
    than the runtime, or to a driving program (harness)."""
    for number, frame in reversed(chain):
        package = caller_package(frame.path)
        if package is not None:
            return "harness", f"the runtime's error arose in {package} (its frame at line {number})"
        site = locate_frame(catalog.store, frame, "")
        if site is None or site.project in RUNTIME_PROJECTS or site.defined is False:
            continue
        layer, why = layer_of(site.project, site.file, site.function)
        return layer, f"the runtime's error arose in {site.project} {site.file}: {why}"
    return None


def _title(found: Located) -> str:
    src = found.source
    if src.kind in FRAME_KINDS:
        text = f"traceback through {src.file}, {src.function}"
    elif by_frame(src.kind):
        text = f"{src.template} in {src.function}"
    else:
        text = src.template.replace(WILDCARD, "…")
    return text if len(text) <= 120 else text[:117].rstrip() + "..."


def _hypothesis(found: Located, item: UnexplainedLine, rank: int) -> Hypothesis:
    src = found.source
    how = (
        found.how
        if found.how
        else "by the traceback frame it shows or follows (a catalogued file)"
        if src.kind in FRAME_KINDS
        else "by the innermost traceback frame (a catalogued file)"
        if by_frame(src.kind)
        else f"by {len(src.template.replace(WILDCARD, ''))} literal characters of its template"
    )
    where = "<file>" if found.how else "<module>"
    explain = [
        f"located {how}; no curated signature explains the line"
        if found.how
        else f"located by the message catalog {how}; no curated signature explains the line",
        f"layer {found.layer}: {found.layer_why}",
    ]
    if src.version_note:
        explain.append(src.version_note)
    return Hypothesis(
        rank=rank,
        # a place the log printed without its function (an assertion's file:line): the file
        signature=f"located:{src.project}:{src.file}:{src.function or where}",
        title=_title(found),
        layer=found.layer,
        severity=severity_of(src.kind, src.template, item.line.level),
        status="uncurated",
        score=0.0,
        evidence=[
            EvidenceOut(
                input=item.line.input,
                line=item.line.number,
                text=(item.line.text or item.line.raw)[:2000],
                count=item.count,
            )
        ],
        references=[src.url] if src.url else [],
        summary=raised_by(src) + (f" ({src.kind})" if src.kind else "") + ".",
        kind="cause",
        applicability=src.version_note,
        explain=explain,
        basis="located",
        source=src,
    )
