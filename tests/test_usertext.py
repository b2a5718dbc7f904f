"""Users' words in request-log lines never fire a signature, and reports never quote them."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triage.api import Engine
from triage.usertext import elide_user_text

# What a user might paste into a chat: real error text, quoted back in the server's request log.
QUOTED = (
    "My server died: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
    "Then ValueError: No available memory for the cache blocks. Try increasing "
    "`gpu_memory_utilization` when initializing the engine."
)

# The request-logger formats, as vLLM and SGLang print them (format strings of
# vllm/entrypoints/logger.py across releases, sglang's tokenizer manager).
REQUEST_LINES = (
    "INFO 06-15 18:59:29 [logger.py:41] Received request chatcmpl-4cbd87ad: prompt: {r}, "
    "params: SamplingParams(n=1, temperature=0.7, max_tokens=512), prompt_token_ids: [1, 2], "
    "lora_request: None, prompt_adapter_request: None.",
    "INFO 03-02 10:11:12 async_llm_engine.py:529] Received request cmpl-1: prompt: {r}, "
    "sampling_params: SamplingParams(n=1), prompt_token_ids: [1], lora_request: None.",
    "DEBUG 11-05 09:00:01 [logger.py:45] Request chatcmpl-9 details: prompt: {r}, "
    "prompt_token_ids: [1, 2, 3], prompt_embeds shape: None.",
    "INFO 11-05 09:00:03 [logger.py:80] Generated response chatcmpl-9 (streaming complete): "
    "output: {r}, output_token_ids: None, finish_reason: stop",
    "[2025-09-03 18:33:18 TP0] Receive: obj=GenerateReqInput(text={r}, sampling_params={{}})",
    "[2025-09-03 18:33:19 TP0] Finish: obj=GenerateReqInput(rid='a1'), out={{'text': {r}}}",
)


@pytest.mark.parametrize("template", REQUEST_LINES)
def test_a_logged_prompt_or_answer_is_elided(template: str) -> None:
    line = template.format(r=repr(QUOTED))
    out = elide_user_text(line)
    assert "out of memory" not in out and "cache blocks" not in out
    assert "elided" in out
    assert out.startswith(line[: line.index(": ") + 2])  # the logger's own header is kept


@pytest.mark.parametrize(
    "prompt",
    [
        "it's a quote: ' and \\' and \\\\",  # repr switches to double quotes
        "both ' and \" quotes, then CUDA out of memory",  # repr escapes its single quotes
        "ends with a backslash \\",
        "",
    ],
)
def test_the_whole_repr_is_elided_and_what_follows_is_kept(prompt: str) -> None:
    line = (
        f"INFO [logger.py:41] Received request r1: prompt: {prompt!r}, params: SamplingParams(n=1)"
    )
    out = elide_user_text(line)
    assert out == (
        f"INFO [logger.py:41] Received request r1: prompt: "
        f"<user text elided: {len(repr(prompt))} chars>, params: SamplingParams(n=1)"
    )


def test_a_truncated_line_is_elided_to_its_end() -> None:
    cut = "'CUDA out of memory and the line was cut"
    line = f"INFO [logger.py:41] Received request r1: prompt: {cut}"
    assert elide_user_text(line).endswith(f"prompt: <user text elided: {len(cut)} chars>")


@pytest.mark.parametrize(
    "line",
    [
        "ValueError: The decoder prompt (length 9000) is longer than the maximum model length of 8192.",
        "INFO [logger.py:41] Received request r1: prompt: None, params: SamplingParams(n=1), "
        "prompt_token_ids: [1, 2, 3]",
        "RuntimeError: output: 'CUDA out of memory' from a user script",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    ],
)
def test_other_lines_are_left_alone(line: str) -> None:
    assert elide_user_text(line) == line


def test_a_healthy_server_logging_prompts_stays_silent(engine: Engine, tmp_path: Path) -> None:
    lines = [t.format(r=repr(QUOTED)) for t in REQUEST_LINES]
    path = tmp_path / "server.log"
    path.write_text("\n".join(lines) + "\n")
    report = engine.run([str(path)])
    assert report.hypotheses == []
    # ...while the same failure, logged by the server itself, still fires
    path.write_text(
        "\n".join(lines)
        + "\nERROR 06-15 19:00:01 [core.py:708] ValueError: No available memory for the cache "
        "blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n"
    )
    report = engine.run([str(path)])
    assert report.hypotheses and report.hypotheses[0].signature == "kv-cache-no-memory"
    quoted = [e.text for h in report.hypotheses for e in h.evidence]
    assert all("My server died" not in text for text in quoted)


@settings(max_examples=1000, deadline=None, derandomize=True, database=None)
@given(
    prompt=st.text(max_size=80),
    head=st.sampled_from(["Received request r: prompt: ", "Receive: obj=", "output: ", ""]),
    cut=st.integers(min_value=0, max_value=200),
)
def test_elision_never_raises_and_never_grows_a_line_unboundedly(
    prompt: str, head: str, cut: int
) -> None:
    line = (head + repr(prompt) + ", params: x")[:cut]
    out = elide_user_text(line)
    assert isinstance(out, str) and len(out) <= len(line) + 40
