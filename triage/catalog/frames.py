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

# The scan pattern the facade adds (one hit per traceback frame line), and its parse.
FRAME_PATTERN = r'File "[^"\n]{1,400}", line [0-9]+, in '
_FRAME_RE = re.compile(
    r'File "(?P<path>[^"\n]{1,400})", line (?P<line>[0-9]+), in (?P<func>[\w<>.]+)'
)
_EXCEPTION_RE = re.compile(r"(?:^|[\s:])(?P<cls>[A-Za-z_][\w.]*(?:Error|Exception))(?::|$)")
MAX_DISTANCE = 200  # lines between the innermost frame and the exception line
CODE_DISTANCE = 3  # a source line follows its frame line, its ^^^^ markers follow it
CUT_FRAME_GAP = 6  # frame lines of one traceback: a frame, its source, markers, a chained note
_MARKERS = re.compile(r"^[\^~\s]+$")
_RAISE = re.compile(r"^raise (?P<cls>[A-Za-z_][\w.]*)\(")


@dataclass(frozen=True, slots=True)
class FrameSite:
    project: str
    file: str
    function: str
    line: int  # the line in the log's installed copy
    releases: int  # catalogued releases that ship the file (bit mask)
    exception: str


def exception_class(text: str) -> str | None:
    found = _EXCEPTION_RE.search(text)
    return found.group("cls") if found else None


def innermost_frame(
    frames: Sequence[tuple[str, int, str]], stream: str, number: int
) -> re.Match[str] | None:
    """The last frame line of this stream before line `number` (frames: (stream, line, text))."""
    best: tuple[int, str] | None = None
    for key, line, text in frames:
        inside = key == stream and number - MAX_DISTANCE <= line < number
        if inside and (best is None or line > best[0]):
            best = (line, text)
    return _FRAME_RE.search(best[1]) if best else None


def innermost_after(
    frames: Sequence[tuple[str, int, str]], stream: str, bare: str, number: int
) -> re.Match[str] | None:
    """The innermost frame of the traceback that starts at line `number` (its 'Traceback (most
    recent call last):' line): the last of the frame lines that follow it in its stream, each
    within CUT_FRAME_GAP lines of the one before (a frame, its source line and ^^^^ markers)."""
    following = sorted(
        (line, text) for key, line, text in frames if key in (stream, bare) and line > number
    )
    last: tuple[int, str] | None = None
    previous = number
    for line, text in following:
        if line - previous > CUT_FRAME_GAP:
            break
        last, previous = (line, text), line
    return _FRAME_RE.search(last[1]) if last else None


def own_frame(text: str) -> re.Match[str] | None:
    """The frame a traceback frame line shows (`File "...", line N, in f`)."""
    return _FRAME_RE.search(text)


def is_source_line(raw: str, message: str) -> bool:
    """A traceback's source line (indented by four or more: its frame line is indented by two) or
    its ^^^^ position markers."""
    body = message.strip()
    if not body or own_frame(body):
        return False
    if _MARKERS.fullmatch(body):
        return "^" in body
    at = raw.rfind(body)
    return at >= 4 and raw[:at].endswith("    ")


def raised_class(message: str) -> str | None:
    """`raise ValueError(` -> "ValueError" (the class the next exception line names)."""
    found = _RAISE.match(message.strip())
    return found.group("cls").rsplit(".", 1)[-1] if found else None


def frame_above(
    frames: Sequence[tuple[str, int, str]], stream: str, bare: str, number: int
) -> re.Match[str] | None:
    """The frame line a source line belongs to: at most CODE_DISTANCE lines above it, in its own
    stream or in a stream with no process prefix of the same input (an excerpt that begins in the
    middle of a record loses the frame line's prefix: `bare`)."""
    best: tuple[int, str] | None = None
    for key, line, text in frames:
        near = number - CODE_DISTANCE <= line < number
        if near and key in (stream, bare) and (best is None or line > best[0]):
            best = (line, text)
    return _FRAME_RE.search(best[1]) if best else None


def locate_frame(store: CatalogStore, frame: re.Match[str], exception: str) -> FrameSite | None:
    """The catalogued file the frame's path ends with (site-packages, a checkout: any prefix)."""
    parts = frame.group("path").replace("\\", "/").split("/")
    suffixes = ["/".join(parts[i:]) for i in range(len(parts)) if parts[i]]
    if not suffixes:
        return None
    found = store.files_ending(suffixes)
    if found is None:
        return None
    project, file, releases = found
    return FrameSite(
        project, file, frame.group("func"), int(frame.group("line")), releases, exception
    )
