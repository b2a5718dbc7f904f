"""Blank users' words out of request-log lines before any pattern is confirmed on them.

Serving engines can log every request's prompt and every generated answer: vLLM with
`--enable-log-requests` (`Received request <id>: prompt: '...'`; later releases moved the prompt to
a DEBUG line, `Request <id> details: prompt: '...'`) and `--enable-log-outputs` (`Generated
response <id>: output: '...'`), SGLang with `--log-requests` (`Receive: obj=GenerateReqInput(...)`,
`Finish: obj=...`).
Those texts are what users sent and what the model wrote: a user who pastes "CUDA out of memory"
into a chat is not a server out of memory, and a healthy server must stay silent. They are also
private, so reports and bot comments should not quote them.

Two places keep those texts out: `elide_user_text` on every candidate line before confirmation
(see `triage.frame`; its cost is per candidate line), and `hide_user_text` on each segment before
the pattern scan, which blanks the same texts with the C helper `triage._userblank` (when it was
built: `triage --version` says) so that the scanner does not spend its time in them.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Callable
from typing import Any

from triage.read import Text, TextWindow

# vLLM's request logger: the prompt or output is a Python repr (`%r`) right after the marker.
_VLLM_MARKER = (
    r"(?:Received request \S+: prompt: |Request \S+ details: prompt: "
    r"|Generated response \S+(?: \(streaming (?:delta|complete)\))?: output: )(?=['\"])"
)
# SGLang's request logger: a dataclass dump of the request (and of the answer, on Finish).
_SGLANG_MARKER = r"\b(?:Receive|Receive OpenAI|Finish): obj="
_MARKER = re.compile(f"(?P<vllm>{_VLLM_MARKER})|{_SGLANG_MARKER}")
_CHEAP_PROBES = ("prompt: ", "output: ", "obj=")

# Segments larger than this are scanned as they are (a copy of a huge single line is not worth
# its memory); blanking is an optimisation, never needed for a correct report.
MAX_BLANKED_SEGMENT = 64 << 20


def elide_user_text(text: str) -> str:
    """The line with each logged prompt, output or request dump replaced by a placeholder that
    says how many characters were left out; any other line unchanged.

    Markers are taken left to right: a vLLM marker elides the string literal after it, an SGLang
    marker the rest of the line; a marker inside text already elided was quoted by a user and
    is not one. `triage._userblank` applies the same rules to raw bytes before the scan."""
    if "prompt: " not in text and "output: " not in text and "obj=" not in text:
        return text  # _CHEAP_PROBES, spelled out: this runs on every candidate line
    out: list[str] = []
    pos = 0
    for marker in _MARKER.finditer(text):
        if marker.start() < pos:
            continue  # a marker quoted inside text already elided
        if marker.group("vllm") is None:  # SGLang: the dump runs to the end of the line
            out.append(text[pos : marker.end()])
            out.append(f"<request elided: {len(text) - marker.end()} chars>")
            pos = len(text)
            break
        quote = marker.end()
        end = _repr_end(text, quote)
        out.append(text[pos:quote])
        out.append(f"<user text elided: {end - quote} chars>")
        pos = end
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def _repr_end(text: str, quote: int) -> int:
    """Offset just past the Python string literal that opens at `quote`: the first unescaped
    closing quote (a repr escapes its own quote character), or the end of a truncated line."""
    mark = text[quote]
    pos = quote + 1
    while True:
        found = text.find(mark, pos)
        if found < 0:
            return len(text)
        backslashes = 0
        back = found - 1
        while back > quote and text[back] == "\\":
            backslashes += 1
            back -= 1
        if backslashes % 2 == 0:
            return found + 1
        pos = found + 1


# One copy buffer per thread (`--follow` scans several inputs at once, each on its thread).
_per_thread = threading.local()


def hide_user_text(data: Text) -> Text:
    """The segment as the pattern scanner should see it: a copy with the bodies of logged prompts,
    outputs and request dumps overwritten by spaces (same length, same line breaks), or the
    segment itself when it holds none or the C helper is not built.

    Confirmation never sees those texts (`elide_user_text`), so a scanner hit inside them is
    wasted work; on a busy server's log with request logging they are about a third of the bytes
    and the most expensive ones to scan (docs/performance.md). The copy lives in a buffer reused
    from segment to segment by the calling thread: scan it before asking for the next."""
    blank = _blanker()
    if blank is None or not 0 < len(data) <= MAX_BLANKED_SEGMENT:
        return data
    scratch: bytearray | None = getattr(_per_thread, "scratch", None)
    if scratch is None or len(scratch) < len(data):
        scratch = _per_thread.scratch = bytearray(max(len(data), 1 << 20))
    source = data.view() if isinstance(data, TextWindow) else data
    if blank(source, scratch) == 0:
        return data
    return TextWindow(scratch, 0, len(data))


def blanking() -> str:
    """How user text is kept from the scanner, for `triage --version`."""
    if _blanker() is not None:
        return "blanked before the scan (C helper)"
    if os.environ.get("TRIAGE_NO_BLANK"):
        return "elided on candidate lines only (TRIAGE_NO_BLANK)"
    return "elided on candidate lines only (C helper not built)"


@functools.cache
def _blanker() -> Callable[[Any, bytearray], int] | None:
    if os.environ.get("TRIAGE_NO_BLANK"):
        return None
    try:
        from triage._userblank import blank_user_text
    except ImportError:
        return None
    return blank_user_text
