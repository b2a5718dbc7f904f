"""Terminal injection: escape sequences, C0/C1 controls and bidi overrides in a log never reach the
terminal raw, whatever the output format; JSON keeps them, escaped by JSON.

The log's failure line carries every payload, so the payloads travel through the evidence path
(matched line), the unrecognized-line path and the input name.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# (name, payload). Each is what a hostile log line could carry.
PAYLOADS: tuple[tuple[str, str], ...] = (
    ("osc-title-bel", "\x1b]0;pwned-title\x07"),
    ("osc-title-st", "\x1b]2;pwned-title\x1b\\"),
    ("csi-clear-home", "\x1b[2J\x1b[H"),
    ("csi-cursor-moves", "\x1b[5A\x1b[10C\x1b[s\x1b[u\x1b[?25l"),
    ("csi-sgr-conceal", "\x1b[8mhidden\x1b[0m"),
    ("c1-csi-8bit", "\x9b2J\x9b31m"),
    ("c1-controls", "\x85\x8d\x90\x9d\x9c\x9e\x9f"),
    ("bidi-overrides", "\u202eevil\u202c\u202dx\u202c"),
    ("bidi-isolates", "\u2066\u2067\u2068\u2069\u200e\u200f"),
    ("bel", "\x07\x07"),
    ("backspaces", "abc\x08\x08\x08xyz"),
    ("nul", "a\x00b"),
    ("del", "a\x7fb"),
    ("vt-ff", "a\x0bb\x0cc"),
    ("osc8-hyperlink", "\x1b]8;;https://evil.example/\x1b\\click-me\x1b]8;;\x1b\\"),
    ("dcs-apc", "\x1bPq#0;2;0;0;0\x1b\\\x1b_apc\x1b\\"),
    ("rich-markup-link", "[link=https://evil.example/]markup-link[/link]"),
    ("rich-markup-style", "[bold red on white]styled[/]"),
)

FAILURE = "RuntimeError: CUDA error: an illegal memory access was encountered"
UNRECOGNIZED = "ERROR 10-25 13:08:43 [core.py:708] Weird unknown failure in frobnicator:"

# what must never reach a terminal: C0 except TAB/LF, DEL, C1, bidi controls
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SGR = re.compile(r"\x1b\[[0-9;]*m")  # the colour sequences rich itself emits with --color


def _log(tmp_path: Path) -> Path:
    lines = ["INFO 10-25 13:08:40 [api_server.py:1880] Started server process"]
    # two payloads per line: every line fits the evidence shown (12 lines of 300 characters)
    for i in range(0, len(PAYLOADS), 2):
        carried = " ".join(f"{name}:{payload}:end" for name, payload in PAYLOADS[i : i + 2])
        lines.append(f"{FAILURE} {carried}")
        lines.append(f"{UNRECOGNIZED} {carried}")
    path = tmp_path / "evil\u202egol.txt\u2066.log"
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8"))
    return path


def _triage(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env["TRIAGE_DB"] = str(tmp_path / "history.db")
    env["COLUMNS"] = "110"
    return subprocess.run(
        [sys.executable, "-m", "triage", "--no-history", *args, str(_log(tmp_path))],
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )


def _assert_clean(text: str, *, sgr_allowed: bool) -> None:
    if sgr_allowed:
        text = _SGR.sub("", text)
    assert "\x1b" not in text, repr(text[max(0, text.find("\x1b") - 60) : text.find("\x1b") + 60])
    bad = sorted({hex(ord(c)) for c in _UNSAFE.findall(text)})
    assert not bad, f"raw control characters in the output: {bad}"
    assert "\x1b]8" not in text and "]8;;" not in text  # no hyperlink of any kind
    assert "pwned-title" not in text  # OSC payloads are removed, not shown as titles


@pytest.fixture(scope="module")
def outputs(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, subprocess.CompletedProcess[bytes]]:
    runs = {
        "text-color": ("--color",),
        "text-no-color": ("--no-color",),
        "markdown": ("--format", "markdown"),
        "json": ("--format", "json"),
    }
    return {k: _triage(tmp_path_factory.mktemp(k), *v) for k, v in runs.items()}


@pytest.mark.parametrize("kind", ["text-color", "text-no-color", "markdown"])
def test_no_payload_reaches_the_terminal(
    outputs: dict[str, subprocess.CompletedProcess[bytes]], kind: str
) -> None:
    proc = outputs[kind]
    assert proc.returncode == 1, proc.stderr.decode(errors="replace")
    text = proc.stdout.decode("utf-8")
    assert "illegal memory access" in text  # the failure itself is still reported
    _assert_clean(text, sgr_allowed=kind == "text-color")
    _assert_clean(proc.stderr.decode("utf-8"), sgr_allowed=False)


def test_color_output_is_coloured(outputs: dict[str, subprocess.CompletedProcess[bytes]]) -> None:
    assert _SGR.search(outputs["text-color"].stdout.decode())
    assert "\x1b" not in outputs["text-no-color"].stdout.decode()


@pytest.mark.parametrize("kind", ["text-color", "text-no-color"])
def test_rich_markup_in_the_log_is_printed_not_interpreted(
    outputs: dict[str, subprocess.CompletedProcess[bytes]], kind: str
) -> None:
    text = _SGR.sub("", outputs[kind].stdout.decode())
    assert "[link=https://evil.example/]markup-link[/link]" in text
    assert "[bold red on white]styled[/]" in text


def test_evidence_is_shown_for_every_payload_line(
    outputs: dict[str, subprocess.CompletedProcess[bytes]],
) -> None:
    text = outputs["text-no-color"].stdout.decode()
    missing = [name for name, _ in PAYLOADS if f"{name}:" not in text]
    assert not missing, f"payload lines not shown as evidence: {missing}"


def test_json_is_valid_and_lossless(outputs: dict[str, subprocess.CompletedProcess[bytes]]) -> None:
    proc = outputs["json"]
    raw = proc.stdout.decode("utf-8")
    data = json.loads(raw)
    texts = [ev["text"] for h in data["hypotheses"] for ev in h["evidence"]]
    texts += [u["text"] for u in data["unrecognized"]]
    joined = "\n".join(texts)
    # escape sequences are stripped when the input is read; the other controls survive as data
    assert "\x1b" not in joined
    assert "\u202e" in joined or "\x9b" in joined or "\x07" in joined
    # JSON itself escapes C0 controls
    assert not re.search("[\x00-\x08\x0b-\x1f]", raw)


def test_json_escapes_c1_and_bidi(outputs: dict[str, subprocess.CompletedProcess[bytes]]) -> None:
    raw = outputs["json"].stdout.decode("utf-8")
    bad = sorted({hex(ord(c)) for c in _UNSAFE.findall(raw)})
    assert not bad, f"raw characters in the JSON text: {bad}"
