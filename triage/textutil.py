"""Text helpers shared by several stages: ANSI stripping and masking of variable tokens.

Everything here is linear-time (`re` over bytes/str with no nested quantifiers).
"""

from __future__ import annotations

import re
from functools import lru_cache

# Real escape sequences (CSI, OSC) and the ESC-less remnants that survive copy-paste into issues,
# e.g. "[1;36m(VllmWorker TP0 pid=931083)" or "[0;0m".
_ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\r\n]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]"
)
_ANSI_REMNANT_RE = re.compile(r"\[(?:[0-9]{1,3};)*[0-9]{1,3}m")


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences and ESC-less colour remnants."""
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    if "m" in text and "[" in text:
        text = _ANSI_REMNANT_RE.sub("", text)
    return text


# Masks for fingerprints, applied in order; each says why it exists.
_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    # keep-sorted start
    # hex addresses and pointers (0x7f..., fault addr ff3de000)
    (re.compile(r"0x[0-9a-fA-F]+"), "<HEX>"),
    # UUIDs (request ids, GPU UUIDs)
    (
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
        ),
        "<UUID>",
    ),
    # PCI bus ids (0000:3d:00.0, 3d:00.0)
    (re.compile(r"\b(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]\b"), "<PCI>"),
    # file system paths (site-packages differ per host and venv)
    (re.compile(r"(?:/[\w.+@-]+){2,}/?"), "<PATH>"),
    # long hex strings (hashes, commit ids)
    (re.compile(r"\b[0-9a-fA-F]{12,}\b"), "<HASH>"),
    # numbers, including decimals and sizes
    (re.compile(r"\b\d+(?:[.,]\d+)*\b"), "<N>"),
    # keep-sorted end
)
_SPACES_RE = re.compile(r"\s+")


@lru_cache(maxsize=1 << 14)  # a failing node repeats its messages on every rank: mask each once
def mask(text: str, limit: int = 400) -> str:
    """A fingerprint template: numbers, addresses, pids, paths masked; whitespace collapsed."""
    text = text[: limit * 4]
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    return _SPACES_RE.sub(" ", text).strip()[:limit].rstrip()


# Characters that must never reach a terminal from untrusted input: C0 controls except TAB,
# DEL, C1 controls, and bidi overrides / isolates (Trojan-source style reordering).
_UNSAFE_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def neutralise(text: str) -> str:
    """Make untrusted text safe to print: escape controls, C1 and bidi characters visibly."""
    text = strip_ansi(text)
    return _UNSAFE_RE.sub(
        lambda m: (
            f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}"
        ),
        text,
    )


# Bytes that do not occur in text logs: C0 controls other than tab, LF, VT, FF, CR and ESC, and DEL.
_NON_TEXT_BYTES = bytes(b for b in range(32) if b not in (9, 10, 11, 12, 13, 27)) + b"\x7f"
_NON_TEXT_TABLE = bytes.maketrans(_NON_TEXT_BYTES, b"\0" * len(_NON_TEXT_BYTES))
# journalctl's own marker lines, printed around (or instead of) entries: `-- No entries --`,
# `-- Logs begin at ... --`, `-- Journal begins at ... --`, `-- Boot 3f2a... --`, `-- Reboot --`.
_JOURNAL_MARKER_RE = re.compile(rb"^-- [^\n]{1,200} --\r?$", re.MULTILINE)


def looks_binary(sample: bytes) -> bool:
    """Whether the first bytes of an input are binary data rather than a log (grep and rg skip
    such files): more than 30% of its bytes neither text nor valid UTF-8. NUL bytes do not count
    either way: a log whose tail a crash filled with NULs is still scanned as text (the reader
    notes it), and a log with a few Latin-1 bytes stays text."""
    text = sample.replace(b"\0", b"")
    if not text:
        return False
    controls = text.translate(_NON_TEXT_TABLE).count(0)
    invalid = text.decode("utf-8", errors="replace").count("\ufffd")
    return (controls + invalid) * 10 > len(text) * 3


def only_journal_markers(data: bytes) -> bool:
    """Whether a (small) input holds nothing but journalctl's marker lines, `-- No entries --`
    among them: journalctl found no entry, so there is no log to triage."""
    lines = [line for line in data.splitlines() if line.strip()]
    return bool(lines) and all(_JOURNAL_MARKER_RE.match(line) for line in lines)
