"""The LLM step against a stub OpenAI-compatible server on 127.0.0.1 (a real http.server that
records every request): what is sent, which answers are accepted, which are dropped, and that
with the step off nothing changes."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import string
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
CASE = ROOT / "corpus" / "engine" / "nccl-tests-socket-connect-abort-proxy.log"
# A log whose report has a line no curated signature explains: the main command's --llm asks.
AUTO_CASE = ROOT / "corpus" / "engine" / "cuda-cublas-not-initialized-internlm-hf.log"
CONFIDENT = ROOT / "examples" / "vllm-kv-cache-oom.log"

Answer = Callable[[dict[str, Any]], tuple[int, bytes]]
Proc = subprocess.CompletedProcess[bytes]
Make = Callable[..., "Stub"]


class Stub:
    """An OpenAI-compatible chat-completions server whose answer is chosen per test."""

    def __init__(self, answer: Answer, delay: float = 0.0) -> None:
        self.answer = answer
        self.delay = delay
        self.received: list[bytes] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                stub.received.append(body)
                time.sleep(stub.delay)
                status, out = stub.answer(json.loads(body))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                # the client may have given up (the time-out case)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def completion(content: str, model: str = "stub-model-v1") -> bytes:
    return json.dumps(
        {
            "id": "cmpl-1",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
        }
    ).encode()


def _shown(body: dict[str, Any]) -> tuple[str, int, str, list[str]]:
    """The first flagged line of the evidence (input, number, text) and the candidate ids."""
    schema = body["response_format"]["json_schema"]["schema"]["properties"]
    ids = [i for i in schema["signature"]["enum"] if i != "none"]
    name = schema["cited_lines"]["items"]["properties"]["input"]["enum"][0]
    found = re.search(r"^>(\d+)\| (.+)$", body["messages"][1]["content"], re.M)
    assert found, body["messages"][1]["content"]
    return name, int(found.group(1)), found.group(2), ids


def answer_json(body: dict[str, Any], **override: Any) -> str:
    name, number, text, ids = _shown(body)
    data = {
        "signature": ids[0] if ids else "none",
        "cited_lines": [{"input": name, "line": number, "quote": text[-60:]}],
        "rationale": "The socket connect to the peer was aborted during the proxy connect.",
        "next_step": "Pin NCCL_SOCKET_IFNAME to the NIC that connects the nodes.",
        "confidence": "medium",
    }
    data.update(override)
    return json.dumps(data)


@pytest.fixture
def stub_factory() -> Iterator[Callable[..., Stub]]:
    made: list[Stub] = []

    def make(answer: Answer, delay: float = 0.0) -> Stub:
        made.append(Stub(answer, delay))
        return made[-1]

    yield make
    for stub in made:
        stub.close()


def triage(*args: str, stdin: bytes | None = None, cache: Path | None = None) -> Proc:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "110"}
    env.pop("NO_COLOR", None)
    if cache is not None:
        env["TRIAGE_CACHE_DIR"] = str(cache)
    return subprocess.run(
        [sys.executable, "-m", "triage", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )


def ask(stub: Stub, *args: str, log: Path = CASE, cache: Path | None = None) -> Proc:
    return triage(
        "ask", str(log), "--llm", stub.url, "--llm-model", "stub-model", *args, cache=cache
    )


def plain(log: Path = CASE, fmt: str = "json") -> Proc:
    return triage("--no-history", "-f", fmt, str(log))


# -- answers accepted and rejected ---------------------------------------------------------------


def test_valid_answer_is_shown_as_a_labelled_suggestion(stub_factory: Make, tmp_path: Path) -> None:
    stub = stub_factory(lambda body: (200, completion(answer_json(body))))
    proc = ask(stub, "-f", "json", cache=tmp_path)
    assert proc.returncode == plain().returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    llm = report["llm"]
    assert llm["label"] == "suggestion from stub-model, not a knowledge-base match"
    assert llm["signature"] == "nccl-bootstrap-connect-failed"
    assert llm["served_model"] == "stub-model-v1" and llm["temperature"] == 0
    assert llm["citations"][0]["quote"] in llm["citations"][0]["text"]
    assert llm["cached"] is False
    # the deterministic part is exactly the report without the step
    del report["llm"]
    assert report == json.loads(plain().stdout)
    sent = json.loads(stub.received[0])
    assert sent["temperature"] == 0 and sent["model"] == "stub-model"
    assert sent["response_format"]["type"] == "json_schema"

    text = ask(stub, cache=tmp_path).stdout.decode()
    assert "Suggestion from stub-model, not a knowledge-base match:" in text
    assert "next step: Pin NCCL_SOCKET_IFNAME" in text
    markdown = ask(stub, "-f", "markdown", cache=tmp_path).stdout.decode()
    assert "### Suggestion from stub-model, not a knowledge-base match" in markdown
    # the text and markdown runs were answered from the cache: one request in all
    assert len(stub.received) == 1


def test_cache_key_changes_with_the_model(stub_factory: Make, tmp_path: Path) -> None:
    stub = stub_factory(lambda body: (200, completion(answer_json(body))))
    first = json.loads(ask(stub, "-f", "json", cache=tmp_path).stdout)["llm"]
    again = json.loads(ask(stub, "-f", "json", cache=tmp_path).stdout)["llm"]
    assert (first["cached"], again["cached"]) == (False, True)
    other = triage(
        "ask", str(CASE), "--llm", stub.url, "--llm-model", "other", "-f", "json", cache=tmp_path
    )
    assert json.loads(other.stdout)["llm"]["cached"] is False
    assert len(stub.received) == 2


BAD_ANSWERS: dict[str, tuple[Answer, str]] = {
    "hallucinated line": (
        lambda b: (
            200,
            completion(
                answer_json(
                    b, cited_lines=[{"input": _shown(b)[0], "line": 99999, "quote": _shown(b)[2]}]
                )
            ),
        ),
        "was not in the evidence sent",
    ),
    "quote not verbatim": (
        lambda b: (
            200,
            completion(
                answer_json(
                    b,
                    cited_lines=[
                        {
                            "input": _shown(b)[0],
                            "line": _shown(b)[1],
                            "quote": "NCCL WARN the GPU melted into the floor",
                        }
                    ],
                )
            ),
        ),
        "is not verbatim in that line",
    ),
    "off-list signature": (
        lambda b: (200, completion(answer_json(b, signature="cuda-oom-loading-weights"))),
        "is not among the candidates sent",
    ),
    "malformed JSON": (
        lambda b: (200, completion('{"signature": "none", "cited_lines": [')),
        "is not JSON",
    ),
    "not a chat completion": (lambda b: (200, b"<html>gateway</html>"), "not an OpenAI chat"),
    "oversized answer": (
        lambda b: (200, completion(answer_json(b, rationale="x" * 100_000))),
        "larger than 65536 bytes",
    ),
    "HTTP 500": (lambda b: (500, b'{"error": "boom"}'), "HTTP 500"),
}


@pytest.mark.parametrize("case", sorted(BAD_ANSWERS))
def test_bad_answer_leaves_the_report_unchanged(
    stub_factory: Make, tmp_path: Path, case: str
) -> None:
    answer, reason = BAD_ANSWERS[case]
    stub = stub_factory(answer)
    for fmt in ("json", "text"):
        proc = ask(stub, "-f", fmt, cache=tmp_path)
        base = plain(fmt=fmt)
        assert proc.stdout == base.stdout, case
        assert proc.returncode == base.returncode
        notes = [line for line in proc.stderr.decode().splitlines() if line]
        assert len(notes) == 1 and reason in notes[0], notes
    assert len(stub.received) == 2  # a dropped answer is never cached


def test_time_out_is_bounded(stub_factory: Make, tmp_path: Path) -> None:
    stub = stub_factory(lambda b: (200, completion(answer_json(b))), delay=30.0)
    # a fresh cache directory compiles the knowledge base first (seconds on a loaded CI machine):
    # warm it, so that both timed runs read the same compiled store
    triage("--no-history", "-f", "json", str(CASE), cache=tmp_path)
    started = time.monotonic()
    base = triage("--no-history", "-f", "json", str(CASE), cache=tmp_path)
    plain_s = time.monotonic() - started
    started = time.monotonic()
    proc = ask(stub, "-f", "json", "--llm-timeout", "1", cache=tmp_path)
    # the server would answer after 30 s: the run costs the time-out, not the server's delay
    assert time.monotonic() - started < plain_s + 15
    assert stub.received and proc.stdout == base.stdout
    assert "no answer within 1 s" in proc.stderr.decode()


# -- what is sent --------------------------------------------------------------------------------


def _token(prefix: str, n: int) -> str:
    rng = random.Random(22)
    return prefix + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))


def test_a_planted_secret_never_reaches_the_server(stub_factory: Make, tmp_path: Path) -> None:
    secret = _token("hf_", 34)
    password = _token("", 20)
    log = tmp_path / "server.log"
    lines = CASE.read_text().splitlines()
    lines.insert(0, f"RuntimeError: could not download the model with token {secret}")
    lines.insert(3, f"ERROR connecting to redis://admin:{password}@10.0.0.9:6379 failed")
    log.write_text("\n".join(lines) + "\n")
    stub = stub_factory(lambda body: (200, completion(answer_json(body))))
    proc = ask(stub, "-f", "json", log=log, cache=tmp_path)
    assert proc.returncode == 1
    assert stub.received, proc.stderr
    body = b"".join(stub.received)
    assert secret.encode() not in body and password.encode() not in body
    assert b"[redacted]" in body
    assert b"could not download the model with token" in body  # the line itself was sent

    dry = ask(stub, "--llm-dry-run", log=log, cache=tmp_path)
    assert secret.encode() not in dry.stdout and len(stub.received) == 1


def test_dry_run_prints_the_exact_body_and_sends_nothing(
    stub_factory: Make, tmp_path: Path
) -> None:
    stub = stub_factory(lambda body: (200, completion(answer_json(body))))
    dry = ask(stub, "--llm-dry-run", cache=tmp_path)
    assert stub.received == []
    ask(stub, "--llm-no-cache", cache=tmp_path)
    assert stub.received == [dry.stdout]


def test_evidence_is_bounded_in_bytes(tmp_path: Path) -> None:
    from triage.api import Engine, load_kb
    from triage.llm import evidence, prompt

    log = tmp_path / "long.log"
    filler = "INFO 12-01 10:00:00 llm_engine.py:1] " + "all is well " * 60
    rng = random.Random(7)
    lines = [filler] * 30
    for _ in range(40):  # distinct failures (no common fingerprint), far apart, very long
        name = "".join(rng.choice(string.ascii_lowercase) for _ in range(12))
        lines += [f"RuntimeError: {name} failed: " + name * 250] + [filler] * 20
    log.write_text("\n".join(lines) + "\n")
    kb = load_kb()
    report = Engine(kb).run([str(log)])
    assert len(report.unrecognized) > evidence.MAX_SALIENT
    found = evidence.collect(report, {str(log): log})
    sent = [line for w in found.windows for line in w.lines.values()]
    assert sum(len(line.encode()) + 8 for line in sent) <= evidence.MAX_EVIDENCE_BYTES
    assert all(len(line) <= evidence.MAX_LINE_CHARS for line in sent)
    body = prompt.payload("m", prompt.candidates(report, kb), found)
    assert len(prompt.encode(body)) < evidence.MAX_EVIDENCE_BYTES + 16_000


# -- when it runs, and that it changes nothing when off ------------------------------------------


def test_confident_report_is_not_sent(stub_factory: Make) -> None:
    stub = stub_factory(lambda body: (200, completion(answer_json(body))))
    proc = triage(
        "--no-history", "-f", "json", "--llm", stub.url, "--llm-model", "m", str(CONFIDENT)
    )
    assert stub.received == []
    assert proc.stdout == plain(CONFIDENT).stdout
    assert "not asked" in proc.stderr.decode()


def test_environment_alone_sends_nothing(stub_factory: Make) -> None:
    stub = stub_factory(lambda body: (200, completion(answer_json(body))))
    env_like = {"OPENAI_BASE_URL": stub.url, "OPENAI_API_KEY": "x", "TRIAGE_LLM_API_KEY": "x"}
    os.environ.update(env_like)
    try:
        proc = plain()
    finally:
        for k in env_like:
            os.environ.pop(k)
    assert stub.received == [] and "llm" not in json.loads(proc.stdout)


def test_usage_errors() -> None:
    only_url = triage("--llm", "http://127.0.0.1:9/v1", str(CASE))
    assert only_url.returncode == 2 and b"--llm-model" in only_url.stderr
    bad_url = triage("ask", str(CASE), "--llm", "file:///etc/passwd", "--llm-model", "m")
    assert bad_url.returncode == 2 and b"http(s) base URL" in bad_url.stderr


BLOCK_LLM = """
import sys
from importlib.abc import MetaPathFinder
class Block(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "triage.llm" or name.startswith("triage.llm."):
            raise ModuleNotFoundError(name)
        return None
sys.meta_path.insert(0, Block())
from triage.cli import main
main(sys.argv[1:])
"""

OFF_CASES = [
    CASE,
    CONFIDENT,
    ROOT / "corpus" / "node" / "wait-online-timeout-systemctl-status.log",
    ROOT / "corpus" / "healthy" / sorted(os.listdir(ROOT / "corpus" / "healthy"))[0],
]


@pytest.mark.parametrize("log", OFF_CASES, ids=lambda p: p.name)
def test_step_off_is_byte_identical_to_no_llm_code(log: Path) -> None:
    """Every format, by default, equals a run in which the triage.llm package cannot be imported:
    the step's code adds nothing to any output when it is off."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "110"}
    for fmt in ("text", "json", "markdown", "jsonl"):
        args = ["--no-history", "-f", fmt, str(log)]
        with_code = triage(*args)
        without = subprocess.run(
            [sys.executable, "-c", BLOCK_LLM, *args],
            capture_output=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert without.stderr == b"", without.stderr
        assert with_code.stdout == without.stdout, fmt
        assert with_code.returncode == without.returncode
        assert b'"llm"' not in with_code.stdout


def test_history_records_the_same_with_and_without_the_step(
    stub_factory: Make, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The main command's --llm records the deterministic run; `triage ask` records nothing."""
    import sqlite3

    stub = stub_factory(lambda body: (200, completion(answer_json(body))))

    def recorded(db: Path) -> list[tuple[Any, ...]]:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            hits = conn.execute("SELECT signature, rank FROM hits ORDER BY rank").fetchall()
            unknown = conn.execute("SELECT text FROM unknown_lines ORDER BY id").fetchall()
            return [*hits, *unknown]

    without, with_llm, asked = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "c.db"
    triage("--db", str(without), str(AUTO_CASE))
    proc = triage("--db", str(with_llm), "--llm", stub.url, "--llm-model", "m", str(AUTO_CASE))
    assert "Suggestion from m" in proc.stdout.decode() and len(stub.received) == 1
    assert recorded(with_llm) == recorded(without) != []
    monkeypatch.setenv("TRIAGE_DB", str(asked))
    assert ask(stub, cache=tmp_path).returncode == 1
    assert not asked.exists()


def test_explicit_request_on_a_confident_log(stub_factory: Make, tmp_path: Path) -> None:
    import jsonschema  # type: ignore[import-untyped]

    stub = stub_factory(lambda body: (200, completion(answer_json(body))))
    proc = ask(stub, "-f", "json", log=CONFIDENT, cache=tmp_path)
    report = json.loads(proc.stdout)
    assert len(stub.received) == 1 and report["llm"]["reason"] == "explicit request"
    assert proc.returncode == plain(CONFIDENT).returncode
    schema = json.loads((ROOT / "schemas" / "report.schema.json").read_text())
    jsonschema.validate(report, schema)


def test_proxy_settings_are_not_used(stub_factory: Make, tmp_path: Path) -> None:
    """The evidence goes to the --llm URL itself, never through a proxy named in the environment."""
    stub = stub_factory(lambda body: (200, completion(answer_json(body))))
    proxies = {"http_proxy": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    saved = {k: os.environ.get(k) for k in (*proxies, "no_proxy", "NO_PROXY")}
    os.environ.update(proxies)
    os.environ.pop("no_proxy", None)
    os.environ.pop("NO_PROXY", None)
    try:
        proc = ask(stub, "-f", "json", cache=tmp_path)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert len(stub.received) == 1 and "llm" in json.loads(proc.stdout), proc.stderr
