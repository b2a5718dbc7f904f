"""User signature directories fail loudly (reliability audit F9, issue 17 point 7).

On main `kb build --signatures DIR` exited 0 when files failed, `triage --signatures DIR LOG`
dropped a broken signature without a word, an invalid regex ended the run with Hyperscan's
"pattern set does not compile", `(a+)+$` (rejected by `kb lint`) was compiled into the KB, and
`--engine re` hung on it with a 5 KB line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from triage.kb.load import load_signature_file, load_signatures

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "vllm-kv-cache-oom.log"
SHIPPED = ROOT / "signatures" / "engine" / "kv-cache-no-memory.yaml"


def _signature(sid: str, regex: str, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema_version": 1,
        "id": sid,
        "title": "A site signature under test",
        "layer": "engine",
        "severity": "error",
        "status": "open",
        "summary": "A user signature with one pattern.",
        "match": [{"regex": regex}],
        "fixes": [{"do": "nothing to do", "confidence": "lead"}],
        "provenance": {"reproduction": "tests/hostile/test_user_signatures.py"},
        "examples": {"match": ["ERROR aaa"], "no_match": ["INFO fine"]},
    }
    data.update(extra)
    return data


def _directory(tmp_path: Path, *bad: dict[str, Any]) -> Path:
    root = tmp_path / "site-signatures"
    (root / "engine").mkdir(parents=True)
    (root / "engine" / SHIPPED.name).write_bytes(SHIPPED.read_bytes())  # one good signature
    for data in bad:
        (root / "engine" / f"{data['id']}.yaml").write_text(yaml.safe_dump(data))
    return root


def _triage(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "triage", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )


BROKEN = {
    "typo-in-a-field": _signature("typo-in-a-field", "ERROR boom", severty="error"),
    "invalid-regex": _signature("invalid-regex", "ERROR (unclosed"),
    "backtracking-regex": _signature("backtracking-regex", "ERROR (a+)+$"),
}
# what the error must name besides the file: the field, and the pattern where one is at fault
NAMED = {
    "typo-in-a-field": ["severty"],
    "invalid-regex": ["match[0].regex", "'ERROR (unclosed'"],
    "backtracking-regex": ["match[0].regex", "'ERROR (a+)+$'"],
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_kb_build_fails_naming_the_file_and_field(tmp_path: Path, case: str) -> None:
    root = _directory(tmp_path, BROKEN[case])
    proc = _triage("kb", "build", "--signatures", str(root), "--kb", str(tmp_path / "kb.db"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    bad_lines = [x for x in proc.stderr.splitlines() if f"{case}.yaml" in x]
    assert bad_lines, proc.stderr
    for word in NAMED[case]:
        assert any(word in x for x in bad_lines), (word, proc.stderr)
    again = _triage("kb", "build", "--signatures", str(root), "--kb", str(tmp_path / "kb.db"))
    assert again.returncode == 2 and f"{case}.yaml" in again.stderr  # "up to date" is no way out


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_run_with_a_broken_site_signature_fails_loudly(tmp_path: Path, case: str) -> None:
    root = _directory(tmp_path, BROKEN[case])
    proc = _triage(
        "--no-history", "--signatures", str(root), "--kb", str(tmp_path / "kb.db"), str(EXAMPLE)
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "internal error" not in proc.stderr and "does not compile" not in proc.stderr
    assert any(f"{case}.yaml" in x for x in proc.stderr.splitlines()), proc.stderr
    for word in NAMED[case]:
        assert word in proc.stderr, (word, proc.stderr)


def test_a_clean_site_directory_still_runs(tmp_path: Path) -> None:
    root = _directory(tmp_path)
    proc = _triage(
        "--no-history", "--signatures", str(root), "--kb", str(tmp_path / "kb.db"), str(EXAMPLE)
    )
    assert proc.returncode == 1 and not proc.stderr, proc.stderr
    build = _triage("kb", "build", "--signatures", str(root), "--kb", str(tmp_path / "kb2.db"))
    assert build.returncode == 0, build.stderr


@pytest.mark.parametrize("pattern", ["ERROR (a+)+$", r"^(\w+\s?)*$", "(x+x+)+y", "(unclosed"])
def test_every_loading_path_rejects_what_lint_rejects(tmp_path: Path, pattern: str) -> None:
    root = tmp_path / "sigs"
    (root / "engine").mkdir(parents=True)
    path = root / "engine" / "probe.yaml"
    path.write_text(yaml.safe_dump(_signature("probe", pattern)))
    sig, errors = load_signature_file(path)
    assert sig is None and errors and errors[0].field == "match[0].regex"
    result = load_signatures(root)
    assert not result.signatures and result.errors


def test_the_re_engine_cannot_hang_on_a_backtracking_pattern() -> None:
    """The `re` scanner on a backtracking pattern and a 5 KB line: bounded by its timeouts (on
    main `(a+)+$` ran past 60 s; `(a|aa)+$` backtracks in the `regex` module too). Run in a
    child so that a regression fails instead of hanging the suite."""
    script = (
        "from triage.scanners import ReScanner\n"
        "data = b'INFO ok\\nERROR ' + b'a' * 5000 + b'!\\nERROR aaa\\n'\n"
        "s = ReScanner([r'ERROR (a|aa)+$', r'INFO ok'])\n"
        "hits = s.scan(data)\n"
        "print(sorted(p for _, p in hits), s.timeouts)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
        check=True,
    )
    # the hostile line timed out and was passed over; the line after it still matched
    assert proc.stdout.split() == ["[0,", "1]", "1"], proc.stdout


def test_hyperscan_names_a_pattern_it_cannot_compile() -> None:
    from triage.scanners import _compile_with_prefilter

    def compile_set(batch: list[bytes], flags: list[int]) -> object | None:
        return None if any(b"\\1" in e for e in batch) else object()

    with pytest.raises(RuntimeError, match=r"cannot compile these patterns.*\(a\)\\\\1"):
        _compile_with_prefilter([b"ok", b"(a)\\1"], compile_set)
