"""`triage comment`: the Markdown a bot would post, from logs or issue bodies; redacted, inert."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_bot_support import secret_corpus

from triage.cli import main
from triage.render.markdown import fenced

ROOT = Path(__file__).parent.parent
FIX = Path(__file__).parent / "fixtures" / "bot"


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def test_comment_on_a_log(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["comment", str(ROOT / "examples" / "vllm-kv-cache-oom.log")], capsys)
    assert code == 1
    lines = out.split("\n")
    assert lines[0].startswith("<!-- triage-bot v1 ")
    assert "kv-cache-no-memory" in lines[1]
    assert "<details><summary>Evidence" in out
    assert ":10: " in out  # original line number of the decisive line
    assert "### What would help next" in out


def test_comment_on_an_issue_body(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["comment", "--issue", str(FIX / "issue_vllm_kv_cache.md")], capsys)
    assert code == 1
    assert "kv-cache-no-memory" in out.split("\n")[1]
    assert "H100" not in out  # the environment dump is facts, not quoted as log text
    assert "@some-maintainer" not in out and "#1234" not in out


def test_comment_asks_for_what_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["comment", "--issue", str(FIX / "issue_placeholder.md")], capsys)
    assert code == 0
    assert "placeholder is still there" in out
    assert "screenshots cannot be read" in out


def test_hostile_issue_is_inert(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    body = (FIX / "issue_hostile.md").read_text().replace("/tmp/pwned", str(canary))
    issue = tmp_path / "issue.md"
    issue.write_text(body)
    _code, out, _ = run_cli(["comment", "--issue", str(issue)], capsys)
    assert not canary.exists()
    assert "49" not in out  # {{7*7}} was never evaluated
    assert "<script>" not in out and "@everyone" not in out


def test_secrets_absent_from_cli_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    corpus = secret_corpus(5)
    log = (ROOT / "examples" / "vllm-kv-cache-oom.log").read_text()
    log += "".join(f"ERROR 10-25 13:08:44 [x.py:1] request failed: {line}\n" for _, line in corpus)
    path = tmp_path / "server.log"
    path.write_text(log)
    for args in (
        ["comment", str(path)],
        [str(path), "--format", "markdown"],
        [str(path)],
        [str(path), "--format", "json"],
    ):
        _, out, err = run_cli(args, capsys)
        for secret, _ in corpus:
            if args[0] == "comment" or "markdown" in args:
                assert secret not in out + err, (args, secret)


def test_fence_longer_than_any_backtick_run() -> None:
    block = fenced(["a ```` b", "``"])
    assert block[0] == "`````text" and block[-1] == "`````"
