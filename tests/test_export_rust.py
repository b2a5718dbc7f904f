"""`kb export-patterns` (rust dialect) must be accepted by `rg --no-unicode` and match the same lines."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from triage.kb.export import to_ere, to_rust

# A real pattern of the knowledge base with a non-ASCII literal (DeepSeek's fullwidth bar).
PATTERN = "KeyError: '｜'"


def test_non_ascii_literal_becomes_utf8_byte_escapes() -> None:
    assert to_rust(PATTERN) == r"KeyError: '\xEF\xBD\x9C'"
    assert to_ere(PATTERN) == PATTERN  # GNU grep in the C locale compares the bytes themselves


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep not installed")
def test_ripgrep_without_unicode_accepts_and_matches(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("KeyError: '｜'\nKeyError: '|'\n", encoding="utf-8")
    out = subprocess.run(
        ["rg", "-a", "-n", "--no-unicode", "-e", to_rust(PATTERN), str(log)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.splitlines() == ["1:KeyError: '｜'"]  # the ASCII bar (near miss) does not match
