"""Match one log line against the catalog's templates: the most specific template wins.

A template matches when its literal pieces occur in the line in order, each gap (a placeholder)
at most `MAX_GAP` characters, starting where a message starts and ending on a word boundary. Most
specific = the longest literal text; ties go to a site in the file the line names (NCCL's
`misc/socket.cc:49`), then one the log's own version prints, then one whose call kind agrees with
the line (its exception class; a log record without one), then the newest release.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from triage.catalog.store import WILDCARD, CatalogStore, ProjectInfo, Site
from triage.textutil import mask

MAX_GAP = 400  # characters one placeholder may stand for
MAX_TEXT = 2000
MIN_LITERAL = 12
MIN_COVERAGE = 0.25  # share of the masked message (exception prefix removed) the literal must cover
_SPACES = re.compile(r"\s+")
# Messages of the Python runtime itself, which libraries repeat in their own raises: a line with
# one is located in the runtime's own source (the catalog's `cpython`) or by its traceback frame,
# never by a library's copy of the wording.
RUNTIME_MESSAGES = re.compile(
    r"No module named |cannot import name |object has no attribute |not supported between "
    r"instances of |takes [0-9]+ positional argument|got an unexpected keyword argument|"
    r"index out of range|object is not subscriptable|object is not callable|"
    r"unrecognized arguments: |the following arguments are required|: invalid choice: |"
    r"\bname '[^']*' is not defined"
)
RUNTIME_PROJECT = "cpython"
_EXC_PREFIX = re.compile(r"^(?:[\w.]*(?:Error|Exception|Warning)|NCCL WARN|WARN|ERROR|WARNING):\s*")
# the fact that holds each project's version, where the log can say it
VERSION_FACTS = {
    "vllm": "vllm_version",
    "sglang": "sglang_version",
    "torch": "torch_version",
    "torch-cpp": "torch_version",
    "nccl": "nccl_version",
    "open-gpu-kernel-modules": "driver_version",
}


ENGINES = ("vllm", "sglang")


def normalise_line(text: str) -> str:
    return _SPACES.sub(" ", text[:MAX_TEXT]).strip()


def literal_span(template: str, text: str) -> tuple[int, int] | None:
    """(start, end) of the template in text, or None: literal pieces in order, bounded gaps."""
    spans = piece_spans(template, text)
    return (spans[0][0], spans[-1][1]) if spans else None


def piece_spans(template: str, text: str) -> list[tuple[int, int]] | None:
    """(start, end) of each literal piece of the template in text, in order, or None when the
    template does not match (see `literal_span`); the text between them is what filled the
    placeholders."""
    pieces = template.split(WILDCARD)
    spans: list[tuple[int, int]] = []
    pos = 0
    for i, piece in enumerate(pieces):
        piece = piece.strip() if (i > 0 and i < len(pieces) - 1) else piece
        if i == 0:
            piece = piece.lstrip()
        if i == len(pieces) - 1:
            piece = piece.rstrip()
        if not piece:
            continue
        at = text.find(piece, pos)
        if not spans and pieces[0].strip():
            # a template that begins with text begins a message: after an exception class, a
            # logger header, NCCL's WARN, a driver prefix (the first such occurrence)
            while at >= 0 and not _starts_message(text, at):
                at = text.find(piece, at + 1)
        if at < 0:
            return None
        if spans and at - pos > MAX_GAP:
            return None
        pos = at + len(piece)
        spans.append((at, pos))
    if not spans:
        return None
    end = spans[-1][1]
    if pieces[-1].strip() and end < len(text) and text[end].isalnum() and text[end - 1].isalnum():
        return None  # the template ends inside a word of the line
    return spans


_MESSAGE_START = re.compile(r"(?:^|[:\]>)|*,-]|\bWARN|\bNVRM)\s*$")
_LINE_CLASS = re.compile(
    r"(?:^|[\s:\]>)|])(?:\w+\.)*(?P<cls>[A-Za-z_]\w*(?:Error|Exception|Warning)):"
)
_CLASS_KIND = re.compile(r"(?:[A-Z]\w*)?(?:Error|Exception|Warning)")
# "misc/shmutils.cc:112" (NCCL), "[core.py:918]" (vLLM): the line names the file that printed it
_FILE_HINT = re.compile(r"([\w./-]+\.(?:cc|cu|cpp|c|h|hpp|py|go|rs)):([0-9]+)")
# "NVRM: _threadNodeCheckTimeout: ..." (the driver's NV_PRINTF prefixes its function's name)
_FUNCTION_HINT = re.compile(r"\b([A-Za-z_]\w{5,}): ")


def _starts_message(text: str, at: int) -> bool:
    return _MESSAGE_START.search(text[max(0, at - 40) : at]) is not None or at == 0


@dataclass(frozen=True, slots=True)
class Match:
    site: Site
    info: ProjectInfo
    in_version: bool | None  # the log's version prints it (None: version unknown)


def version_key(text: str) -> tuple[Any, ...]:
    """Releases and log versions alike ('v2.21.5-1', '0.6.3.post1', '550.144.03') as comparable
    tuples of numbers: the tag's build suffix and any local part dropped."""
    text = text.strip().lstrip("v").split("+")[0]
    text = re.sub(r"-\d+$", "", text)
    nums = re.findall(r"\d+", text.split("rc")[0].split("dev")[0])
    return tuple(int(n) for n in nums[:4])


