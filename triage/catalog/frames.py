"""Locate a line by its traceback when no template explains it.

A bare exception line (`AssertionError`, a `TypeError` of the runtime) by the innermost frame
before it in the same process stream; a traceback's own lines (an ERROR record of a cut traceback
shows a frame, a source line or its `^^^^` markers as its first line) by the frame they show or
follow. The frame names file, line and function; the catalog confirms the file and says which
releases ship it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from triage.catalog.store import CatalogStore

# The scan pattern the facade adds (one hit per traceback frame line), and its parse: Python's
# own frame line, and IPython's and Jupyter's (`File /path/x.py:123, in func(args)`).
FRAME_PATTERN = r'File "[^"\n]{1,400}", line [0-9]+, in |File [^"\s][^\n]{0,400}?\.py:[0-9]+, in '
_FRAME_RES = (
    re.compile(r'File "(?P<path>[^"\n]{1,400})", line (?P<line>[0-9]+), in (?P<func>[\w<>.]+)'),
    re.compile(r'File (?P<path>[^"\s][^\n]{0,400}?\.py):(?P<line>[0-9]+), in (?P<func>[\w<>.]+)'),
)


@dataclass(frozen=True, slots=True)
class Frame:
    """One traceback frame as a frame line shows it."""

    path: str
    line: int
    func: str


def _parse(text: str) -> Frame | None:
    for pattern in _FRAME_RES:
        found = pattern.search(text)
        if found:
            return Frame(found.group("path"), int(found.group("line")), found.group("func"))
    return None


_EXCEPTION_RE = re.compile(r"(?:^|[\s:])(?P<cls>[A-Za-z_][\w.]*(?:Error|Exception))(?::|$)")
MAX_DISTANCE = 200  # lines between the innermost frame and the exception line
CODE_DISTANCE = 3  # a source line follows its frame line, its ^^^^ markers follow it
CUT_FRAME_GAP = 6  # frame lines of one traceback: a frame, its source, markers, a chained note
# IPython prints each frame with lines of source context around its line (and a notebook's
# `Cell In[3], line 5` first): its frame lines are farther apart
IPYTHON_FRAME_GAP = 20
_MARKERS = re.compile(r"^[\^~\s]+$")
_HEADER_INDENT = re.compile(r"\] {5,}(\S.*)$")
_RAISE = re.compile(r"^raise (?P<cls>[A-Za-z_][\w.]*)\(")


@dataclass(frozen=True, slots=True)
class FrameSite:
    project: str
    file: str
    function: str
    line: int  # the line in the log's installed copy
    releases: int  # catalogued releases whose file defines the function (else: ship the file)
    exception: str
    defined: bool | None = None  # the function is defined in a catalogued release of the file
    # (None: the catalog has no function index)


def exception_class(text: str) -> str | None:
    found = _EXCEPTION_RE.search(text)
    return found.group("cls") if found else None


def innermost_frame(
    frames: Sequence[tuple[str, int, str]], stream: str, number: int
) -> Frame | None:
    """The last frame line of this stream before line `number` (frames: (stream, line, text))."""
    best: tuple[int, str] | None = None
    for key, line, text in frames:
        inside = key == stream and number - MAX_DISTANCE <= line < number
        if inside and (best is None or line > best[0]):
            best = (line, text)
    return _parse(best[1]) if best else None


def chain_after(
    frames: Sequence[tuple[str, int, str]],
    stream: str,
    bare: str,
    number: int,
    stops: Sequence[tuple[str, int, str]] = (),
) -> list[Frame]:
    """The frames of the traceback that continues below line `number` (its 'Traceback (most
    recent call last):' line, or a source line at the top of a cut one), innermost first: the
    frame lines that follow it in its stream, each within CUT_FRAME_GAP lines of the one before
    (a frame, its source line and ^^^^ markers), up to the first exception line of `stops`
    (the traceback ends there: frames after it are another traceback's)."""
    ends = sorted(line for key, line, _ in stops if key in (stream, bare) and line > number)
    following = sorted(
        (line, text) for key, line, text in frames if key in (stream, bare) and line > number
    )
    chain: list[str] = []
    previous = number
    for line, text in following:
        gap = CUT_FRAME_GAP if 'File "' in text else IPYTHON_FRAME_GAP
        if line - previous > gap or (ends and ends[0] < line):
            break
        chain.append(text)
        previous = line
    parsed = (_parse(text) for text in reversed(chain))
    return [frame for frame in parsed if frame is not None]


def chain_before(
    frames: Sequence[tuple[str, int, str]], stream: str, bare: str, number: int
) -> list[tuple[int, Frame]]:
    """The frames of the traceback that ends at line `number` (its exception line), outermost
    first: the frame lines before it in its stream (or the input's unprefixed stream), each within
    CUT_FRAME_GAP lines of the next (the innermost of the exception line)."""
    before = sorted(
        ((line, text) for key, line, text in frames if key in (stream, bare) and line < number),
        reverse=True,
    )
    chain: list[tuple[int, Frame]] = []
    following = number
    for line, text in before:
        if following - line > CUT_FRAME_GAP:
            break
        frame = _parse(text)
        if frame is not None:
            chain.append((line, frame))
        following = line
    chain.reverse()
    return chain


def own_frame(text: str) -> Frame | None:
    """The frame a traceback frame line shows (`File "...", line N, in f`)."""
    return _parse(text)


def is_source_line(raw: str, message: str) -> bool:
    """A traceback's source line (indented by four or more: its frame line is indented by two) or
    its ^^^^ position markers."""
    body = message.strip()
    if not body or own_frame(body):
        return False
    if _MARKERS.fullmatch(body):
        return "^" in body
    at = raw.rfind(body)
    if at >= 4 and raw[:at].endswith("    "):
        return True
    # a log header the reader did not take apart (`[vllm]: (Worker pid=9) ERROR ... x.py:226]`):
    # its `]`, the one space after it, then the indent of four
    inside = _HEADER_INDENT.search(body)
    return inside is not None and own_frame(inside.group(1)) is None


def raised_class(message: str) -> str | None:
    """`raise ValueError(` -> "ValueError" (the class the next exception line names)."""
    found = _RAISE.match(message.strip())
    return found.group("cls").rsplit(".", 1)[-1] if found else None


def frame_above(
    frames: Sequence[tuple[str, int, str]], stream: str, bare: str, number: int
) -> Frame | None:
    """The frame line a source line belongs to: at most CODE_DISTANCE lines above it, in its own
    stream or in a stream with no process prefix of the same input (an excerpt that begins in the
    middle of a record loses the frame line's prefix: `bare`)."""
    best: tuple[int, str] | None = None
    for key, line, text in frames:
        near = number - CODE_DISTANCE <= line < number
        if near and key in (stream, bare) and (best is None or line > best[0]):
            best = (line, text)
    return _parse(best[1]) if best else None


def locate_frame(store: CatalogStore, frame: Frame, exception: str) -> FrameSite | None:
    """The catalogued file the frame's path ends with (site-packages, a checkout: any prefix)."""
    parts = frame.path.replace("\\", "/").split("/")
    suffixes = ["/".join(parts[i:]) for i in range(len(parts)) if parts[i]]
    if not suffixes:
        return None
    found = store.files_ending(suffixes)
    if found is None:
        return None
    project, file, releases = found
    function = frame.func
    defined: bool | None = None
    index = store.functions_of(project, file)
    if index is not None:
        # a frame shows the code object's name: the last part of a dotted qualname
        mask = index.get(function.rsplit(".", 1)[-1], None)
        defined = mask is not None or function.startswith("<")
        if mask is not None:
            releases = mask if mask >= 0 else releases
    return FrameSite(project, file, function, frame.line, releases, exception, defined)
