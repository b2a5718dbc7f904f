"""Reading bug reports: issue-form sections, fences, details, pre, attachments, collect_env."""

from __future__ import annotations

from pathlib import Path

from triage.bot.collect_env import parse_collect_env
from triage.bot.issue import parse_issue

FIX = Path(__file__).parent / "fixtures" / "bot"


def test_issue_form_with_env_and_log() -> None:
    body = (FIX / "issue_vllm_kv_cache.md").read_bytes().decode("utf-8")
    assert "\r\n" in body
    parsed = parse_issue(body)
    assert len(parsed.blocks) == 1
    block = parsed.blocks[0]
    assert "No available memory for the cache blocks" in block.text
    assert "PyTorch version" not in block.text  # collect_env kept apart
    lines = body.replace("\r\n", "\n").split("\n")
    assert lines[block.first_line - 1].startswith("(APIServer pid=1)")  # original line numbers
    assert parsed.env_section and "vLLM Version" in parsed.env_text
    assert "Your current environment" in parsed.sections


def test_placeholder_and_screenshot() -> None:
    parsed = parse_issue((FIX / "issue_placeholder.md").read_text())
    assert parsed.blocks == []
    assert parsed.images == 1
    assert parse_collect_env(parsed.env_text)["placeholder"] is True
    assert parsed.sections["Before submitting a new issue..."] == ""


def test_fences_details_pre_and_attachments() -> None:
    body = (
        "Intro with @someone\n\n"
        "~~~~\nERROR one\n```\nstill inside the tilde fence\n~~~~\n\n"
        "<details><summary>server log</summary>\n\n"
        "INFO 10-25 13:07:02 [x.py:1] hello\n</details>\n\n"
        "<pre>RuntimeError: &lt;boom&gt;\nsecond line</pre>\n\n"
        "````python\nprint('```')\n````\n"
        "See https://github.com/user-attachments/files/30127649/output.txt and\n"
        "https://github.com/acme/serving/files/11587638/server.log, image.png ignored:\n"
        "https://github.com/acme/serving/files/1/screen.png\n"
    )
    parsed = parse_issue(body)
    texts = [b.text for b in parsed.blocks]
    assert texts[0] == "ERROR one\n```\nstill inside the tilde fence"
    assert any("RuntimeError: <boom>" in t for t in texts)
    assert any("print('```')" in t for t in texts)
    assert parsed.attachments == [
        "https://github.com/user-attachments/files/30127649/output.txt",
        "https://github.com/acme/serving/files/11587638/server.log",
    ]


def test_unfenced_log_used_when_no_block() -> None:
    body = (
        'I ran it and got\nTraceback (most recent call last):\n  File "x.py", line 1\n'
        "ValueError: No available memory for the cache blocks.\n"
    )
    parsed = parse_issue(body)
    assert len(parsed.blocks) == 1 and parsed.blocks[0].first_line == 2


def test_collect_env_old_layout() -> None:
    facts = parse_collect_env((FIX / "collect_env_old.txt").read_text())
    assert facts["vllm_version"] == "0.7.3"
    assert facts["torch_version"] == "2.4.0+cu121"
    assert facts["driver_version"] == "551.88"
    assert facts["gpus"] == [{"index": 0, "model": "NVIDIA GeForce RTX 4070 Laptop GPU"}]
    assert facts["wsl"] is True
    assert facts["packages"]["transformers"] == "4.44.2"
    assert "cudnn" not in facts  # "Could not collect"


def test_collect_env_new_layout() -> None:
    facts = parse_collect_env((FIX / "collect_env_new.txt").read_text())
    assert facts["vllm_version"] == "0.11.0rc2.dev41+g0307428d6"
    assert facts["vllm_git_sha"] == "0307428d6"
    assert facts["gpu_count"] == 2 and facts["gpu"] == "NVIDIA H100 NVL"
    assert facts["interconnect"] == "nvlink"
    assert facts["cuda_build"] == "12.8" and facts["driver_version"] == "575.51.03"
    assert facts["env"]["NCCL_CUMEM_ENABLE"] == "0"
    assert facts["vllm_build_flags"].startswith("CUDA Archs")


def test_collect_env_drops_secret_variables() -> None:
    facts = parse_collect_env(
        "PyTorch version: 2.4.0\nIs CUDA available: True\n"
        "HF_TOKEN=abcdefghijklmnopqrstuvwxyzABCDEFGH\nNCCL_DEBUG=INFO\n"
    )
    assert facts["env"] == {"NCCL_DEBUG": "INFO"}
