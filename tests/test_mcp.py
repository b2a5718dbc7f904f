"""`triage mcp` driven by the real MCP client library: spawn `python -m triage mcp` over stdio,
list its tools and call each one."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parent.parent
CASE = ROOT / "corpus" / "engine" / "nccl-tests-socket-connect-abort-proxy.log"


def _server(*extra: str) -> StdioServerParameters:
    env = {
        "PYTHONPATH": str(ROOT),
        "TRIAGE_DB": os.environ["TRIAGE_DB"],
        "TRIAGE_CACHE_DIR": os.environ["TRIAGE_CACHE_DIR"],
    }
    return StdioServerParameters(
        command=sys.executable, args=["-m", "triage", "mcp", *extra], env=env, cwd=str(ROOT)
    )


def _payload(result: Any) -> Any:
    assert not result.is_error, result.content
    text = json.loads(result.content[0].text)
    if result.structured_content is not None:
        assert result.structured_content == text
    return text


async def _session_calls(
    params: StdioServerParameters, calls: list[tuple[str, dict[str, Any]]]
) -> tuple[Any, list[Any]]:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        results = [await session.call_tool(name, args) for name, args in calls]
        return listed, results


def test_tools_listed_and_each_called() -> None:
    secret_value = "hf_" + "".join(chr(ord("a") + (i * 7) % 26) for i in range(34))
    # An error line that quotes a token: it reaches the report, redacted.
    pasted = CASE.read_text() + f"ValueError: invalid credentials HF_TOKEN={secret_value}\n"
    listed, results = anyio.run(
        _session_calls,
        _server(),
        [
            ("triage_log", {"path": str(CASE)}),
            ("triage_log", {"text": pasted}),
            ("kb_search", {"query": "NCCL socket connect failed"}),
            ("kb_show", {"id": "nccl-bootstrap-connect-failed"}),
            ("kb_show", {"id": "no-such-signature"}),
            ("triage_log", {}),
        ],
    )
    names = {t.name for t in listed.tools}
    assert {"triage_log", "kb_search", "kb_show"} <= names
    by_path, by_text, search, show, unknown, neither = results

    report = _payload(by_path)
    assert report["schema"] == "triage.report/1"
    assert report["hypotheses"][0]["signature"] == "nccl-bootstrap-connect-failed"
    assert report["inputs"][0]["name"].endswith(CASE.name)
    assert "llm" not in report

    pasted_report = _payload(by_text)
    assert pasted_report["inputs"][0]["name"] == "<text>"
    assert pasted_report["hypotheses"][0]["signature"] == "nccl-bootstrap-connect-failed"
    quoted = [
        u["text"] for u in pasted_report["unrecognized"] if "invalid credentials" in u["text"]
    ]
    assert quoted and "[redacted]" in quoted[0]
    assert secret_value not in json.dumps(pasted_report)

    found = _payload(search)
    assert "nccl-bootstrap-connect-failed" in [r["id"] for r in found["results"]]

    signature = _payload(show)
    assert signature["id"] == "nccl-bootstrap-connect-failed"
    assert signature["fixes"] and signature["match"]

    assert unknown.is_error and "no signature" in unknown.content[0].text
    assert neither.is_error


def test_root_refuses_paths_outside_it(tmp_path: Path) -> None:
    _, (outside,) = anyio.run(
        _session_calls, _server("--root", str(tmp_path)), [("triage_log", {"path": str(CASE)})]
    )
    assert outside.is_error and "outside" in outside.content[0].text
