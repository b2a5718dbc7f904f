"""Each secrets and privacy finding of the round-2 audit, as a test that failed before the fix.

reliability.md F4 (redactor misses and the keyword prefilter), F5 (structured facts by key name),
F6 (text/JSON/JSONL not redacted), newcomer.md D4 (the default history stores raw lines,
world-readable, and `triage draft` copies them into a signature). Secrets are generated here.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
import string
import subprocess
import sys
from pathlib import Path

import pytest
from test_secrets_kinds import ALNUM, Gen, leaked, planted

from triage.api import Engine
from triage.redact import _RULES, REDACTED, is_secret_name, redact, redact_report, redact_value

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "vllm-kv-cache-oom.log"
SEED = secrets.randbits(32)

# The kinds reliability.md F4 lists as missed (by the names of `test_secrets_kinds`).
AUDIT_MISSES = (
    "nvidia-ngc",
    "slack-app",
    "slack-webhook",
    "wandb-login",
    "netrc-wandb",
    "docker-login-p",
    "azure-account-key",
    "azure-sas-sig",
    "azure-shared-access-key",
    "docker-auth-json",
    "cookie",
    "aws-secret-prose",
    "gcp-service-account-private-key",
    "gcp-private-key-id",
    "pem-log-prefixed",
    "access-key-camel",
    "access-key-dash",
    "private-key-camel",
    "private-key-dash",
    "env-password-punct",
    "env-lowercase-pass",
    "url-password-slash",
    "flag--openai-api-key",
    "flag--hf_token",
    "vllm-non-default-api-key",
)


@pytest.mark.parametrize("kind", AUDIT_MISSES)
def test_f4_audit_miss_is_redacted(kind: str) -> None:
    for seed in (SEED, SEED + 1, SEED + 2):
        found = [p for p in planted(seed) if p.kind == kind]
        assert found, kind
        for p in found:
            out = redact(p.text)
            assert not leaked(p.value, out), (seed, p.text, out)
            assert REDACTED in out


def test_f4_every_generated_kind_is_redacted_alone_and_in_one_log() -> None:
    kinds = planted(SEED)
    assert len({p.kind for p in kinds}) >= 74
    missed = [p.kind for p in kinds if leaked(p.value, redact(p.text))]
    assert not missed, (SEED, missed)
    log = "\n".join(p.text for p in kinds)
    out = redact(log)
    assert not [p.kind for p in kinds if leaked(p.value, out)], SEED
    assert out.count("\n") == log.count("\n")  # line numbers survive multi-line blocks


def test_f4_prefilter_never_skips_what_the_regex_matches() -> None:
    """Each rule runs only when one of its keywords is in the text: every match it can make must
    hold one (near it, for the rules that look behind), on secrets and on random text alike."""
    rng = Gen(SEED).rng
    alphabet = string.ascii_letters + string.digits + "_-=:/@.'\"{}[] \\"
    texts = [p.text for p in planted(SEED)]
    texts += ["".join(rng.choice(alphabet) for _ in range(400)) for _ in range(300)]
    texts += ["accessKey=" + "x1" * 8, "private-key: " + "y2" * 8, "SharedAccessKey=" + "z3" * 8]
    for text in texts:
        for rule in _RULES:
            for m in rule.pattern.finditer(text):
                around = text[max(0, m.start() - 40) : m.end()].lower()
                assert any(k in around for k in rule.keywords), (rule.name, m.group(0))


def test_f5_structured_facts_are_redacted_by_key_name() -> None:
    g = Gen(SEED)
    api_key, hf_token, password = g.r(ALNUM, 32), g.r(ALNUM, 30), g.r(ALNUM, 12)
    facts = {
        "launch_args": {"api_key": [api_key], "hf_token": hf_token, "tokenizer": "m", "port": 8000},
        "env": {"DB_PASSWORD": password, "HF_HUB_ENABLE_HF_TRANSFER": "1"},
    }
    out = redact_value(facts)
    assert out["launch_args"] == {
        "api_key": [REDACTED],
        "hf_token": REDACTED,
        "tokenizer": "m",
        "port": 8000,
    }
    assert out["env"] == {"DB_PASSWORD": REDACTED, "HF_HUB_ENABLE_HF_TRANSFER": "1"}


def test_f5_launch_args_parsed_from_the_log_are_redacted_in_the_report(
    engine: Engine, tmp_path: Path
) -> None:
    g = Gen(SEED)
    api_key, hf_token = g.r(ALNUM, 32), "hf_" + g.r(string.ascii_letters, 34)
    lines = EXAMPLE.read_text().splitlines()
    lines[1] = lines[1].replace(
        "'model_tag'", f"'api_key': ['{api_key}'], 'hf_token': '{hf_token}', 'model_tag'"
    )
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + "\n")
    report = engine.run([str(log)])
    assert report.facts["launch_args"]["api_key"] == [REDACTED]
    assert report.facts["launch_args"]["hf_token"] == REDACTED
    assert report.facts["model"] == "deepseek-ai/DeepSeek-V3"  # everything else kept
    assert redact_report(report) == report  # redacted once, by the facade


@pytest.mark.parametrize(
    "name",
    [
        "api_key",
        "hf_token",
        "HF_TOKEN",
        "accessKey",
        "AccountKey",
        "SharedAccessKey",
        "openai-api-key",
        "X-Api-Key",
        "password",
        "db_pass",
        "client_secret",
        "private_key_id",
        "sig",
        "authorization",
        "Cookie",
    ],
)
def test_f5_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "tokenizer",
        "max_num_batched_tokens",
        "bos_token",
        "eos_token_id",
        "sort_key",
        "derived_key",
        "password_hash_algorithm",
        "ssl_keyfile",
        "signature",
        "key",
        "model",
        "kv_cache_dtype",
        "tokens",
    ],
)
def test_f5_ordinary_names(name: str) -> None:
    assert not is_secret_name(name)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "triage", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        cwd=ROOT,
        timeout=120,
        check=False,
    )


def d4_log(tmp_path: Path) -> tuple[Path, str, str]:
    """newcomer.md D4: a token and a URL password on an error line of a failing log."""
    g = Gen(SEED)
    token, password = "hf_" + g.r(string.ascii_letters, 36), g.r(ALNUM, 14)
    line = (
        "(APIServer pid=1) ERROR 12-01 10:00:00 [serving.py:112] RuntimeError: upstream auth "
        f"failed for token {token} at https://user:{password}@mirror.internal/v1"
    )
    text = EXAMPLE.read_text().splitlines()
    text[9] += f" token {token}"  # on the decisive line too
    log = tmp_path / "secret.log"
    log.write_text("\n".join([*text[:-1], line, text[-1]]) + "\n")
    return log, token, password


def test_f6_text_json_jsonl_are_redacted_by_default_and_no_redact_shows(tmp_path: Path) -> None:
    log, token, password = d4_log(tmp_path)
    for fmt in ("text", "json", "jsonl", "markdown"):
        out = cli("--no-history", "-f", fmt, str(log)).stdout
        assert "upstream auth" in out or fmt == "markdown"
        assert token not in out and password not in out, fmt
    shown = cli("--no-history", "--no-redact", "-f", "json", str(log)).stdout
    assert token in shown and password in shown


def test_d4_default_history_is_private_and_redacted(tmp_path: Path) -> None:
    """No TRIAGE_DB: the default location under XDG_DATA_HOME, as a user's plain `triage FILE`."""
    log, token, password = d4_log(tmp_path)
    data = tmp_path / "xdg-data"
    env = {"XDG_DATA_HOME": str(data), "TRIAGE_DB": ""}
    for args in ((str(log),), ("--no-redact", str(log))):  # the history stays redacted even then
        assert cli(*args, env=env).returncode == 1
    db = data / "triage" / "history.db"
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700
    for p in db.parent.iterdir():  # -wal and -shm too
        assert stat.S_IMODE(p.stat().st_mode) & 0o077 == 0, p
    raw = b"".join(p.read_bytes() for p in db.parent.iterdir()).decode("latin-1")
    assert token not in raw and password not in raw
    assert "upstream auth failed" in raw  # the line is recorded, redacted
    listing = cli("unknown", "-f", "json", env=env).stdout
    assert "upstream auth failed" in listing and token not in listing and password not in listing
    cid = re.search(r'"id": (\d+)', listing)
    assert cid
    draft = cli("draft", cid.group(1), "-o", "-", env=env).stdout
    assert "upstream auth failed" in draft
    assert token not in draft and password not in draft
    # the drafted pattern still fires on the raw line, whatever secret the next log holds
    pattern = re.search(r"- regex: '(.*)'", draft)
    assert pattern
    raw_line = log.read_text().splitlines()[-2]
    assert re.search(pattern.group(1).replace("''", "'"), raw_line)


