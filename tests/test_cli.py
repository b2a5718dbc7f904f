"""The command: inputs, formats, exit codes, JSON contract, neutralised output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema

from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "vllm-kv-cache-oom.log"


def run(
    *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "triage", *args],
        input=stdin,
        capture_output=True,
        check=False,
        env=full_env,
        cwd=ROOT,
    )


def test_text_output_and_exit_1() -> None:
    proc = run(str(EXAMPLE))
    assert proc.returncode == 1
    out = proc.stdout.decode()
    assert "kv-cache-no-memory" in out and "\x1b[" not in out  # no colour when not a terminal


def test_json_validates_against_shipped_schema() -> None:
    proc = run("--format", "json", str(EXAMPLE))
    report = json.loads(proc.stdout)
    schema = json.loads((ROOT / "schemas" / "report.schema.json").read_text())
    jsonschema.validate(report, schema)
    assert report["schema"] == "triage.report/1"
    top = report["hypotheses"][0]
    for key in (
        "rank",
        "signature",
        "title",
        "layer",
        "severity",
        "status",
        "score",
        "evidence",
        "explains",
        "fixes",
        "verify",
        "references",
    ):
        assert key in top
    assert top["evidence"][0] == {**top["evidence"][0], "input": str(EXAMPLE), "line": 10}


def test_shipped_schema_is_current() -> None:
    from triage.report_schema import Report

    shipped = json.loads((ROOT / "schemas" / "report.schema.json").read_text())
    assert shipped == Report.model_json_schema(by_alias=True, mode="serialization")


def test_stdin_pipe_and_dash() -> None:
    data = EXAMPLE.read_bytes()
    for args in ((), ("-",)):
        proc = run("--format", "json", *args, stdin=data)
        assert proc.returncode == 1
        assert json.loads(proc.stdout)["hypotheses"][0]["evidence"][0]["line"] == 10


def test_healthy_exit_0() -> None:
    proc = run(stdin=b"(APIServer pid=1) INFO:     Application startup complete.\n")
    assert proc.returncode == 0, proc.stdout


def test_usage_errors_exit_2_without_traceback(tmp_path: Path) -> None:
    for args, stdin in (
        ((str(tmp_path / "missing.log"),), None),
        (("--format", "nope", str(EXAMPLE)), None),
        ((str(tmp_path / "empty.log"),), None),
    ):
        (tmp_path / "empty.log").write_bytes(b"")
        proc = run(*args, stdin=stdin)
        assert proc.returncode == 2, (args, proc.stderr)
        assert b"Traceback" not in proc.stderr


def test_unreadable_file_exit_2(tmp_path: Path) -> None:
    p = tmp_path / "secret.log"
    p.write_text("x\n")
    p.chmod(0)
    proc = run(str(p))
    if os.geteuid() == 0:  # root reads anything; nothing to test
        return
    assert proc.returncode == 2 and b"cannot read" in proc.stderr


def test_markdown_format() -> None:
    proc = run("--format", "markdown", str(EXAMPLE))
    md = proc.stdout.decode()
    assert md.startswith("<!-- triage-bot -->") and "<details>" in md


def test_terminal_injection_is_neutralised(tmp_path: Path) -> None:
    evil = (
        "ValueError: No available memory for the cache blocks \x1b]0;pwned\x07 \x1b[2J"
        " \u202egnp.exe \x9b31m C1\n"
    )
    p = tmp_path / "evil.log"
    p.write_text(evil)
    for color in ("--no-color", "--color"):
        out = run(color, str(p)).stdout.decode()
        body = out.replace("\x1b[0m", "")
        for bad in ("\x1b]", "\x1b[2J", "\u202e", "\x9b", "\x07"):
            assert bad not in body, (color, repr(bad))


def test_version_names_engine() -> None:
    out = run("--version").stdout.decode()
    assert "scanner: hyperscan" in out or "scanner: re2" in out


def test_no_demonstrated_fix_is_said() -> None:
    """A hypothesis whose fixes are all suggestions says that none is shown working (the cuBLAS
    entry); one with a demonstrated fix (the KV-cache example) does not."""
    untried = ROOT / "corpus" / "engine" / "cuda-cublas-not-initialized-internlm-hf.log"
    for fmt, marker in (("text", "no fix here is shown working"), ("markdown", "No fix here")):
        first = run("--no-history", "--format", fmt, str(untried)).stdout.decode()
        assert marker in first.split("#2")[0], fmt
        second = run("--no-history", "--format", fmt, str(EXAMPLE)).stdout.decode()
        assert marker not in second.split("#2")[0], fmt
