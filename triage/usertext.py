"""Blank users' words out of request-log lines before any pattern is confirmed on them.

Serving engines can log every request's prompt and every generated answer: vLLM with
`--enable-log-requests` (`Received request <id>: prompt: '...'`; later releases moved the prompt to
a DEBUG line, `Request <id> details: prompt: '...'`) and `--enable-log-outputs` (`Generated
response <id>: output: '...'`), SGLang with `--log-requests` (`Receive: obj=GenerateReqInput(...)`,
`Finish: obj=...`).
Those texts are what users sent and what the model wrote: a user who pastes "CUDA out of memory"
into a chat is not a server out of memory, and a healthy server must stay silent. They are also
private, so reports and bot comments should not quote them.

Only candidate lines reach this module (see `triage.frame`), so its cost is per candidate line.
"""

from __future__ import annotations

import re

# vLLM's request logger: the prompt or output is a Python repr (`%r`) right after the marker.
_VLLM_MARKER = re.compile(
    r"(?:Received request \S+: prompt: |Request \S+ details: prompt: "
    r"|Generated response \S+(?: \(streaming (?:delta|complete)\))?: output: )(?=['\"])"
)
# SGLang's request logger: a dataclass dump of the request (and of the answer, on Finish).
_SGLANG_MARKER = re.compile(r"\b(?:Receive|Receive OpenAI|Finish): obj=")
_CHEAP_PROBES = ("prompt: ", "output: ", "obj=")


def elide_user_text(text: str) -> str:
    """The line with each logged prompt, output or request dump replaced by a placeholder that
    says how many characters were left out; any other line unchanged."""
    if not any(probe in text for probe in _CHEAP_PROBES):
        return text
    sglang = _SGLANG_MARKER.search(text)
    if sglang is not None:
        left = len(text) - sglang.end()
        return f"{text[: sglang.end()]}<request elided: {left} chars>"
    out: list[str] = []
    pos = 0
    for marker in _VLLM_MARKER.finditer(text):
        if marker.start() < pos:
            continue  # a marker quoted inside a prompt already elided
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
