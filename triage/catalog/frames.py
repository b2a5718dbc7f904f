"""Locate an exception line by its traceback when no template explains it: a bare
`AssertionError`, a `TypeError` of the runtime. The innermost frame before the line (same process
stream) names file, line and function; the catalog confirms the file and says which releases
ship it.
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
