"""Test helper: a corpus of token-shaped secrets generated at test time, embedded in log lines.

Nothing token-shaped is committed to the repository (push protection and partner scanning would
flag it); the strings are built here from a seeded RNG, shaped after the public formats.
"""

from __future__ import annotations

import random
import string

ALNUM = string.ascii_letters + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
B64 = string.ascii_letters + string.digits + "+/"
URLSAFE = string.ascii_letters + string.digits + "-_"
HEX = "0123456789abcdef"


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def secret_corpus(seed: int = 7) -> list[tuple[str, str]]:
    """(secret, log line containing it): at least 50 pairs, a few per shape and context."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []

    def add(secret: str, line: str) -> None:
        assert secret in line
        out.append((secret, line))

    for _ in range(4):
        s = "hf_" + _r(rng, string.ascii_letters, 34)
        add(s, f"(APIServer pid=1) INFO 10-25 13:07:02 [hub.py:12] login with token {s}")
    s = "hf_" + _r(rng, string.ascii_letters, 34)
    add(s, f"HF_TOKEN={s}")
    s = "api_org_" + _r(rng, string.ascii_letters, 34)
    add(s, f"export HUGGING_FACE_HUB_TOKEN='{s}'")
    for _ in range(3):
        s = "sk-proj-" + _r(rng, URLSAFE, 74) + "T3BlbkFJ" + _r(rng, URLSAFE, 74)
        add(s, f'curl -H "Authorization: Bearer {s}" https://api.example.com/v1/chat/completions')
    for _ in range(2):
        s = "sk-" + _r(rng, ALNUM, 20) + "T3BlbkFJ" + _r(rng, ALNUM, 20)
        add(s, f"OPENAI_API_KEY={s} python bench.py")
    for _ in range(3):
        s = "sk-ant-api03-" + _r(rng, URLSAFE, 93) + "AA"
        add(s, f'{{"anthropic_api_key": "{s}", "model": "claude"}}')
    for prefix in ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"):
        s = prefix + _r(rng, ALNUM, 36)
        add(s, f"git clone https://{s}@github.com/org/private-repo.git")
    for _ in range(2):
        s = "github_pat_" + _r(rng, ALNUM, 22) + "_" + _r(rng, ALNUM, 59)
        add(s, f"\x1b[1;32mINFO\x1b[0m using GH token {s} for the release upload")
    for _ in range(3):
        s = "AKIA" + _r(rng, UPPER_ALNUM, 16)
        add(s, f"aws_access_key_id = {s}")
    for _ in range(3):
        s = _r(rng, B64, 40)
        add(s, f"aws_secret_access_key = {s}")
    s = _r(rng, B64, 40)
    add(s, f"AWS_SECRET_ACCESS_KEY={s}")
    for _ in range(3):
        s = _r(rng, URLSAFE, 40)
        add(s, f"Authorization: Bearer {s}")
    for scheme, host in (("postgres", "db.internal:5432/app"), ("redis", "cache:6379/0"),
                         ("https", "registry.example.com/v2/"), ("mysql", "10.0.0.5/metrics")):
        s = _r(rng, ALNUM, 18)
        add(s, f"connecting to {scheme}://svc_user:{s}@{host}")
    for flag in ("--api-key", "--hf-token", "--password"):
        s = _r(rng, ALNUM, 32)
        add(s, f"vllm serve Qwen/Qwen3-8B {flag} {s} --port 8000")
    for name in ("WANDB_API_KEY", "DB_PASSWORD", "JWT_SECRET", "SLACK_BOT_TOKEN", "MY_SERVICE_KEY"):
        s = _r(rng, ALNUM, 28)
        add(s, f"{name}={s}")
    s = _r(rng, ALNUM, 24)
    add(s, f"password: {s}")
    s = _r(rng, ALNUM, 24)
    add(s, f"(APIServer pid=1) INFO non-default args: {{'model': 'x', 'api_key': '{s}'}}")
    s = "xoxb-" + _r(rng, string.digits, 12) + "-" + _r(rng, string.digits, 12) + "-" + _r(rng, ALNUM, 24)
    add(s, f"slack notify with {s}")
    s = "glpat-" + _r(rng, URLSAFE, 20)
    add(s, f"https://oauth2:{s}@gitlab.example.com/group/proj.git")
    s = "glpat-" + _r(rng, URLSAFE, 20)
    add(s, f"CI token {s} expired")
    s = "pypi-AgEIcHlwaS5vcmc" + _r(rng, URLSAFE, 60)
    add(s, f"twine upload -p {s} dist/*")
    s = "npm_" + _r(rng, ALNUM, 36)
    add(s, f"//registry.npmjs.org/:_authToken={s}")
    s = "AIza" + _r(rng, URLSAFE, 35)
    add(s, f"https://maps.example.com/api?key={s}&q=1")
    s = "sk_live_" + _r(rng, ALNUM, 24)
    add(s, f"stripe key {s}")
    s = "dop_v1_" + _r(rng, HEX, 64)
    add(s, f"doctl auth init -t {s}")
    s = "eyJ" + _r(rng, URLSAFE, 30) + ".eyJ" + _r(rng, URLSAFE, 60) + "." + _r(rng, URLSAFE, 43)
    add(s, f"cookie session={s}; Path=/")
    s = _r(rng, B64, 64)
    add(s, f"-----BEGIN RSA PRIVATE KEY-----\n{s}\n-----END RSA PRIVATE KEY-----")
    return out


HARMLESS_LINES = [
    "(APIServer pid=1) INFO 10-25 13:07:02 [api_server.py:1839] vLLM API server version 0.11.0",
    "HF_HUB_ENABLE_HF_TRANSFER=1 uses hf_transfer for faster downloads",
    "(APIServer pid=1) INFO non-default args: {'max_tokens': 4096, 'max_model_len': 32768}",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "request id 3f2504e0-4f89-11d3-9a0c-0305e82c3301 finished in 1.2 s",
    "NCCL INFO Channel 00/24 : 0[0] -> 1[1] via P2P/CUMEM/read",
    "NVRM: Xid (PCI:0000:3d:00): 31, pid=1234, name=python3, Ch 00000008",
    "password_hash_algorithm=argon2",
    "OPENAI_API_KEY=sk-... (redacted by user)",
    "(EngineCore_DP0 pid=270) INFO [gpu_worker.py:298] Available KV cache memory: 41.25 GiB",
    "Avg prompt throughput: 1200.5 tokens/s, Avg generation throughput: 95.1 tokens/s",
    "Loading safetensors checkpoint shards: 100% Completed | 8/8 [00:41<00:00,  5.16s/it]",
    "tokenizer: meta-llama/Llama-3.1-8B-Instruct, bos_token=<|begin_of_text|>",
    "INFO:     127.0.0.1:53412 - \"POST /v1/completions HTTP/1.1\" 200 OK",
    "http://localhost:8000/v1/models returned 200",
    "--max-num-batched-tokens 16384 --max-num-seqs 16 --kv-cache-dtype fp8",
    "git commit 0307428d6a1b2c3d4e5f60718293a4b5c6d7e8f9",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "HF_TOKEN=hf_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "export CUDA_VISIBLE_DEVICES=0,1,2,3",
]
