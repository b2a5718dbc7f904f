"""`triage run DIR` and `triage watch ROOT` on run directories in the seeds' campaign style."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from test_bot_support import secret_corpus

from triage.api import Engine, load_kb
from triage.bot.rundir import launch_command, triage_run
from triage.bot.watch import Watcher, post_webhook
from triage.cli import main

ROOT = Path(__file__).parent.parent
KV_LOG = (ROOT / "examples" / "vllm-kv-cache-oom.log").read_text()
RUN = "dsv3__dep8__800k__vllm__1025-130702"


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(load_kb())


def make_run(root: Path, name: str = RUN, *, failed: bool = True, extra_log: str = "") -> Path:
    run = root / "results" / "runs" / name
    run.mkdir(parents=True)
    (run / "cmd.sh").write_text(
        "#!/bin/bash\nset -euo pipefail\n# launched by the queue runner\n"
        "vllm serve deepseek-ai/DeepSeek-V3 \\\n"
        "  --data-parallel-size 8 --enable-expert-parallel \\\n"
        "  --gpu-memory-utilization 0.9 --max-model-len 800000 --port 8000\n"
    )
    if failed:
        (run / "server.log").write_text(KV_LOG + extra_log)
        bench = {
            "date": "20251025-130702",
            "backend": "vllm",
            "num_prompts": 8,
            "completed": 0,
            "failed": 8,
            "errors": ["ClientConnectorError: Cannot connect to host localhost:8000"] * 8,
        }
    else:
        (run / "server.log").write_text(
            "(APIServer pid=1) INFO 10-25 13:07:02 [api_server.py:1839] "
            "vLLM API server version 0.11.0\n"
            "(APIServer pid=1) INFO:     Application startup complete.\n"
        )
        bench = {
            "num_prompts": 8,
            "completed": 8,
            "failed": 0,
            "errors": [""] * 8,
            "request_throughput": 1.5,
        }
    (run / "bench_h800k_00.json").write_text(json.dumps(bench))
    (run / "client.log").write_text("starting vllm bench serve --num-prompts 8\n")
    return run


def test_run_dir_names_the_cause(engine: Engine, tmp_path: Path) -> None:
    run = make_run(tmp_path)
    result = triage_run(engine, run)
    assert result.failed
    md = (run / "triage.md").read_text()
    assert "kv-cache-no-memory" in md.split("\n")[1]
    report = json.loads((run / "triage.json").read_text())
    assert report["schema"] == "triage.report/1"
    assert report["hypotheses"][0]["signature"] == "kv-cache-no-memory"
    facts = report["facts"]["run"]
    assert facts["launch_command"].startswith("vllm serve deepseek-ai/DeepSeek-V3")
    assert facts["bench"]["bench_h800k_00.json"]["completed"] == 0
    assert any(e["input"] == "server.log" for e in report["hypotheses"][0]["evidence"])
    # Our own outputs are never read back as inputs.
    again = triage_run(engine, run)
    assert all(i.name not in ("triage.md", "triage.json") for i in again.diagnosis.report.inputs)


def test_run_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["run", str(run)])
    out, _ = capsys.readouterr()
    assert exc.value.code == 1 and "kv-cache-no-memory" in out
    assert (run / "triage.md").is_file() and (run / "triage.json").is_file()


def test_run_outputs_are_redacted(engine: Engine, tmp_path: Path) -> None:
    corpus = secret_corpus(13)
    extra = "".join(
        f"(APIServer pid=1) ERROR 10-25 13:08:44 [x.py:1] failed: {line}\n" for _, line in corpus
    )
    run = make_run(tmp_path, extra_log=extra)
    (run / "cmd.sh").write_text(
        (run / "cmd.sh")
        .read_text()
        .replace("--port 8000", f"--port 8000 --api-key {corpus[20][0]}")
    )
    triage_run(engine, run)
    for name in ("triage.md", "triage.json"):
        text = (run / name).read_text()
        for secret, _ in corpus:
            assert secret not in text, (name, secret)


def test_watch_triages_only_finished_failed_runs(engine: Engine, tmp_path: Path) -> None:
    bad = make_run(tmp_path, "bad-run")
    good = make_run(tmp_path, "good-run", failed=False)
    running = tmp_path / "results" / "runs" / "still-running"
    running.mkdir(parents=True)
    (running / "server.log").write_text(KV_LOG)
    received: list[dict[str, Any]] = []

    class Hook(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return None

        def do_POST(self) -> None:
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

    hook = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(
        target=hook.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    url = f"http://127.0.0.1:{hook.server_address[1]}/hook"
    try:
        lines: list[str] = []
        watcher = Watcher(
            engine, tmp_path, settle=3600, notify=lambda r: post_webhook(url, r), echo=lines.append
        )
        failed = watcher.scan_once()
        assert [r.run_dir.name for r in failed] == ["bad-run"]
        assert (bad / "triage.md").is_file() and not (good / "triage.md").exists()
        assert not (running / "triage.md").exists()  # not finished: no exit file, no bench JSON
        assert received and received[0]["signature"] == "kv-cache-no-memory"
        assert watcher.scan_once() == []  # nothing changed: nothing done twice
        # The running one ends (its files go quiet): it is triaged on the next scan.
        old = os.path.getmtime(running / "server.log") - 7200
        os.utime(running / "server.log", (old, old))
        assert [r.run_dir.name for r in watcher.scan_once()] == ["still-running"]
    finally:
        hook.shutdown()
        hook.server_close()


def test_launch_command_is_read_not_run() -> None:
    script = (
        "#!/bin/sh\n# vllm serve commented\nexport X=1\nvllm serve m --port 1 $(touch /tmp/x)\n"
    )
    assert launch_command(script) == "vllm serve m --port 1 $(touch /tmp/x)"


def test_history_database_never_stores_secrets(engine: Engine, tmp_path: Path) -> None:
    pytest.importorskip("triage.history")
    corpus = secret_corpus(17)
    extra = "".join(
        f"(APIServer pid=1) ERROR 10-25 13:08:44 [x.py:1] failed: {line}\n" for _, line in corpus
    )
    run = make_run(tmp_path, extra_log=extra)
    db = tmp_path / "history.db"
    triage_run(engine, run, history_db=db)
    result = triage_run(engine, run, history_db=db)  # second time: "seen" comes from the DB
    assert "seen" in result.diagnosis.markdown
    raw = db.read_bytes().decode("utf-8", "replace")
    for path in tmp_path.glob("history.db*"):
        raw += path.read_bytes().decode("utf-8", "replace")
    import sqlite3

    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                raw += " ".join(str(v) for v in row)
    assert "kv-cache-no-memory" in raw
    for secret, _ in corpus:
        assert secret not in raw, secret
