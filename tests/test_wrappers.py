"""The same failure read plain, through docker compose, journalctl (short-iso, json), kubectl
--timestamps and with ANSI colour gives the same top hypothesis, with evidence on the same line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import run_text
from triage.api import Engine

CASES = {
    "kv-cache-no-memory": [
        "(APIServer pid=1) INFO 10-25 13:07:02 [api_server.py:1839] vLLM API server version 0.11.0",
        "(EngineCore_DP0 pid=270) INFO 10-25 13:08:30 [gpu_model_runner.py:2653] Model loading took 128.71 GiB and 61.5 seconds",
        "(EngineCore_DP0 pid=270) ERROR 10-25 13:08:43 [core.py:708] EngineCore failed to start.",
        "(EngineCore_DP0 pid=270) ERROR 10-25 13:08:43 [core.py:708] Traceback (most recent call last):",
        "(EngineCore_DP0 pid=270) ERROR 10-25 13:08:43 [core.py:708] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ],
}
EXPECTED_LINE = {"kv-cache-no-memory": 5}


def plain(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def compose(lines: list[str]) -> str:
    return "".join(f"vllm-1  | {x}\n" for x in lines)


def journal_short_iso(lines: list[str]) -> str:
    return "".join(
        f"2026-11-29T18:43:{i:02d}+00:00 gpu-node-3 vllm[8707]: {x}\n" for i, x in enumerate(lines)
    )


def journal_json(lines: list[str]) -> str:
    out = []
    for i, x in enumerate(lines):
        msg: object = x
        if i % 2:  # journald stores messages with control bytes as arrays of byte values
            msg = list((x + "\r").encode())
        out.append(
            json.dumps(
                {
                    "__REALTIME_TIMESTAMP": str(1700000000000000 + i),
                    "_HOSTNAME": "gpu-node-3",
                    "SYSLOG_IDENTIFIER": "vllm",
                    "_PID": "8707",
                    "MESSAGE": msg,
                }
            )
        )
    return "\n".join(out) + "\n"


def kubectl(lines: list[str]) -> str:
    return "".join(f"2026-11-29T18:43:39.{i:09d}Z {x}\n" for i, x in enumerate(lines))


def ansi(lines: list[str]) -> str:
    out = []
    for x in lines:
        if x.startswith("("):
            close = x.index(")") + 1
            x = (
                "\x1b[1;36m"
                + x[:close]
                + "\x1b[0;0m"
                + x[close:].replace("ERROR", "\x1b[31mERROR\x1b[0m")
            )
        out.append(x)
    return "\n".join(out) + "\n"


def ansi_pasted(lines: list[str]) -> str:
    return ansi(lines).replace("\x1b", "")


WRAPPERS: dict[str, Callable[[list[str]], str]] = {
    "plain": plain,
    "compose": compose,
    "journal-short-iso": journal_short_iso,
    "journal-json": journal_json,
    "kubectl-timestamps": kubectl,
    "ansi": ansi,
    "ansi-pasted": ansi_pasted,
}


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
@pytest.mark.parametrize("sig_id", list(CASES))
def test_same_top_hypothesis_through_wrappers(
    engine: Engine, tmp_path: Path, sig_id: str, wrapper: str
) -> None:
    report = run_text(engine, WRAPPERS[wrapper](CASES[sig_id]), tmp_path)
    top = report.hypotheses[0]
    assert top.signature == sig_id
    assert top.evidence[0].line == EXPECTED_LINE[sig_id]
    assert any(e.signature == "engine-core-init-failed" for e in top.explains)
