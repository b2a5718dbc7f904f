"""Secrets planted in a real failing log reach no output of triage (issue 17, point 1).

Every generated kind (see `test_secrets_kinds`) is planted three ways: appended to a copy of the
decisive line of `examples/vllm-kv-cache-oom.log` and to an unrecognized error line; inside the
launch arguments (vLLM's `non-default args: {...}` and a `vllm serve --api-key ...` command in a
run directory); and in JSON fields (journald `-o json` input: the message, a structured message
and fields triage does not show). Then every output is collected (text, `--explain`, json, jsonl,
markdown, `triage comment`, `triage run DIR` stdout/triage.md/triage.json, `--follow` events, the
history database's raw bytes, `triage unknown` and `unknown show`, `triage draft`) and searched
for any 12-character piece of any secret. The same log with `--no-redact` shows the secrets: the
planting is real, so a leak would be seen.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_secrets_kinds import ALNUM, Gen, Planted, leaked, planted

from triage.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "vllm-kv-cache-oom.log"
DECISIVE = 10  # the line of the example that the kv-cache-no-memory signature fires on
NON_DEFAULT = 2  # its `non-default args: {...}` line
PER_LOG = 10  # decisive copies per log: with the 2 supporting lines, all 12 evidence slots
SEED = int(os.environ.get("TRIAGE_SECRET_SEED") or secrets.randbits(32))
PREFIX = "(APIServer pid=1) ERROR 12-01 10:00:00 [serving.py:112] "


def tag(i: int) -> str:
    """A marker of letters only (masking leaves it alone): shows which planted line an output shows."""
    return "plant" + string.ascii_lowercase[i // 26] + string.ascii_lowercase[i % 26]


def launch_kinds(g: Gen) -> list[Planted]:
    """Secrets in launch arguments, as vLLM prints them and as a launch script holds them."""
    return [
        Planted("launch-args-api-key", g.r(ALNUM, 32), ""),
        Planted("launch-args-hf-token", "hf_" + g.r(string.ascii_letters, 34), ""),
        Planted("launch-command-api-key", g.r(ALNUM, 32), ""),
        Planted("launch-command-hf-token", g.r(ALNUM, 32), ""),
    ]


def non_default_args(api_key: str, hf_token: str) -> str:
    args = {
        "model_tag": "deepseek-ai/DeepSeek-V3",
        "api_key": [api_key],
        "hf_token": hf_token,
        "data_parallel_size": 8,
        "enable_expert_parallel": True,
        "gpu_memory_utilization": 0.9,
    }
    return f"(APIServer pid=1) INFO 10-25 13:07:02 [utils.py:233] non-default args: {args!r}"


def planted_log(kinds: list[Planted], start: int, launch: list[Planted]) -> str:
    """The example with each kind on a copy of the decisive line and on an unrecognized line."""
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    out: list[str] = []
    for number, line in enumerate(lines, 1):
        if number == NON_DEFAULT:
            line = non_default_args(launch[0].value, launch[1].value)
        out.append(line)
        if number != DECISIVE:
            continue
        for i, kind in enumerate(kinds, start):
            if kind.multiline:
                out.extend(kind.text.splitlines())
            else:
                out.append(f"{line} {tag(i)} {kind.text}")
    tail = out[-5:]
    del out[-5:]
    out.extend(
        f"{PREFIX}RuntimeError: upstream request failed {tag(i)} {kind.text}"
        for i, kind in enumerate(kinds, start)
        if not kind.multiline
    )
    return "\n".join(out + tail) + "\n"


def journald(log: str, launch: list[Planted]) -> str:
    """The log as `journalctl -o json` prints it; secrets also in fields triage does not show."""
    cmd = f"vllm serve m --api-key {launch[2].value} --hf-token {launch[3].value}"
    out = []
    for i, line in enumerate(log.splitlines()):
        record: dict[str, Any] = {
            "__REALTIME_TIMESTAMP": str(1764583200000000 + i),
            "_HOSTNAME": "gpu-node-1",
            "SYSLOG_IDENTIFIER": "vllm",
            "_PID": "4242",
            "_CMDLINE": cmd,
            "MESSAGE": line,
        }
        out.append(json.dumps(record))
    # a structured message: journald and docker loggers keep JSON objects as they are
    structured = {"msg": "upstream request failed", "api_key": launch[2].value}
    out.append(json.dumps({"SYSLOG_IDENTIFIER": "vllm", "MESSAGE": structured}))
    return "\n".join(out) + "\n"


def groups() -> list[list[Planted]]:
    kinds = planted(SEED)
    single = [k for k in kinds if not k.multiline]
    multi = [k for k in kinds if k.multiline]
    out = [single[i : i + PER_LOG] for i in range(0, len(single), PER_LOG)]
    out[0] = out[0] + multi
    return out


def call(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run `triage ARGV` in this process (the real entry point) and return its stdout."""
    capsys.readouterr()
    try:
        main(argv)
    except SystemExit as exc:
        assert exc.code in (0, 1, None), (argv, exc.code, capsys.readouterr().err)
    return capsys.readouterr().out


