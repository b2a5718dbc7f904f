"""Secrets generated at test time: one per documented kind, random characters in the documented shape.

No token-shaped string is written in the repository: every secret is built here from its prefix
(or its context) and random characters, fresh for each seed. `Planted.text` is the secret in the
context it appears in in real logs (a flag, an env line, a header, a JSON field, ...); tests append
it to log lines. `value` is what must never reach an output.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
PUNCT_PASSWORD = ALNUM + "@!#%^*~"


@dataclass(frozen=True)
class Planted:
    kind: str
    value: str  # the secret itself: no part of it may survive redaction
    text: str  # the secret in its context, as a log shows it
    multiline: bool = False


class Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def r(self, alphabet: str, n: int) -> str:
        # every kind of secret mixes letters and digits: a generated key does, a word does not
        while True:
            out = "".join(self.rng.choice(alphabet) for _ in range(n))
            has_digit = any(c.isdigit() for c in out) or not any(c.isdigit() for c in alphabet)
            has_alpha = any(c.isalpha() for c in out) or not any(c.isalpha() for c in alphabet)
            if has_digit and has_alpha:
                return out

    def password(self, n: int = 18) -> str:
        """A password with the characters the old value class refused (`@`, `!`)."""
        core = self.r(ALNUM, n - 2)
        cut = self.rng.randrange(1, len(core))
        return core[:cut] + "@!" + core[cut:]


def _pem_body(g: Gen, lines: int) -> list[str]:
    return [g.r(B64, 64) for _ in range(lines)]


def _kinds(g: Gen) -> list[Planted]:
    out: list[Planted] = []

    def add(kind: str, value: str, text: str, multiline: bool = False) -> None:
        assert value in text or multiline, kind
        out.append(Planted(kind, value, text, multiline))

    def token(kind: str, value: str, context: str = "using {}") -> None:
        add(kind, value, context.format(value))

    # --- prefix-shaped tokens ---
    token("huggingface", "hf_" + g.r(string.ascii_letters, 34), "login with token {}")
    token("huggingface-org", "api_org_" + g.r(string.ascii_letters, 34))
    token("openai-legacy", "sk-" + g.r(ALNUM, 20) + "T3BlbkFJ" + g.r(ALNUM, 20))
    token("openai-project", "sk-proj-" + g.r(URLSAFE, 74) + "T3BlbkFJ" + g.r(URLSAFE, 74))
    token("openai-service", "sk-svcacct-" + g.r(URLSAFE, 64))
    token("openrouter", "sk-or-v1-" + g.r(HEX, 64))
    token("anthropic", "sk-ant-api03-" + g.r(URLSAFE, 93) + "AA")
    for prefix in ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"):
        token(
            "github-" + prefix[:3], prefix + g.r(ALNUM, 36), "git clone https://{}@github.com/o/r"
        )
    token("github-pat", "github_pat_" + g.r(ALNUM, 22) + "_" + g.r(ALNUM, 59))
    token("aws-access-key-id", "AKIA" + g.r(UPPER_ALNUM, 16), "aws_access_key_id = {}")
    token("aws-temporary-key-id", "ASIA" + g.r(UPPER_ALNUM, 16), "key id {} expired")
    slack = "-".join((g.r(string.digits, 12), g.r(string.digits, 12), g.r(ALNUM, 24)))
    token("slack-bot", "xoxb-" + slack, "slack notify with {}")
    token("slack-user", "xoxp-" + slack + g.r(HEX, 8))
    app = "-".join(("1", g.r(UPPER_ALNUM, 11), g.r(string.digits, 13), g.r(HEX, 64)))
    token("slack-app", "xapp-" + app, "socket mode {}")
    hook = f"T{g.r(UPPER_ALNUM, 10)}/B{g.r(UPPER_ALNUM, 10)}/{g.r(ALNUM, 24)}"
    token("slack-webhook", hook, "POST https://hooks.slack.com/services/{} failed")
    token(
        "discord-webhook",
        g.r(string.digits, 18) + "/" + g.r(URLSAFE, 68),
        "notify https://discord.com/api/webhooks/{}",
    )
    token("gitlab", "glpat-" + g.r(URLSAFE, 20), "CI token {} expired")
    token("pypi", "pypi-AgEIcHlwaS5vcmc" + g.r(URLSAFE, 60), "twine upload -p {} dist/*")
    token("npm", "npm_" + g.r(ALNUM, 36), "//registry.npmjs.org/:_authToken={}")
    token("google-api", "AIza" + g.r(URLSAFE, 35), "https://maps.example.com/api?key={}&q=1")
    token("google-oauth-secret", "GOCSPX-" + g.r(URLSAFE, 28))
    token("google-oauth-token", "ya29." + g.r(URLSAFE, 120))
    token("stripe", "sk_live_" + g.r(ALNUM, 24), "stripe key {}")
    token("stripe-restricted", "rk_test_" + g.r(ALNUM, 24))
    token("digitalocean", "dop_v1_" + g.r(HEX, 64), "doctl auth init -t {}")
    token("nvidia-ngc", "nvapi-" + g.r(URLSAFE, 64), "pulling nvcr.io with {}")
    token("replicate", "r8_" + g.r(ALNUM, 37))
    token("groq", "gsk_" + g.r(ALNUM, 52))
    token("xai", "xai-" + g.r(ALNUM, 80))
    token("perplexity", "pplx-" + g.r(ALNUM, 48))
    token("tavily", "tvly-" + g.r(ALNUM, 32))
    token("langsmith", "lsv2_pt_" + g.r(HEX, 32) + "_" + g.r(HEX, 10))
    token("pinecone", "pcsk_" + g.r(ALNUM, 6) + "_" + g.r(ALNUM, 60))
    token("databricks", "dapi" + g.r(HEX, 32))
    token("sendgrid", "SG." + g.r(URLSAFE, 22) + "." + g.r(URLSAFE, 43))
    token("telegram-bot", g.r(string.digits, 10) + ":AA" + g.r(URLSAFE, 33), "bot{}/sendMessage")
    token("vault", "hvs." + g.r(URLSAFE, 90))
    token("age-secret-key", "AGE-SECRET-KEY-1" + g.r(UPPER_ALNUM, 58))
    token("shopify", "shpat_" + g.r(HEX, 32))
    token("postman", "PMAK-" + g.r(HEX, 24) + "-" + g.r(HEX, 34))
    token("doppler", "dp.pt." + g.r(ALNUM, 43))
    token("linear", "lin_api_" + g.r(ALNUM, 40))
    token("dockerhub-pat", "dckr_pat_" + g.r(URLSAFE, 27))
    jwt = "eyJ" + g.r(URLSAFE, 30) + ".eyJ" + g.r(URLSAFE, 60) + "." + g.r(URLSAFE, 43)
    token("jwt", jwt, "cookie session={}; Path=/")

    # --- headers, cookies, URLs ---
    token("bearer", g.r(URLSAFE, 40), "Authorization: Bearer {}")
    basic = base64.b64encode(f"svc:{g.r(ALNUM, 20)}".encode()).decode()
    token("basic-auth", basic, "Authorization: Basic {}")
    token("api-key-header", g.r(HEX, 32), "-H 'api-key: {}'")
    token("x-api-key-header", g.r(ALNUM, 40), "X-Api-Key: {}")
    token("cookie", g.r(URLSAFE, 32), "Cookie: session={}; theme=dark")
    token("set-cookie", g.r(URLSAFE, 32), "Set-Cookie: sid={}; HttpOnly")
    token(
        "url-password", g.r(ALNUM, 18), "connecting to postgres://svc_user:{}@db.internal:5432/app"
    )
    slashed = g.r(ALNUM, 8) + "/" + g.r(ALNUM, 10)
    token("url-password-slash", slashed, "fetch https://user:{}@registry.example.com/v2/")
    token("url-password-at", g.password(), "redis://default:{}@cache:6379/0")
    sas = g.r(B64, 43) + "="
    token(
        "azure-sas-sig",
        sas,
        "GET https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig={}&se=2026",
    )
    token(
        "azure-account-key",
        g.r(B64, 86) + "==",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={};EndpointSuffix=core",
    )
    token(
        "azure-shared-access-key",
        g.r(B64, 43) + "=",
        "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey={}",
    )
    docker = base64.b64encode(f"user:{g.r(ALNUM, 24)}".encode()).decode()
    token("docker-auth-json", docker, '{{"auths": {{"ghcr.io": {{"auth": "{}"}}}}}}')

    # --- named values: env lines, key=value, JSON and Python dicts ---
    for name in (
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "OPENAI_API_KEY",
        "WANDB_API_KEY",
        "NGC_API_KEY",
    ):
        token("env-" + name.lower(), g.r(ALNUM, 32), name + "={}")
    token("env-password-punct", g.password(), "PASSWORD={}")
    token("env-lowercase-pass", g.r(ALNUM, 16), "db_pass={}")
    token("aws-secret-key", g.r(B64, 40), "aws_secret_access_key = {}")
    token("aws-secret-prose", g.r(B64, 40), "the secret access key is {}")
    token("access-key-camel", g.r(ALNUM, 24), "accessKey={}")
    token("access-key-dash", g.r(ALNUM, 24), "access-key: {}")
    token("private-key-camel", g.r(ALNUM, 32), "privateKey={}")
    token("private-key-dash", g.r(ALNUM, 32), "private-key: {}")
    token("secret-key-minio", g.r(ALNUM, 40), "secretKey={}")
    token("client-secret", g.r(URLSAFE, 34), "client_secret={}")
    token("password-yaml", g.r(ALNUM, 24), "password: {}")
    token("token-query", g.r(URLSAFE, 32), "GET /v1/stream?token={}&id=3")
    token("json-api-key", g.r(ALNUM, 32), '{{"api_key": "{}", "model": "m"}}')
    token("json-password-punct", g.password(), '{{"password": "{}"}}')
    token("python-dict-token", g.r(ALNUM, 32), "{{'token': '{}', 'timeout': 30}}")
    token(
        "aws-presigned-signature",
        g.r(HEX, 64),
        "s3.amazonaws.com/b/k?X-Amz-Expires=60&X-Amz-Signature={}",
    )

    # --- launch arguments ---
    for flag in (
        "--api-key",
        "--hf-token",
        "--hf_token",
        "--openai-api-key",
        "--password",
        "--token",
    ):
        token("flag" + flag, g.r(ALNUM, 32), f"vllm serve Qwen/Qwen3-8B {flag} {{}} --port 8000")
    token("flag-equals", g.r(ALNUM, 32), "--api-key={}")
    token(
        "vllm-non-default-api-key",
        g.r(ALNUM, 32),
        "non-default args: {{'model': 'm', 'api_key': ['{}']}}",
    )
    token(
        "vllm-non-default-hf-token",
        g.r(ALNUM, 30),
        "non-default args: {{'hf_token': '{}', 'port': 8000}}",
    )
    token(
        "sglang-namespace",
        g.r(ALNUM, 32),
        "server_args=ServerArgs(model_path='m', api_key='{}', port=30000)",
    )

    # --- logins ---
    token("wandb-login", g.r(HEX, 40), "wandb login {}")
    token("netrc-wandb", g.r(HEX, 40), "machine api.wandb.ai login user password {}")
    token("docker-login-p", g.r(URLSAFE, 36), "docker login -u ci -p {} ghcr.io")
    token("huggingface-cli-login", g.r(ALNUM, 37), "huggingface-cli login --token {}")

    # --- private keys ---
    body = _pem_body(g, 6)
    escaped = "\\n".join(["-----BEGIN PRIVATE KEY-----", *body, "-----END PRIVATE KEY-----", ""])
    sa = {
        "type": "service_account",
        "project_id": "proj",
        "private_key_id": g.r(HEX, 40),
        "private_key": "<pem>",
        "client_email": "svc@proj.iam.gserviceaccount.com",
    }
    sa_text = json.dumps(sa).replace('"<pem>"', '"' + escaped + '"')
    add("gcp-service-account-private-key", body[2], sa_text)
    add("gcp-private-key-id", str(sa["private_key_id"]), sa_text)
    body = _pem_body(g, 5)
    plain = "\n".join(["-----BEGIN RSA PRIVATE KEY-----", *body, "-----END RSA PRIVATE KEY-----"])
    add("pem-rsa", body[1], plain, multiline=True)
    body = _pem_body(g, 5)
    prefix = "(APIServer pid=1) INFO 12-01 10:00:00 [tls.py:41] "
    block = ["-----BEGIN EC PRIVATE KEY-----", *body, "-----END EC PRIVATE KEY-----"]
    add("pem-log-prefixed", body[3], "\n".join(prefix + x for x in block), multiline=True)
    body = _pem_body(g, 7)
    ssh = ["-----BEGIN OPENSSH PRIVATE KEY-----", *body, "-----END OPENSSH PRIVATE KEY-----"]
    add("pem-openssh", body[4], "\n".join(ssh), multiline=True)
    body = _pem_body(g, 4)
    cut = ["-----BEGIN PRIVATE KEY-----", *(prefix + x for x in body)]  # pasted without its END
    add("pem-truncated", body[2], "\n".join(cut), multiline=True)
    return out


def planted(seed: int = 7) -> list[Planted]:
    """Every kind once, with fresh random characters for this seed."""
    return _kinds(Gen(seed))


def leaked(value: str, text: str, window: int = 12) -> bool:
    """The secret, or any `window`-character piece of it, appears in text (escapes removed too)."""
    variants = (text, text.replace("\\", ""), text.replace("\\/", "/"))
    w = min(window, len(value))
    pieces = {value[i : i + w] for i in range(len(value) - w + 1)}
    return any(p in t for t in variants for p in pieces)


KindFilter = Callable[[Planted], bool]