def test_d4_an_old_database_with_raw_lines_is_redacted_when_listed(tmp_path: Path) -> None:
    """A history written before redaction: `unknown` and `draft` redact what they read."""
    import sqlite3

    from triage.api import RunOptions, load_kb
    from triage.history.recorder import record_run

    log, token, password = d4_log(tmp_path)
    db = tmp_path / "old.db"
    record_run(Engine(load_kb(), RunOptions(redact=False)).run([str(log)]), db)
    conn = sqlite3.connect(db)
    # what an older triage stored: the raw line
    conn.execute("UPDATE unknown_lines SET text = ?", (log.read_text().splitlines()[-2],))
    conn.commit()
    conn.close()
    for args in (
        ("unknown", "--db", str(db)),
        ("unknown", "show", "1", "--db", str(db)),
        ("unknown", "-f", "json", "--db", str(db)),
        ("draft", "1", "-o", "-", "--db", str(db)),
    ):
        out = cli(*args).stdout
        assert out and token not in out and password not in out, args


def test_help_says_runs_are_recorded_and_how_to_stop_it() -> None:
    out = " ".join(cli("--help").stdout.split())
    assert "recorded" in out and "--no-history" in out and "history.db" in out
    assert "--no-redact" in out


def test_caches_are_private(tmp_path: Path) -> None:
    cache = tmp_path / "xdg-cache"
    env = {"XDG_CACHE_HOME": str(cache), "TRIAGE_CACHE_DIR": "", "TRIAGE_KB": ""}
    assert cli("kb", "build", env=env).returncode == 0
    assert cli("--no-history", str(EXAMPLE), env=env).returncode == 1
    root = cache / "triage"
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    files = [p for p in root.rglob("*") if p.is_file()]
    assert files
    for p in files:
        assert stat.S_IMODE(p.stat().st_mode) & 0o077 == 0, p


