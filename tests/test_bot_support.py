"""Test helpers (no tests here): a secret corpus generated at test time, and a fake forge.

Nothing token-shaped is committed to the repository (push protection and partner scanning would
flag it); the strings are built here from a seeded RNG, shaped after the public formats.
The fake forge is a real HTTP server on loopback implementing the GitHub and Gitea comment
endpoints, checking the Authorization header on every API call.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import random
import string
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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
    for scheme, host in (
        ("postgres", "db.internal:5432/app"),
        ("redis", "cache:6379/0"),
        ("https", "registry.example.com/v2/"),
        ("mysql", "10.0.0.5/metrics"),
    ):
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
    s = (
        "xoxb-"
        + _r(rng, string.digits, 12)
        + "-"
        + _r(rng, string.digits, 12)
        + "-"
        + _r(rng, ALNUM, 24)
    )
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
    'INFO:     127.0.0.1:53412 - "POST /v1/completions HTTP/1.1" 200 OK',
    "http://localhost:8000/v1/models returned 200",
    "--max-num-batched-tokens 16384 --max-num-seqs 16 --kv-cache-dtype fp8",
    "git commit 0307428d6a1b2c3d4e5f60718293a4b5c6d7e8f9",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "HF_TOKEN=hf_" + "x" * 34,  # a placeholder, built here so no token-shaped string is committed
    "export CUDA_VISIBLE_DEVICES=0,1,2,3",
]


class FakeForge:
    """GitHub (`kind="github"`) or Gitea (`kind="gitea"`, API under /api/v1) comment endpoints."""

    def __init__(
        self, kind: str = "github", token: str = "", bot_login: str = "triage-bot[bot]"
    ) -> None:
        self.kind = kind
        self.token = token or "test-token-" + "".join(random.choice(ALNUM) for _ in range(20))
        self.bot_login = bot_login
        self.comments: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.next_id = 1000
        self.log: list[tuple[str, str, bool]] = []  # (method, path, authorized)
        self.posted: list[str] = []  # every body created or edited
        self.edits = 0
        self.creates = 0
        self.fail_next: list[tuple[int, dict[str, str]]] = []
        self.files: dict[str, bytes] = {}
        self.unauthorized = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def api_url(self) -> str:
        return self.base + ("/api/v1" if self.kind == "gitea" else "")

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def add_comment(
        self, repo: str, number: int, body: str, login: str, type_: str = "User"
    ) -> int:
        self.next_id += 1
        self.comments.setdefault((repo, number), []).append(
            {"id": self.next_id, "body": body, "user": {"login": login, "type": type_}}
        )
        return self.next_id

    def thread_comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        return self.comments.get((repo, number), [])

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        forge = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _send(
                self,
                status: int,
                obj: Any = None,
                headers: dict[str, str] | None = None,
                raw: bytes | None = None,
            ) -> None:
                data = raw if raw is not None else json.dumps(obj).encode()
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method: str) -> None:
                url = urllib.parse.urlsplit(self.path)
                path = url.path
                if path.startswith("/files/"):
                    forge.log.append((method, path, "Authorization" in self.headers))
                    if path in forge.files:
                        self._send(200, raw=forge.files[path])
                    else:
                        self._send(404, {"message": "Not Found"})
                    return
                expected = ("Bearer " if forge.kind == "github" else "token ") + forge.token
                authorized = self.headers.get("Authorization") == expected
                forge.log.append((method, path, authorized))
                if not authorized:
                    forge.unauthorized += 1
                    self._send(401, {"message": "Bad credentials"})
                    return
                if forge.kind == "gitea":
                    if not path.startswith("/api/v1/"):
                        self._send(404, {"message": "Not Found"})
                        return
                    path = path[len("/api/v1") :]
                if forge.fail_next and method in ("POST", "PATCH"):
                    status, headers = forge.fail_next.pop(0)
                    self._send(status, {"message": "rate limited"}, headers)
                    return
                parts = path.strip("/").split("/")
                query = urllib.parse.parse_qs(url.query)
                body: dict[str, Any] = {}
                if method in ("POST", "PATCH"):
                    length = int(self.headers.get("Content-Length", "0"))
                    body = json.loads(self.rfile.read(length) or b"{}")
                if parts == ["user"] and method == "GET":
                    self._send(200, {"login": forge.bot_login})
                elif (
                    len(parts) == 6
                    and parts[0] == "repos"
                    and parts[3] == "issues"
                    and parts[5] == "comments"
                ):
                    repo, number = f"{parts[1]}/{parts[2]}", int(parts[4])
                    items = forge.comments.setdefault((repo, number), [])
                    if method == "GET":
                        size = int((query.get("per_page") or query.get("limit") or ["30"])[0])
                        page = int((query.get("page") or ["1"])[0])
                        self._send(200, items[(page - 1) * size : page * size])
                    elif method == "POST":
                        forge.next_id += 1
                        item = {
                            "id": forge.next_id,
                            "body": body["body"],
                            "user": {"login": forge.bot_login, "type": "Bot"},
                        }
                        items.append(item)
                        forge.creates += 1
                        forge.posted.append(body["body"])
                        self._send(201, item)
                    else:
                        self._send(405, {"message": "no"})
                elif (
                    len(parts) == 6
                    and parts[3] == "issues"
                    and parts[4] == "comments"
                    and method == "PATCH"
                ):
                    cid = int(parts[5])
                    for items in forge.comments.values():
                        for item in items:
                            if item["id"] == cid:
                                if item["user"]["login"] != forge.bot_login:
                                    self._send(403, {"message": "not yours"})
                                    return
                                item["body"] = body["body"]
                                forge.edits += 1
                                forge.posted.append(body["body"])
                                self._send(200, item)
                                return
                    self._send(404, {"message": "Not Found"})
                else:
                    self._send(404, {"message": "Not Found"})

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def do_PATCH(self) -> None:
                self._route("PATCH")

        return Handler


def sign(secret: bytes, body: bytes) -> str:
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


def deliver(
    url: str, body: bytes, headers: dict[str, str]
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """POST body to the webhook server at url; returns (status, JSON answer, headers)."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    try:
        conn.request(
            "POST", "/", body=body, headers={"Content-Type": "application/json", **headers}
        )
        resp = conn.getresponse()
        data = resp.read()
        answer = json.loads(data) if data else {}
        return resp.status, answer, {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()


def issue_event(
    action: str,
    body: str,
    *,
    number: int = 7,
    repo: str = "acme/serving",
    sender: str = "reporter",
    sender_type: str = "User",
    gitea: bool = False,
) -> dict[str, Any]:
    user: dict[str, Any] = {"login": "reporter"}
    snd: dict[str, Any] = {"login": sender}
    if not gitea:
        user["type"] = "User"
        snd["type"] = sender_type
    return {
        "action": action,
        "issue": {
            "number": number,
            "title": "[Bug]: start-up fails",
            "body": body,
            "state": "open",
            "user": user,
            "labels": [],
        },
        "repository": {"full_name": repo},
        "sender": snd,
    }
