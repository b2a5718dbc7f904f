"""Cut the evidence a model may read: windows of lines around the report's salient lines.

Salient lines are the unrecognized failure lines first (what the knowledge base could not
explain), then the decisive lines of the best hypotheses. Each window keeps the lines before a
salient line (causes are logged above their symptoms) and a few after. Every line is cleaned
before it can be sent: ANSI colour stripped, logged prompts and outputs elided
(`triage.usertext`), secrets redacted (`triage.redact.redact`), controls escaped, and cut to
`MAX_LINE_CHARS`. The windows together stay under `MAX_EVIDENCE_BYTES`: the salient line of
each window goes in first, context lines only while the budget lasts.

The exact text of each line as sent is kept, with its input and number, so that an answer's
citations can be checked against what the model saw and nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from triage.models import Report
from triage.read import InputError, read_source
from triage.redact import redact, redact_lines
from triage.textutil import neutralise
from triage.usertext import elide_user_text

BEFORE = 12  # context lines above a salient line
AFTER = 3  # and below it
MAX_SALIENT = 8  # windows at most
MAX_LINE_CHARS = 400
MAX_EVIDENCE_BYTES = 12 << 10

_BREAKS = re.compile(rb"\r\n|\n|\r")


@dataclass(frozen=True)
class Salient:
    input: str
    line: int
    text: str  # the report's text of the line: used when the input cannot be read again
    why: str  # "unrecognized" or the signature whose decisive line it is


@dataclass
class Window:
    input: str
    salient: list[int]
    lines: dict[int, str] = field(default_factory=dict)  # number -> text as sent


@dataclass
class Evidence:
    windows: list[Window]

    def sent_line(self, input_name: str, number: int) -> str | None:
        for window in self.windows:
            if window.input == input_name and number in window.lines:
                return window.lines[number]
        return None

    def inputs(self) -> list[str]:
        return list(dict.fromkeys(w.input for w in self.windows))

    def render(self) -> str:
        """The evidence block of the prompt: one header per window, `number| text` lines."""
        out: list[str] = []
        for i, window in enumerate(self.windows, start=1):
            numbers = sorted(window.lines)
            out.append(f"--- window {i}: {window.input}, lines {numbers[0]}-{numbers[-1]} ---")
            for n in numbers:
                mark = ">" if n in window.salient else " "
                out.append(f"{mark}{n}| {window.lines[n]}")
        return "\n".join(out)


def clean(text: str) -> str:
    """A log line as it may leave the machine (see the module docstring)."""
    text = neutralise(redact(elide_user_text(text)))
    return text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 1] + "…"


def _redact_runs(lines: dict[int, str]) -> dict[int, str]:
    """Redact each run of consecutive lines together: a PEM key spans several lines, and each of
    its body lines alone is only base64 that no single-line rule can tell from image data."""
    out: dict[int, str] = {}
    run: list[int] = []
    for number in [*sorted(lines), None]:
        if run and (number is None or number != run[-1] + 1):
            out.update(zip(run, redact_lines([lines[n] for n in run]), strict=True))
            run = []
        if number is not None:
            run.append(number)
    return out


def salient_lines(report: Report, limit: int = MAX_SALIENT) -> list[Salient]:
    out: list[Salient] = [
        Salient(u.input, u.line, u.text, "unrecognized") for u in report.unrecognized
    ]
    for hyp in report.hypotheses:  # located by the catalog: no curated signature explains them
        if hyp.basis == "located":
            out.extend(Salient(e.input, e.line, e.text, "unrecognized") for e in hyp.evidence[:1])
    for hyp in report.hypotheses[:3]:
        decisive = [e for e in hyp.evidence if e.role == "decisive"][:2]
        out.extend(Salient(e.input, e.line, e.text, hyp.signature) for e in decisive)
    seen: set[tuple[str, int]] = set()
    unique = []
    for s in out:
        if (s.input, s.line) not in seen:
            seen.add((s.input, s.line))
            unique.append(s)
    return unique[:limit]


def collect(
    report: Report,
    paths: dict[str, Path],
    *,
    max_bytes: int = MAX_EVIDENCE_BYTES,
    max_decompressed: int = 4096 << 20,
) -> Evidence:
    """The evidence windows of a report; `paths` maps input names to files that can be read
    again (an input without one contributes its salient lines only, as the report quoted them)."""
    salient = salient_lines(report)
    wanted: dict[str, set[int]] = {}
    for s in salient:
        lo = max(1, s.line - BEFORE)
        wanted.setdefault(s.input, set()).update(range(lo, s.line + AFTER + 1))
    texts: dict[str, dict[int, str]] = {}
    for name, numbers in wanted.items():
        path = paths.get(name)
        texts[name] = _redact_runs(
            _read_lines(name, path, numbers, max_decompressed) if path else {}
        )
    windows: list[Window] = []
    budget = max_bytes
    # Salient lines first, each into its window (a window per salient line unless they overlap).
    for s in salient:
        line = clean(texts[s.input].get(s.line, s.text))
        cost = len(line.encode()) + 8
        if cost > budget:
            break
        budget -= cost
        window = next(
            (w for w in windows if w.input == s.input and _near(w, s.line)),
            None,
        )
        if window is None:
            window = Window(s.input, [])
            windows.append(window)
        window.salient.append(s.line)
        window.lines[s.line] = line
    # Then context, nearest lines first, while the budget lasts.
    for number, window, name in _context_order(windows):
        raw = texts[name].get(number)
        if raw is None or number in window.lines:
            continue
        line = clean(raw)
        cost = len(line.encode()) + 8
        if cost > budget:
            continue
        budget -= cost
        window.lines[number] = line
    return Evidence([w for w in windows if w.lines])


def _near(window: Window, line: int) -> bool:
    return any(abs(line - s) <= BEFORE + AFTER for s in window.salient)


def _context_order(windows: Sequence[Window]) -> Iterable[tuple[int, Window, str]]:
    # By distance, a line above before the line as far below (a cause precedes its symptom).
    order = [
        (abs(n - s) * 2 + (n > s), n, window)
        for window in windows
        for s in window.salient
        for n in range(max(1, s - BEFORE), s + AFTER + 1)
    ]
    order.sort(key=lambda x: (x[0], x[1]))
    return ((n, w, w.input) for _, n, w in order)


def _read_lines(name: str, path: Path, numbers: set[int], max_decompressed: int) -> dict[int, str]:
    """The wanted lines of one input, numbered as the engine numbered them."""
    if not numbers:
        return {}
    last = max(numbers)
    out: dict[int, str] = {}
    try:
        _, segments = read_source(name, path, max_decompressed=max_decompressed)
        for seg in segments:
            if seg.first_line > last:
                break
            data = bytes(seg.data)
            parts = _BREAKS.split(data)
            if parts and parts[-1] == b"":
                parts.pop()
            for i, raw in enumerate(parts):
                n = seg.first_line + i
                if n in numbers:
                    out[n] = raw.decode("utf-8", "replace")
            if seg.first_line + len(parts) > last:
                break
    except (InputError, OSError):
        return out
    return out
