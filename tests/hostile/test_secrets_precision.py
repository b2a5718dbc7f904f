"""Redaction leaves ordinary log lines alone (issue 17, point 1: precision).

The acceptance: at least 99 % of the lines of the healthy corpus byte-identical after redaction.
Measured on every line of `corpus/healthy/` (and, for a wider sample, of the whole corpus and the
examples), and on generated lines of the kinds that look most like secrets without being any:
hex ids, sha256 digests, request ids, UUIDs, base64 image data, model names, paths, git commits.
"""

from __future__ import annotations

import base64
import random
import secrets
import string
import uuid
from pathlib import Path

from test_secrets_kinds import ALNUM, HEX

from triage.api import Engine, RunOptions
from triage.redact import redact

ROOT = Path(__file__).resolve().parents[2]
SEED = secrets.randbits(32)


def log_lines(*dirs: str) -> list[str]:
    out: list[str] = []
    for d in dirs:
        for path in sorted((ROOT / d).rglob("*")):
            if path.is_file() and path.suffix in (".log", ".txt", ".out", ".jsonl", ".json", ""):
                out.extend(path.read_text(encoding="utf-8", errors="replace").splitlines())
    return out


def altered_share(lines: list[str]) -> tuple[int, float]:
    altered = [line for line in lines if redact(line) != line]
    return len(altered), len(altered) / max(1, len(lines))


def test_healthy_corpus_is_at_least_99_percent_byte_identical() -> None:
    lines = log_lines("corpus/healthy")
    assert len(lines) > 1000
    altered, share = altered_share(lines)
    # measured 0 of 1733 lines (0.00 %) when this test was written
    assert share < 0.01, (altered, len(lines))


def test_whole_corpus_and_examples_are_left_alone() -> None:
    lines = log_lines("corpus", "examples")
    assert len(lines) > 5000
    altered, share = altered_share(lines)
    # measured 0 of 5926 lines when this test was written
    assert share < 0.01, (altered, len(lines))


def ordinary_lines(rng: random.Random) -> list[str]:
    """Lines that hold long random-looking strings that are not secrets."""

    def r(alphabet: str, n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    image = base64.b64encode(bytes(rng.randrange(256) for _ in range(600))).decode()
    models = (
        "meta-llama/Llama-3.1-8B-Instruct",
        "Qwen/Qwen2.5-72B-Instruct-AWQ",
        "deepseek-ai/DeepSeek-V3",
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "nvidia/Llama-3.1-Nemotron-70B-Instruct-HF",
    )
    model = rng.choice(models)
    return [
        f"(APIServer pid=1) INFO 12-01 10:00:00 [logger.py:43] Received request cmpl-{r(HEX, 32)}-0: prompt: 'hi'",
        f"(APIServer pid=1) INFO 12-01 10:00:00 [logger.py:43] Received request chatcmpl-{r(HEX, 32)}",
        f"request id {uuid.UUID(int=rng.getrandbits(128))} finished in 1.2 s",
        f"Pulling fs layer sha256:{r(HEX, 64)}",
        f"Digest: sha256:{r(HEX, 64)}",
        f"git commit {r(HEX, 40)}",
        f"vLLM API server version 0.11.1rc2.dev{rng.randrange(999)}+g{r(HEX, 9)}",
        f'{{"role": "user", "content": [{{"type": "image_url", "image_url": {{"url": "data:image/png;base64,{image}"}}}}]}}',
        f"(APIServer pid=1) INFO non-default args: {{'model': '{model}', 'tokenizer': '{model}', 'max_num_batched_tokens': 8192, 'api_key': None}}",
        f"Loading weights from /root/.cache/huggingface/hub/models--{model.replace('/', '--')}/snapshots/{r(HEX, 40)}/model-00001-of-00004.safetensors",
        f"GPU UUID: GPU-{uuid.UUID(int=rng.getrandbits(128))}",
        f"NCCL INFO comm 0x{r(HEX, 12)} rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0",
        f"pod vllm-{r(string.ascii_lowercase + string.digits, 10)}-{r(string.ascii_lowercase + string.digits, 5)} is Running",
        f"trace_id={r(HEX, 32)} span_id={r(HEX, 16)} status=200",
        f"cache key {r(HEX, 16)} hit; prefix_cache_hit_rate=0.{rng.randrange(99)}",
        f"tokenizer: {model}, bos_token=<|begin_of_text|>, eos_token=<|eot_id|>, max_tokens={rng.randrange(9999)}",
        f"password_hash_algorithm=argon2 session_id={r(ALNUM, 12)}",
        "HF_TOKEN=$HF_TOKEN  OPENAI_API_KEY=<your key>  api_key=None  token: required",
        f"http://localhost:8000/v1/models returned 200 in {rng.randrange(99)} ms",
        f"--ssl-keyfile /etc/tls/server.key --ssl-certfile /etc/tls/server.crt --port {rng.randrange(9999)}",
    ]


def test_generated_ordinary_lines_are_left_alone() -> None:
    rng = random.Random(SEED)
    lines = [line for _ in range(100) for line in ordinary_lines(rng)]
    altered = [line for line in lines if redact(line) != line]
    assert not altered, (SEED, altered[:5])


def test_reports_of_the_corpus_are_unchanged_by_redaction(engine: Engine) -> None:
    """Redaction at report level (facts by key name included) changes nothing without secrets."""
    plain = Engine(engine.kb, RunOptions(redact=False))
    logs = sorted((ROOT / "corpus").rglob("*.log"))[::4] + sorted((ROOT / "examples").glob("*.log"))
    assert len(logs) > 100
    from triage.redact import is_secret_name

    def holds_named_secret(value: object) -> bool:
        # a log that sets a credential by name (`--api-key test` in a launch line) has a secret
        if isinstance(value, dict):
            return any(is_secret_name(str(k)) or holds_named_secret(v) for k, v in value.items())
        if isinstance(value, list):
            return any(holds_named_secret(v) for v in value)
        return False

    changed = []
    for p in logs:
        unredacted = plain.run([str(p)])
        if holds_named_secret(unredacted.facts):
            continue
        if engine.run([str(p)]).to_json_dict() != unredacted.to_json_dict():
            changed.append(p.name)
    assert not changed


def test_the_knowledge_base_texts_are_left_alone() -> None:
    """Reports carry the knowledge base's titles, fixes, checks and examples: none is a secret
    (`HF_HUB_OFFLINE=1`, `--max-num-batched-tokens 8192`, `hf_transfer`, token counts, ...)."""
    import yaml

    def strings(value: object) -> list[str]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, dict):
            return [s for v in value.values() for s in strings(v)]
        if isinstance(value, list):
            return [s for v in value for s in strings(v)]
        return []

    texts = [
        s
        for path in sorted((ROOT / "signatures").rglob("*.yaml"))
        for s in strings(yaml.safe_load(path.read_text(encoding="utf-8")))
    ]
    assert len(texts) > 5000
    # measured 0 of 11,386 strings altered when this test was written
    assert [s for s in texts if redact(s) != s] == []
