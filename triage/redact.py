"""Secret redaction: remove tokens and credentials from text before it is posted or stored.

Two kinds of rules:

- *shapes*: prefix-anchored token formats with a low false-positive rate (Hugging Face `hf_`,
  OpenAI/Anthropic `sk-`, GitHub `ghp_`/`github_pat_`/..., AWS `AKIA...`, Slack, GitLab, PyPI, npm,
  Google, Stripe, DigitalOcean, JWTs, PEM private keys). The whole token is replaced.
- *contexts*: a credential named by what surrounds it (`Authorization: Bearer ...`,
  `scheme://user:pass@host`, `password=...`, `HF_TOKEN=...`, `--api-key ...`,
  `aws_secret_access_key = ...`). Only the value is replaced; the name stays so the log still reads.

Every pattern is built from bounded character classes with no nested quantifiers, so each match
attempt does a bounded amount of work and a scan is linear in the text length. A cheap keyword
prefilter skips rules whose keyword is absent. The replacement never matches a rule again, so
`redact(redact(x)) == redact(x)`. Nothing is ever sent anywhere to "verify" a secret.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

REDACTED = "[redacted]"

# Values that are placeholders, references or already redacted: never rewritten.
_INERT_VALUES = {"none", "null", "nil", "true", "false", "changeme", "redacted", "xxx", "***"}


@dataclass(frozen=True)
class _Rule:
    name: str
    keywords: tuple[str, ...]  # lower-case substrings; the rule runs only if one is present
    pattern: re.Pattern[str]
    group: str | None = None  # named group holding the value to replace (None: the whole match)
    min_distinct: int = 10  # fewer distinct characters (whole token) looks like a placeholder
    lenient: bool = False  # context values: accept any non-placeholder value (URL passwords)


def _token_ok(value: str, min_distinct: int) -> bool:
    """A real token, not a placeholder such as `hf_xxxxxxxx...` or an already redacted value."""
    low = value.lower()
    if "redacted" in low or low in _INERT_VALUES:
        return False
    return len(set(value)) >= min_distinct and "..." not in value


def _value_ok(value: str, lenient: bool = False) -> bool:
    """A context value that plausibly is a credential (not a number, a reference or a word)."""
    stripped = value.strip("\"'")
    low = stripped.lower()
    if not stripped or "redacted" in low or low in _INERT_VALUES:
        return False
    if stripped[0] in "$<{%*":
        return False
    if lenient:
        return True
    if stripped.isdigit():
        return False
    if len(set(stripped)) < 5 or "..." in stripped or "\u2026" in stripped:
        return False
    # A short all-letter word ("password: required") is prose, not a secret.
    return not (stripped.isalpha() and stripped.islower() and len(stripped) < 12)


_TOKEN_TAIL = r"(?![A-Za-z0-9_])"
_NOT_AFTER_WORD = r"(?<![A-Za-z0-9_])"

_RULES: tuple[_Rule, ...] = (
    # --- shapes: whole token replaced ---
    _Rule(
        "pem-private-key",
        ("private key",),
        re.compile(
            r"-----BEGIN[A-Z ]{0,30} PRIVATE KEY-----[A-Za-z0-9+/=\s:,-]{0,16000}?"
            r"-----END[A-Z ]{0,30} PRIVATE KEY-----"
        ),
    ),
    _Rule(
        "huggingface",
        ("hf_", "api_org_"),
        re.compile(_NOT_AFTER_WORD + r"(?:hf|api_org)_[A-Za-z0-9]{30,64}" + _TOKEN_TAIL),
    ),
    _Rule(
        "anthropic",
        ("sk-ant-",),
        re.compile(_NOT_AFTER_WORD + r"sk-ant-[A-Za-z0-9]{2,12}-[A-Za-z0-9_-]{20,200}"),
    ),
    _Rule(
        "openai",
        ("sk-",),
        re.compile(r"(?<![A-Za-z0-9_-])sk-(?:[A-Za-z0-9]{1,12}-)?[A-Za-z0-9_-]{20,200}"),
    ),
    _Rule(
        "github",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        re.compile(_NOT_AFTER_WORD + r"gh[pousr]_[A-Za-z0-9]{30,255}" + _TOKEN_TAIL),
    ),
    _Rule(
        "github-pat",
        ("github_pat_",),
        re.compile(_NOT_AFTER_WORD + r"github_pat_[A-Za-z0-9_]{22,255}"),
    ),
    _Rule(
        "aws-access-key",
        ("akia", "asia", "abia", "acca"),
        re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])"),
        min_distinct=8,
    ),
    _Rule("slack", ("xox",), re.compile(_NOT_AFTER_WORD + r"xox[abposr]-[A-Za-z0-9-]{10,200}")),
    _Rule("gitlab", ("glpat-",), re.compile(_NOT_AFTER_WORD + r"glpat-[A-Za-z0-9_-]{20,64}")),
    _Rule(
        "pypi",
        ("pypi-",),
        re.compile(_NOT_AFTER_WORD + r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{16,400}"),
    ),
    _Rule("npm", ("npm_",), re.compile(_NOT_AFTER_WORD + r"npm_[A-Za-z0-9]{36}" + _TOKEN_TAIL)),
    _Rule("google-api", ("aiza",), re.compile(_NOT_AFTER_WORD + r"AIza[A-Za-z0-9_-]{35}")),
    _Rule(
        "stripe",
        ("_live_", "_test_"),
        re.compile(_NOT_AFTER_WORD + r"[rs]k_(?:live|test)_[A-Za-z0-9]{16,128}"),
    ),
    _Rule(
        "digitalocean",
        ("dop_v1_", "doo_v1_", "dor_v1_"),
        re.compile(_NOT_AFTER_WORD + r"do[opr]_v1_[a-f0-9]{64}"),
    ),
    _Rule(
        "jwt",
        ("eyj",),
        re.compile(
            _NOT_AFTER_WORD + r"eyJ[A-Za-z0-9_-]{8,2000}\.eyJ[A-Za-z0-9_-]{8,4000}"
            r"\.[A-Za-z0-9_-]{8,2000}"
        ),
    ),
    # --- contexts: only the value replaced ---
    _Rule(
        "authorization",
        ("bearer", "authorization", "token "),
        re.compile(
            r"(?i)(?:\bbearer|\bauthorization:\s{0,3}(?:token|basic))\s{1,3}"
            r"(?P<v>[A-Za-z0-9._~+/=-]{12,4000})"
        ),
        group="v",
    ),
    _Rule(
        "url-password",
        ("://",),
        re.compile(
            r"[A-Za-z][A-Za-z0-9+.-]{0,20}://[^\s:/@\"'<>]{0,256}:"
            r"(?P<v>[^\s@/\"'<>]{1,256})@"
        ),
        group="v",
        lenient=True,
    ),
    _Rule(
        "cli-flag",
        ("--",),
        re.compile(
            r"(?i)--(?:api-key|apikey|hf-token|token|password|passwd|secret|access-key|"
            r"secret-key|auth-token)(?:=|\s{1,3})['\"]?(?P<v>[^\s'\"]{4,1000})"
        ),
        group="v",
    ),
    _Rule(
        "env-assignment",
        ("_token", "_password", "_secret", "_key", "_pass", "_pwd"),
        re.compile(
            r"(?<![A-Za-z0-9_])[A-Z][A-Z0-9_]{0,80}_(?:TOKEN|PASSWORD|PASSWD|SECRET|KEY|PASS|"
            r"PWD|CREDENTIALS)['\"]?\s{0,3}[=:]\s{0,3}['\"]?(?P<v>[^\s'\",;]{4,1000})"
        ),
        group="v",
    ),
    _Rule(
        "key-value",
        (
            "password",
            "passwd",
            "secret",
            "token",
            "api_key",
            "apikey",
            "api-key",
            "access_key",
            "private_key",
        ),
        re.compile(
            r"(?i)(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|"
            r"client[_-]?secret)['\"]?\s{0,3}[=:]\s{0,3}['\"]?"
            r"(?P<v>[A-Za-z0-9_./+=~!#%^&()\[\]-]{8,1000})"
        ),
        group="v",
    ),
)


def _replacer(rule: _Rule) -> Callable[[re.Match[str]], str]:
    def repl(m: re.Match[str]) -> str:
        if rule.group is None:
            token = m.group(0)
            return REDACTED if _token_ok(token, rule.min_distinct) else token
        value = m.group(rule.group)
        if not _value_ok(value, rule.lenient):
            return m.group(0)
        start, end = m.span(rule.group)
        whole = m.group(0)
        base = m.start(0)
        return whole[: start - base] + REDACTED + whole[end - base :]

    return repl


_REPLACERS = tuple((rule, _replacer(rule)) for rule in _RULES)


def redact(text: str) -> str:
    """Replace every secret found in text by `[redacted]`; ordinary text is returned unchanged."""
    if not text:
        return text
    low = text.lower()
    for rule, repl in _REPLACERS:
        if any(k in low for k in rule.keywords):
            text = rule.pattern.sub(repl, text)
            low = text.lower()
    return text


def redact_bytes(data: bytes) -> bytes:
    """`redact` for bytes (decoded as UTF-8 with replacement when needed)."""
    return redact(data.decode("utf-8", "replace")).encode("utf-8")


def find_secrets(text: str) -> list[tuple[str, str]]:
    """(rule name, matched text) for each secret found: for tests and `--explain`, never logged."""
    found: list[tuple[str, str]] = []
    low = text.lower()
    for rule, _repl in _REPLACERS:
        if any(k in low for k in rule.keywords):
            for m in rule.pattern.finditer(text):
                if rule.group is None and _token_ok(m.group(0), rule.min_distinct):
                    found.append((rule.name, m.group(0)))
                elif rule.group is not None and _value_ok(m.group(rule.group), rule.lenient):
                    found.append((rule.name, m.group(rule.group)))
    return found