def follow_events(path: Path, redact: bool = True) -> str:
    from triage.api import Engine, RunOptions, load_kb
    from triage.follow import run_follow

    out = io.StringIO()
    with path.open("rb") as fh:
        run_follow(["-"], Engine(load_kb(), RunOptions(redact=redact)), out, stdin=fh)
    return out.getvalue()


def db_bytes(db: Path) -> str:
    """The history database as stored: the file, its WAL and shared memory, every byte."""
    data = b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*") if p.is_file())
    return data.decode("latin-1")


def outputs(
    log: Path, run_dir: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> Iterator[tuple[str, str]]:
    name = str(log)
    for fmt in ("text", "json", "jsonl", "markdown"):
        yield f"-f {fmt}", call(["-f", fmt, "--db", str(db), name], capsys)
    yield "--explain", call(["--explain", "--db", str(db), name], capsys)
    yield "-f json --explain", call(["-f", "json", "--explain", "--db", str(db), name], capsys)
    yield "comment", call(["comment", name], capsys)
    yield "run stdout", call(["run", str(run_dir), "--history-db", str(db)], capsys)
    yield "run triage.md", (run_dir / "triage.md").read_text(encoding="utf-8")
    yield "run triage.json", (run_dir / "triage.json").read_text(encoding="utf-8")
    yield "--follow", follow_events(log)
    yield "history db", db_bytes(db)
    listing = call(["unknown", "--db", str(db)], capsys)
    yield "unknown", listing
    clusters = json.loads(call(["unknown", "--db", str(db), "-f", "json", "-n", "200"], capsys))
    yield "unknown -f json", json.dumps(clusters)
    for cluster in clusters:
        cid = str(cluster["id"])
        yield f"unknown show {cid}", call(["unknown", "show", cid, "--db", str(db)], capsys)
        yield f"draft {cid}", call(["draft", cid, "-o", "-", "--db", str(db)], capsys)


def scenario(
    tmp_path: Path, index: int, kinds: list[Planted], json_input: bool
) -> tuple[Path, Path, Path, list[Planted]]:
    g = Gen(SEED * 31 + index)
    launch = launch_kinds(g)
    log = planted_log(kinds, index * PER_LOG, launch)
    text = journald(log, launch) if json_input else log
    run_dir = tmp_path / f"run{index}"
    run_dir.mkdir()
    path = run_dir / "server.log"
    path.write_text(text, encoding="utf-8")
    (run_dir / "cmd.sh").write_text(
        "#!/bin/sh\nexec vllm serve deepseek-ai/DeepSeek-V3 --data-parallel-size 8 "
        f"--api-key {launch[2].value} --hf-token {launch[3].value}\n",
        encoding="utf-8",
    )
    return path, run_dir, tmp_path / f"history{index}.db", kinds + launch


@pytest.mark.parametrize("json_input", [False, True], ids=["plain", "journald-json"])
def test_no_output_leaks_a_planted_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], json_input: bool
) -> None:
    leaks: list[str] = []
    seen_outputs: set[str] = set()
    total = 0
    for index, kinds in enumerate(groups()):
        log, run_dir, db, everything = scenario(tmp_path, index, kinds, json_input)
        total += len(everything)
        for output, text in outputs(log, run_dir, db, capsys):
            seen_outputs.add(
                output.split(" ")[0] if output.startswith(("unknown show", "draft")) else output
            )
            leaks.extend(f"{output}: {p.kind}" for p in everything if leaked(p.value, text))
    assert total >= 74 + 4
    assert {
        "-f text",
        "history db",
        "--follow",
        "draft",
        "unknown",
        "run triage.json",
    } <= seen_outputs
    assert not leaks, f"seed {SEED}: {len(leaks)} leaks: {leaks[:40]}"


def test_the_planted_secrets_are_shown_without_redaction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--no-redact` prints what was planted: each kind reaches the evidence, the unrecognized
    lines or the facts, so the test above would see any leak. The history stays redacted."""
    shown: set[str] = set()
    expected: set[str] = set()
    for index, kinds in enumerate(groups()):
        log, _, db, everything = scenario(tmp_path, index, kinds, json_input=False)
        expected |= {
            p.kind
            for p in everything
            if not p.multiline and not p.kind.startswith("launch-command")
        }
        raw = call(["-f", "json", "--no-redact", "--db", str(db), str(log)], capsys)
        shown |= {p.kind for p in everything if leaked(p.value, raw)}
        follow = follow_events(log, redact=False)
        assert any(leaked(p.value, follow) for p in everything)
        history = db_bytes(db)
        assert not [p.kind for p in everything if leaked(p.value, history)], f"seed {SEED}"
    assert expected - shown == set(), f"seed {SEED}: not shown {sorted(expected - shown)}"


def test_markers_show_every_planted_line_in_the_comment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Markdown outputs show every planted evidence line (redacted), so their check is real."""
    for index, kinds in enumerate(groups()):
        log, _, _, _ = scenario(tmp_path, index, kinds, json_input=False)
        comment = call(["comment", str(log)], capsys)
        markdown = call(["-f", "markdown", "--no-history", str(log)], capsys)
        for i, kind in enumerate(kinds, index * PER_LOG):
            if not kind.multiline:
                assert tag(i) in comment and tag(i) in markdown, (kind.kind, f"seed {SEED}")
