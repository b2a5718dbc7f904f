"""The C helper that blanks logged user text before the scan agrees with the elision that
confirmation applies (triage/usertext.py), so the scan never loses a line confirmation would keep;
and whole reports are the same with and without it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triage import usertext
from triage.api import Engine
from triage.read import TextWindow
from triage.render.json import render_json
from triage.usertext import elide_user_text, hide_user_text

userblank = pytest.importorskip(
    "triage._userblank", reason="the optional C helper was not built (no C compiler)"
)
blank_user_text = userblank.blank_user_text

QUOTED = "CUDA out of memory. Tried to allocate 2.00 GiB; NCCL WARN Connect to 10.0.0.2 failed"


def blank(data: bytes) -> bytes:
    out = bytearray(len(data))
    return bytes(out) if blank_user_text(data, out) else data


_PLACEHOLDER = re.compile(r"<(user text|request) elided: \d+ chars>")
_BREAKS = re.compile(rb"\r\n|\n|\r")


def lines(data: bytes) -> Iterator[str]:
    for raw in _BREAKS.split(data):
        yield raw.decode("utf-8", "replace")


def confirmed_text(line: str) -> str:
    """What confirmation sees of a line, with the placeholders' counts left out (C counts bytes,
    Python characters)."""
    return _PLACEHOLDER.sub(r"<\1 elided>", elide_user_text(line))


@pytest.mark.parametrize(
    "line, body",
    [
        (
            f"INFO [logger.py:41] Received request chatcmpl-4c: prompt: {QUOTED!r}, params: X",
            QUOTED,
        ),
        (f"DEBUG [logger.py:45] Request chatcmpl-9 details: prompt: {QUOTED!r}, ids: [1]", QUOTED),
        (f"INFO Generated response chatcmpl-9: output: {QUOTED!r}, finish_reason: stop", QUOTED),
        (f"INFO Generated response c-9 (streaming delta): output: {QUOTED!r}, x", QUOTED),
        (f"INFO Generated response c-9 (streaming complete): output: {QUOTED!r}", QUOTED),
        ('Received request r1: prompt: "it\'s CUDA error", params: X', "it's CUDA error"),
        ("Received request r1: prompt: 'it\\'s CUDA error', params: X", "it\\'s CUDA error"),
        (
            "Received request r1: prompt: 'ends with a backslash\\\\', params",
            "ends with a backslash\\\\",
        ),
        (
            "[2025-09-03 TP0] Receive: obj=GenerateReqInput(text='CUDA error')",
            "GenerateReqInput(text='CUDA error')",
        ),
        ("[TP0] Receive OpenAI: obj={'messages': 'NCCL WARN'}", "{'messages': 'NCCL WARN'}"),
        (
            "[TP0] Finish: obj=GenerateReqInput(rid='a1'), out={'text': 'Killed'}",
            "GenerateReqInput(rid='a1'), out={'text': 'Killed'}",
        ),
    ],
)
def test_user_text_is_blanked_and_the_rest_kept(line: str, body: str) -> None:
    data = line.encode() + b"\nnext line: CUDA error\n"
    out = blank(data)
    assert len(out) == len(data)
    at = data.index(body.encode())
    assert out[at : at + len(body.encode())] == b" " * len(body.encode())
    assert out[:at] == data[:at]
    assert out.endswith(b"\nnext line: CUDA error\n")
    assert confirmed_text(out.split(b"\n")[0].decode()) == confirmed_text(line)


@pytest.mark.parametrize(
    "line",
    [
        "Received request r1: prompt: no quote follows, CUDA error",
        "received request r1: prompt: 'lower case is not the logger'",
        "Received request r\u00e91: prompt: 'an id that is not ASCII is left alone'",
        "Received request : prompt: 'no id'",
        "xReceive: obj=GenerateReqInput(text='glued to a word')",
        "MyFinish: obj=1",
        "model: 'facebook/opt-125m', t: 'x', obj=None",
    ],
)
def test_near_misses_are_left_alone(line: str) -> None:
    data = line.encode() + b"\n"
    assert blank(data) == data


def test_a_marker_quoted_inside_a_prompt_is_not_one() -> None:
    inner = "Received request fake: prompt: 'x"
    line = f"Received request r1: prompt: {inner!r}: prompt: 'visible CUDA error'"
    out = blank(line.encode())
    assert b"visible CUDA error" in out  # Python's elision keeps it too
    assert confirmed_text(out.decode()) == confirmed_text(line)


def test_an_unterminated_prompt_is_blanked_to_the_end_of_its_line_only() -> None:
    data = b"Received request r1: prompt: 'cut short CUDA error\r next: CUDA error\n"
    out = blank(data)
    assert (
        out
        == b"Received request r1: prompt: '"
        + b" " * len("cut short CUDA error")
        + b"\r next: CUDA error\n"
    )


def test_an_sglang_dump_wins_over_a_later_vllm_marker_and_loses_to_an_earlier_one() -> None:
    later = "Receive: obj=X(text='a') Received request r: prompt: 'b'"
    earlier = "Received request r: prompt: 'a' Receive: obj=X(text='b') tail"
    for line in (later, earlier):
        out = blank(line.encode()).decode()
        assert confirmed_text(out) == confirmed_text(line)
    assert blank(earlier.encode()).decode().startswith("Received request r: prompt: ' '")


FRAGMENTS = [
    "Received request ",
    "Request ",
    " details: ",
    "prompt: ",
    "output: ",
    "Generated response ",
    " (streaming delta)",
    " (streaming complete)",
    ": ",
    "'",
    '"',
    "\\",
    "\\'",
    "chatcmpl-1a",
    "x",
    " ",
    "\n",
    "\r",
    "\r\n",
    "Receive: obj=",
    "Receive OpenAI: obj=",
    "Finish: obj=",
    "\u00e9",
    "_",
    "CUDA error",
    "obj=",
    "t: '",
    "Receive",
    "\x1b[0m",
    "\t",
]


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40), st.binary(max_size=8))
def test_confirmation_sees_the_same_text_with_and_without_blanking(
    parts: list[str], noise: bytes
) -> None:
    data = "".join(parts).encode() + noise
    out = blank(data)
    assert len(out) == len(data)
    changed = [i for i in range(len(data)) if out[i] != data[i]]
    assert all(out[i] == 0x20 and data[i] not in (10, 13) for i in changed)
    for before, after in zip(lines(data), lines(out), strict=True):
        assert confirmed_text(after) == confirmed_text(before)


def test_hide_user_text_returns_the_segment_itself_when_there_is_nothing_to_hide() -> None:
    plain = b"INFO 06-15 Avg prompt throughput: 10.0 tokens/s\n" * 10
    assert hide_user_text(plain) is plain
    window = TextWindow(b"Received request r: prompt: 'CUDA error'\n" * 20000, 0, 20000 * 41)
    hidden = hide_user_text(window)
    assert isinstance(hidden, TextWindow) and len(hidden) == len(window)
    assert b"CUDA error" not in bytes(hidden)


def test_reports_are_the_same_with_and_without_blanking(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing server's log with request logging: the prompts quote errors, the failure is
    real. The report must not depend on whether the helper ran."""
    log = tmp_path / "server.log"
    requests = "".join(
        f"INFO 06-15 18:59:{i % 60:02d} [logger.py:41] Received request chatcmpl-{i:x}: "
        f"prompt: {QUOTED!r}, params: SamplingParams(n=1), lora_request: None.\n"
        for i in range(3000)
    )
    failure = (
        "ERROR 06-15 19:00:01 [core.py:700] EngineCore failed to start.\n"
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.\n"
    )
    log.write_text(requests + failure + requests)

    def report() -> str:
        usertext._blanker.cache_clear()
        return render_json(engine.run([str(log)]))

    with_blanking = report()
    assert '"kv-cache-no-memory"' in with_blanking
    monkeypatch.setenv("TRIAGE_NO_BLANK", "1")
    without = report()
    monkeypatch.delenv("TRIAGE_NO_BLANK")
    usertext._blanker.cache_clear()
    assert with_blanking == without


def test_each_thread_blanks_into_its_own_buffer() -> None:
    """`--follow` scans several inputs at once: one thread's copy must survive another's."""
    import threading

    first = b"Received request a: prompt: 'first CUDA error'\n" * 100
    second = b"Received request b: prompt: 'second NCCL WARN'\n" * 100
    mine = hide_user_text(first)
    other: list[bytes] = []
    worker = threading.Thread(target=lambda: other.append(bytes(hide_user_text(second))))
    worker.start()
    worker.join()
    assert bytes(mine) == blank(first)
    assert other == [blank(second)]
