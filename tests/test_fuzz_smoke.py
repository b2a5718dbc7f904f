"""Fuzz smoke: each atheris harness runs for a few seconds (`--fuzz-seconds`, default 3) from its
seed corpus, with the limits that turn slow or huge inputs into findings (-timeout=2,
-rss_limit_mb=1024). Longer runs: see docs/robustness.md.

Inputs the fuzzers found are pinned below as plain regression tests.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FUZZ = ROOT / "fuzz"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("atheris") is None, reason="atheris is not installed"
)


def _rss_limit_mb() -> int:
    """1 GiB above this test process's peak. libFuzzer reads the peak RSS of its own process,
    and Linux keeps that peak across fork and exec: a fuzzer started from a pytest process that
    grew earlier in the session (a local Ray cluster maps its object store into the driver)
    would start "over the limit" without using a byte of its own."""
    import resource

    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024  # KiB on Linux
    return 1024 + int(peak_mb)


def _run(target: str, seconds: float, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    corpus = tmp_path / "corpus"
    seeds = FUZZ / "corpus" / target
    if seeds.is_dir():
        shutil.copytree(seeds, corpus)
    else:
        corpus.mkdir()
    cmd = [
        sys.executable,
        str(FUZZ / f"fuzz_{target}.py"),
        f"-max_total_time={max(1, int(seconds))}",
        "-timeout=2",
        f"-rss_limit_mb={_rss_limit_mb()}",
        # deep YAML/JSON nesting is pinned by its own test (test_properties); keep the smoke
        # run below the depth where PyYAML's recursion bites so that it stays deterministic
        "-max_len=300",
        f"-artifact_prefix={tmp_path}/",
        str(corpus),
    ]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=seconds + 120, cwd=tmp_path, check=False
    )


def _assert_clean(proc: subprocess.CompletedProcess[str]) -> None:
    tail = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, tail
    assert "Done " in tail, tail


def test_fuzz_reader_runs_clean(tmp_path: Path, pytestconfig: pytest.Config) -> None:
    _assert_clean(_run("reader", pytestconfig.getoption("--fuzz-seconds"), tmp_path))


def test_fuzz_signature_loader_runs_clean(tmp_path: Path, pytestconfig: pytest.Config) -> None:
    _assert_clean(_run("signature_loader", pytestconfig.getoption("--fuzz-seconds"), tmp_path))


def test_fuzz_webhook_runs_clean(tmp_path: Path, pytestconfig: pytest.Config) -> None:
    _assert_clean(_run("webhook", pytestconfig.getoption("--fuzz-seconds"), tmp_path))


# Seeds of the reader's hostile paths (issue 17): a journald line nested 3,000-4,800 deep (first,
# middle, unclosed), a pipe given by path (no seek), the line cap from a pipe and from a file.
# Each crashed or failed its checks on the reader before the fix; replayed once here, and run
# first by every fuzz run of the reader.
HOSTILE_READER_SEEDS = (
    "nested-json-deep-first",
    "nested-json-deep-middle",
    "nested-json-unclosed",
    "pipe-by-path",
    "line-cap-pipe",
    "line-cap-file",
)


def test_fuzz_reader_hostile_seeds_replay_clean(tmp_path: Path) -> None:
    seeds = [str(FUZZ / "corpus" / "reader" / name) for name in HOSTILE_READER_SEEDS]
    proc = subprocess.run(
        [sys.executable, str(FUZZ / "fuzz_reader.py"), f"-artifact_prefix={tmp_path}/", *seeds],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    tail = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, tail
    assert tail.count("Executed ") == len(seeds), tail


# ---------------------------------------------------------------------------------------------
# findings, pinned


@pytest.mark.parametrize("text", ["{[a]: 1}\n", "? {a: 1}\n: x\n", "{{reproduction: x}, a: 1}\n"])
def test_signature_loader_unhashable_key_is_a_load_error(tmp_path: Path, text: str) -> None:
    from triage.kb.load import load_signature_file

    path = tmp_path / "engine" / "probe.yaml"
    path.parent.mkdir()
    path.write_text(text)
    sig, errors = load_signature_file(path)
    assert sig is None and errors


def _payload(**issue: object) -> dict[str, object]:
    return {
        "action": "opened",
        "issue": {"number": 7, "title": "t", "body": "b", **issue},
        "sender": {"login": "someone"},
        "repository": {"full_name": "owner/repo"},
    }


def test_webhook_valid_payload_gives_a_job() -> None:
    from triage.bot.events import IssueJob, job_from_event

    assert isinstance(job_from_event("issues", _payload()), IssueJob)


def test_webhook_labels_not_a_list_is_a_reason_not_a_crash() -> None:
    from triage.bot.events import job_from_event

    assert job_from_event("issues", _payload(labels=5)) is not None


def test_webhook_infinite_issue_number_is_a_reason_not_a_crash() -> None:
    import json

    from triage.bot.events import job_from_event

    payload = json.loads(
        '{"action": "opened", "issue": {"number": 1e999}, "repository": {"full_name": "o/r"}}'
    )
    assert job_from_event("issues", payload) == "bad issue number"


@pytest.mark.parametrize("max_line", [1, 2, 3])
def test_line_cap_below_two_bytes_keeps_no_more_than_the_cap(max_line: int) -> None:
    """Found by fuzz_reader: with a cap of one byte the tail slice `data[-0:]` kept the whole
    line. A cut line keeps at most the cap (its head and tail halves) besides the marker."""
    import io
    import re

    from triage.read import Source, iter_segments

    marker = re.compile(rb" \[triage: \d+ bytes of this \d+-byte line not read\] ")
    body = b"\x02\x0b" + b"abcdefgh"
    source = Source(name="cut")
    segs = list(iter_segments(io.BytesIO(body), source, 1, max_line=max_line))
    out = b"".join(bytes(s.data) for s in segs)
    assert marker.search(out)
    assert len(marker.sub(b"", out).rstrip(b"\n")) <= max_line