def prints_in(site: Site, info: ProjectInfo, version: str) -> bool | None:
    """Does the log's version print this site's message? From the two catalogued releases around it:
    False only when neither prints it (the message was not there, or was reworded, by then)."""
    key = version_key(version)
    if not key:
        return None
    releases = [(version_key(r), i) for i, r in enumerate(info.releases)]
    below = [i for k, i in releases if k <= key]
    above = [i for k, i in releases if k >= key]
    lo = below[-1] if below else None
    hi = above[0] if above else None
    if lo is None and hi is None:
        return None
    prints = [site.releases >> i & 1 == 1 for i in (lo, hi) if i is not None]
    return any(prints)


def best_match(store: CatalogStore, text: str, facts: dict[str, Any]) -> Match | None:
    """The most specific site whose template matches this line, or None."""
    line = normalise_line(text)
    runtime = RUNTIME_MESSAGES.search(line) is not None
    # the share a template covers is taken of the masked message: a long path or number in the
    # log is one token, not a reason to distrust the template around it
    body = mask(_EXC_PREFIX.sub("", line))
    hints = [h.lstrip("./") for h, _ in _FILE_HINT.findall(line)]
    functions = set(_FUNCTION_HINT.findall(line))
    found_class = _LINE_CLASS.search(line)
    line_class = found_class.group("cls") if found_class else None
    ranked: list[tuple[tuple[Any, ...], Match]] = []
    engine = facts.get("engine")
    for site in store.candidates(line, MIN_LITERAL):
        if site.literal < MIN_LITERAL or (runtime and site.project != RUNTIME_PROJECT):
            continue
        if engine in ENGINES and site.project in ENGINES and site.project != engine:
            continue  # a vLLM log is not printed by SGLang's source, nor the other way round
        if literal_span(site.template, line) is None:
            continue
        # the line names the function that printed it: the template need not cover the rest
        said = bool(functions) and site.function.rsplit(".", 1)[-1].split("::")[-1] in functions
        if site.literal < 40 and site.literal < MIN_COVERAGE * len(body) and not said:
            continue
        if (
            site.literal < 40
            and line_class
            and _CLASS_KIND.fullmatch(site.kind)
            and site.kind != line_class
        ):
            continue  # a short template raised as another class is another message
        info = store.projects.get(site.project)
        if info is None:
            continue
        version = facts.get(VERSION_FACTS.get(site.project, ""), "")
        in_version = prints_in(site, info, str(version)) if version else None
        newest = site.releases.bit_length()
        named = said or any(site.file == h or site.file.endswith("/" + h) for h in hints)
        agrees = site.kind == line_class or (site.kind.startswith("logger.") and not line_class)
        key = (site.literal, named, in_version is True, agrees, newest)
        ranked.append((key, Match(site, info, in_version)))
    if not ranked:
        return None
    ranked.sort(key=lambda kv: kv[0], reverse=True)
    top_key = ranked[0][0]
    tied = [m for k, m in ranked if k == top_key]
    tied.sort(key=lambda m: (m.site.project, m.site.file, m.site.function, m.site.kind))
    first = tied[0]
    # One template printed by several functions of one file (CPython's seven bytecode instructions
    # that raise "name '...' is not defined"), nothing in the line telling them apart: name them
    # all rather than pick one by its spelling.
    same = sorted(
        {
            m.site.function
            for m in tied
            if (m.site.project, m.site.file, m.site.template)
            == (first.site.project, first.site.file, first.site.template)
        }
    )
    if len(same) > 1:
        shown = same[:MAX_TIED_FUNCTIONS]
        more = len(same) - len(shown)
        names = ", ".join(shown) + (f" (+{more} more)" if more else "")
        return replace(first, site=replace(first.site, function=names))
    return first


MAX_TIED_FUNCTIONS = 8


def release_ranges(site: Site, info: ProjectInfo) -> str:
    """The catalogued releases that print it, as runs: '0.10.0-0.11.2' or '0.6.3, 0.9.2-0.10.0'."""
    return release_runs(
        info.releases, [bool(site.releases >> i & 1) for i in range(len(info.releases))]
    )


def release_runs(releases: Sequence[str], chosen: Sequence[bool]) -> str:
    """The chosen releases (oldest first) as runs of neighbours: '0.6.3, 0.9.2-0.10.0'."""
    runs: list[list[str]] = []
    prev = -2
    for i, rel in enumerate(releases):
        if chosen[i]:
            if i == prev + 1:
                runs[-1].append(rel)
            else:
                runs.append([rel])
            prev = i
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def hinted_release(site: Site, info: ProjectInfo, text: str) -> str | None:
    """The release whose line the log line names ("proxy.cc:1519" is line 1519 of proxy.cc in the
    release that printed it), when exactly one catalogued release has the message there."""
    lines = {
        int(n) for h, n in _FILE_HINT.findall(text) if site.file.endswith("/" + h.lstrip("./"))
    }
    found = [rel for rel, line in site.release_lines(info) if line in lines]
    return found[0] if len(found) == 1 else None


def pick_release(
    site: Site, info: ProjectInfo, version: str | None, hinted: str | None = None
) -> tuple[str, int]:
    """(release, line) for the link: the catalogued release nearest the log's version that prints
    it (at or below it first), else the one whose line the log names, else the newest."""
    pairs = site.release_lines(info)
    if not pairs:
        return "", 0
    if hinted and not version:
        return next(p for p in pairs if p[0] == hinted)
    if version:
        key = version_key(version)
        below = [p for p in pairs if version_key(p[0]) <= key]
        if below:
            return below[-1]
        return pairs[0]
    return pairs[-1]