def one_class(text: str) -> bool:
    """Only lower case, only upper case or only digits (besides punctuation)."""
    classes = (str.islower, str.isupper, str.isdigit)
    return sum(any(test(c) for c in text) for test in classes) < 2


def shared_head(values: list[str]) -> int:
    """How many leading characters all values share."""
    n = 0
    while all(len(v) > n and v[n] == values[0][n] for v in values):
        n += 1
    return n


def test_a_secret_cut_by_a_length_limit_keeps_no_8_characters() -> None:
    """Evidence is cut at 2,000 characters and `--explain` terms at 120, before the report is
    redacted: a secret cut there must not leave 8 of its generated characters behind."""
    seeds = [planted(SEED + i) for i in range(4)]
    # the characters every seed shares are the kind's fixed prefix (`hf_`, `sk-proj-`, ...)
    fixed = {p.kind: shared_head([s[i].value for s in seeds]) for i, p in enumerate(seeds[0])}
    kept = []
    for p in seeds[0]:
        if p.multiline or p.kind == "telegram-bot":  # digits:AA... cut is a bare number
            continue
        at, head = p.text.index(p.value), fixed[p.kind]
        for keep in range(head + 8, len(p.value)):
            if one_class(p.value[head:keep]) or (p.value[:keep].isalpha() and keep < 12):
                # reads as a word ("password: required", "hf_transfer"): kept by design, so that
                # prose stays; a random cut looks like that about once in a thousand
                continue
            out = redact(p.text[: at + keep])
            if p.value[head : head + 8] in out or p.value[keep - 8 : keep] in out:
                kept.append((p.kind, keep - head, out[-60:]))
    assert not kept, (SEED, kept[:10])
