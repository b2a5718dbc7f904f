"""Secret redaction: the one place that knows what a secret looks like.

Every output of triage (text, JSON, Markdown, bot comments, run files, follow events, the history
database, drafts, the unknown-queue listings) goes through this module; the engine facade hands out
reports already passed through `redact_report`, so renderers and the history get redacted data by
construction.

Three kinds of rules for text:

- *shapes*: prefix-anchored token formats with a low false-positive rate (Hugging Face `hf_`,
  OpenAI/Anthropic `sk-`, GitHub `ghp_`/`github_pat_`/..., AWS `AKIA...`, Slack `xox?-`/`xapp-`,
  NGC `nvapi-`, GitLab, PyPI, npm, Google, Stripe, JWTs, PEM private keys, ...). The whole token
  is replaced.
- *named values*: a value whose name says it is a secret, whatever it looks like:
  `password=...`, `HF_TOKEN=...`, `"api_key": "..."`, `'hf_token': ['...']` (vLLM's
  `non-default args`), `accessKey=`, `AccountKey=`, `sig=`, `--openai-api-key ...`. One predicate,
  `is_secret_name`, decides for text and for structured facts alike.
- *contexts*: `Authorization: Bearer ...`, `Cookie: ...`, `scheme://user:pass@host`,
  `wandb login KEY`, `docker login -p KEY`, "secret access key is KEY".

Every pattern is built from bounded character classes with no nested quantifiers, so each match
attempt does a bounded amount of work and a scan is linear in the text length. A keyword prefilter
skips rules whose keyword is absent; each rule's keywords are literal parts of every match it can
make (a test checks this), so the prefilter never skips what the regex would find. The replacement
never matches a rule again, so `redact(redact(x)) == redact(x)`, and a replaced block keeps its line
breaks, so line numbers stay right. Nothing is ever sent anywhere to "verify" a secret.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from triage.models import Report

REDACTED = "[redacted]"

# Values that are placeholders, references or already redacted: never rewritten.
_INERT_VALUES = {
    "none",
    "null",
    "nil",
    "true",
    "false",
    "changeme",
    "empty",  # api_key="EMPTY": the placeholder vLLM's and SGLang's docs give for a keyless server
    "dummy",
    "redacted",
    "xxx",
    "***",
    "",
    "[]",
    "{}",
}
# A path names where a secret is kept, not the secret (lower case, as base64 secrets never are).
_PATH_VALUE = re.compile(r"(?:~|\.{1,2})?/[a-z0-9_.@+/-]{0,400}")
_FILE_VALUE = re.compile(r"\S{0,400}\.(?:json|pem|key|crt|cert|txt|ya?ml|env|cfg|ini|conf|p12)")

# ---- names ------------------------------------------------------------------------------------

# Every secret name contains one of these (checked by `is_secret_name`): the named-value rules'
# regexes require one too, and they are those rules' prefilter keywords.
_NAME_HINTS = ("key", "token", "pass", "pwd", "secret", "auth", "cookie", "sig", "cred")
# The last word of a name that alone makes it a secret.
_SECRET_LAST = {
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "pass",
    "secret",
    "secrets",
    "token",
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "accountkey",
    "sharedaccesskey",
    "authkey",
    "authtoken",
    "accesstoken",
    "refreshtoken",
    "apitoken",
    "sessiontoken",
    "clientsecret",
    "credentials",
    "credential",
    "creds",
    "cookie",
    "authorization",
    "auth",
}
# `<word>_key` is a secret unless the word says it is an index or a public half.
_PLAIN_KEY_WORDS = {
    "sort",
    "cache",
    "primary",
    "foreign",
    "partition",
    "routing",
    "hash",
    "lookup",
    "public",
    "group",
    "dict",
    "map",
    "index",
    "shard",
    "row",
    "column",
    "range",
    "object",
    "metric",
    "label",
    "prefix",
    "kv",
    "lora",
    "request",
    "sequence",
    "block",
    "layer",
    "config",
    "env",
    "dataset",
    "json",
    "s3",
    "derived",
    "model",
    "attr",
    "field",
    "param",
    "arg",
    "setting",
    "option",
    "name",
    "missing",
    "unexpected",
    "state",
}
# `<word>_token` names a tokenizer's special token or a count, not a credential.
_PLAIN_TOKEN_WORDS = {
    "bos",
    "eos",
    "pad",
    "unk",
    "cls",
    "sep",
    "mask",
    "special",
    "start",
    "end",
    "stop",
    "image",
    "audio",
    "video",
    "vision",
    "eot",
    "think",
    "reasoning",
    "first",
    "last",
    "next",
    "prev",
    "max",
    "min",
    "num",
    "total",
    "output",
    "input",
    "prompt",
    "decode",
    "new",
    "added",
    "placeholder",
    "default",
    "chat",
    "tool",
}
_PLAIN_PASS_WORDS = {"forward", "backward", "first", "second", "single", "multi", "each", "num"}
_SECRET_NAMES = {"private_key_id", "x_amz_signature", "x_goog_signature", "x_hub_signature"}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NAME_SPLIT = re.compile(r"[^a-z0-9]+")


def is_secret_name(name: str) -> bool:
    """Whether a field, variable, header or flag name says its value is a secret.

    `api_key`, `hf_token`, `HF_TOKEN`, `accessKey`, `AccountKey`, `--openai-api-key`,
    `X-Api-Key`, `password`, `db_pass`, `client_secret` are; `tokenizer`, `max_num_batched_tokens`,
    `bos_token`, `sort_key`, `password_hash_algorithm`, `ssl_keyfile` are not.
    """
    low = name.lower()
    if not any(h in low for h in _NAME_HINTS):
        return False
    words = [w for w in _NAME_SPLIT.split(_CAMEL.sub("_", name).lower()) if w]
    while len(words) > 1 and words[-1].isdigit():  # X-Hub-Signature-256
        words.pop()
    if not words:
        return False
    joined = "_".join(words)
    if joined in _SECRET_NAMES:
        return True
    last = words[-1]
    before = words[-2] if len(words) > 1 else ""
    if last == "key":
        return bool(before) and before not in _PLAIN_KEY_WORDS
    if last == "token":
        return before not in _PLAIN_TOKEN_WORDS
    if last == "pass":
        return before not in _PLAIN_PASS_WORDS
    if last == "sig":  # an Azure SAS signature (`&sig=`), not `rt_sig`
        return len(words) == 1
    return last in _SECRET_LAST


# ---- values -----------------------------------------------------------------------------------


def _token_ok(value: str, min_distinct: int) -> bool:
    """A real token, not a placeholder such as `hf_xxxxxxxx...` or an already redacted value."""
    low = value.lower()
    if "redacted" in low or low in _INERT_VALUES:
        return False
    return len(set(value)) >= min_distinct and "..." not in value


def _placeholder(value: str) -> bool:
    """Empty, a literal such as None/true, a reference ($VAR, <your key>, ${X}), or redacted."""
    low = value.lower()
    return (
        low in _INERT_VALUES
        or "redacted" in low
        or value[0] in "$<{%*"
        or "..." in value
        or "\u2026" in value
    )


def _value_ok(value: str, lenient: bool = False) -> bool:
    """A value in a secret's place that plausibly is the secret (not a number, reference, path or
    word of prose)."""
    stripped = value.strip("\"'")
    if not stripped or _placeholder(stripped):
        return False
    if lenient:
        return True
    if (stripped.isdigit() and len(stripped) < 8) or len(set(stripped)) < 4:
        return False  # a port, a timeout or a count; eight digits or more are a key
    if _PATH_VALUE.fullmatch(stripped) or _FILE_VALUE.fullmatch(stripped):
        return False
    # A short all-letter word ("password: required", "auth: basic") is prose, not a secret.
    return not (stripped.isalpha() and stripped.islower() and len(stripped) < 12)


def _mixed(value: str) -> bool:
    """Two of lower case, upper case and digits: what a generated key has and a word has not."""
    classes = (str.islower, str.isupper, str.isdigit)
    return sum(any(test(c) for c in value) for test in classes) >= 2


# ---- rules ------------------------------------------------------------------------------------

Judge = Callable[[re.Match[str]], "tuple[int, int] | None"]


@dataclass(frozen=True)
class _Rule:
    """One redaction rule: keywords, regex and what of a match to replace."""

    name: str
    keywords: tuple[str, ...]  # lower-case literals; every match contains one of them
    regex: str
    judge: Judge  # the span to replace, or None to keep the match
    tail: int = 0  # > 0: only the last `tail` characters can match (the rule ends in \Z)

    @property
    def pattern(self) -> re.Pattern[str]:
        return _compiled(self.regex)


@functools.cache
def _compiled(regex: str) -> re.Pattern[str]:
    """A rule's regex, compiled on first use: a run compiles only the rules whose keywords its
    report strings hold, and importing the module compiles none. (Kept here, not in `re`'s
    bounded cache, which the scan's own patterns could evict.)"""
    return re.compile(regex)


def _whole(min_distinct: int = 10) -> Judge:
    def judge(m: re.Match[str]) -> tuple[int, int] | None:
        return m.span() if _token_ok(m.group(0), min_distinct) else None

    return judge


def _group(
    name: str = "v", *, lenient: bool = False, check: Callable[[str], bool] | None = None
) -> Judge:
    def judge(m: re.Match[str]) -> tuple[int, int] | None:
        value = m.group(name)
        if value is None or not _value_ok(value, lenient):
            return None
        if check is not None and not check(value):
            return None
        return m.span(name)

    return judge


def _named(m: re.Match[str], *, flag: bool = False) -> tuple[int, int] | None:
    """A value after a secret name: the inside of its quotes or brackets, or the bare word.
    A flag's value is the secret whatever it looks like (`--api-key word` sets the key to word)."""
    if not is_secret_name(m.group("k")) or m.group("k").lower() == "authorization":
        return None  # authorization has its own rule (the scheme word stays)
    value = m.group("v")
    start, end = m.span("v")
    if value[0] in "\"'" and len(value) >= 2 and value[-1] == value[0]:
        start, end, value = start + 1, end - 1, value[1:-1]
    elif value[0] == "[" and value[-1] == "]":
        inner = value[1:-1].strip()
        if inner[:1] in ("'", '"') and inner[-1:] == inner[:1]:
            inner = inner[1:-1]
        if not inner or _placeholder(inner):
            return None
        return start + 1, end - 1
    elif value[0] in "\"'[" and m.end("v") == len(m.string):  # cut before its closing quote
        lead = len(value) - len(value.lstrip("[\"'"))
        start, value = start + lead, value[lead:]
    elif m.group("sp") and value.startswith("-"):
        return None  # the next flag, not a value
    if not value or not _value_ok(value, lenient=flag):
        return None
    return start, end


def _flag(m: re.Match[str]) -> tuple[int, int] | None:
    return _named(m, flag=True)


_URL_VALUE_END = re.compile(r"[\s\"'<>]")
_PORT = re.compile(r"[0-9]{1,5}(?:/|$)")  # host:port/path, not user:password
_URL_HOST = re.compile(r"[A-Za-z0-9._-]{1,253}(?=[:/\s\"'<>?#,;)\]\\]|$)")


def _url_password(m: re.Match[str]) -> tuple[int, int] | None:
    """`scheme://user:` matched: the password runs to the last `@` that a host name follows, so it
    may hold `/`, `@` or `!`. Found with `rfind` rather than a backtracking regex: linear."""
    text, start = m.string, m.end()
    user = m.group(0)[m.group(0).index("://") + 3 : -1]
    if any(c in user for c in "?#[]|"):
        return None  # not a URL's userinfo (`https://(?:localhost|...)`: a regex quoted in text)
    window = text[start : start + 257]
    stop = _URL_VALUE_END.search(window)
    if stop is not None:
        window = window[: stop.start()]
    at = window.rfind("@")
    while at > 0:
        if _URL_HOST.match(text, start + at + 1) and _value_ok(window[:at], lenient=True):
            return start, start + at
        at = window.rfind("@", 0, at)
    if (
        start + len(window) == len(text)
        and not _PORT.match(window)
        # `host:port/v1/models`: a path after a word (a port's name) is not a password; a
        # generated one may hold a `/` (`98hjE4aY/PR79J`), and its head looks generated
        and ("/" not in window or _mixed(window.split("/", 1)[0]))
        and _value_ok(window)
    ):
        return start, len(text)  # the text was cut before the '@' (evidence cut at a length)
    return None


# The prefixes of the token shapes: a token cut by a length limit (evidence lines, `--explain`
# terms) ends the text with its head only, too short for its shape rule.
_CUT_PREFIXES = (
    "hf_",
    "api_org_",
    "sk-",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xoxo-",
    "xoxs-",
    "xoxr-",
    "xoxe-",
    "xapp-",
    "glpat-",
    "gldt-",
    "glrt-",
    "pypi-",
    "npm_",
    "AIza",
    "GOCSPX-",
    "ya29.",
    "sk_live_",
    "rk_live_",
    "sk_test_",
    "rk_test_",
    "dop_v1_",
    "doo_v1_",
    "dor_v1_",
    "nvapi-",
    "r8_",
    "gsk_",
    "xai-",
    "pplx-",
    "tvly-",
    "lsv2_",
    "pcsk_",
    "dapi",
    "hvs.",
    "hvb.",
    "hvr.",
    "AGE-SECRET-KEY-",
    "shpat_",
    "shpss_",
    "shpca_",
    "shppa_",
    "PMAK-",
    "dp.pt.",
    "dp.st.",
    "dp.sa.",
    "dp.ct.",
    "lin_api_",
    "dckr_pat_",
    "eyJ",
    "AKIA",
    "ASIA",
    "SG.",
    "hooks.slack.com/services/",
    "discord.com/api/webhooks/",
)


def _cut_token(m: re.Match[str]) -> tuple[int, int] | None:
    """Generated, not a word: two of lower case, upper case and digits (`hf_transfer` is a word);
    an AWS key id is upper case and digits, so upper case alone will do after AKIA/ASIA."""
    token = m.group(0)
    aws = token[:4] in ("AKIA", "ASIA") and token.isupper() and token.isalnum()
    if not aws and _slug(token):
        return None
    return m.span() if (aws or _mixed(token[3:])) and _token_ok(token, 6) else None


def _slug(token: str) -> bool:
    """Short lower-case parts joined by '-', '_' or '.', four or more of them words of letters
    only: a file name or an id (`vllm-pplx-intranode-a2a-invalid-resource-handle.log` ends with a
    `pplx-` prefix), never a generated key (`sk-or-v1-cd5704d3`: its random part has digits)."""
    parts = [p for p in re.split(r"[-_.]", token) if p]
    words = sum(1 for p in parts if len(p) >= 3 and p.isalpha())
    return words >= 4 and all(len(p) <= 12 and p == p.lower() for p in parts)


_TOKEN_TAIL = r"(?![A-Za-z0-9_])"
_NOT_AFTER_WORD = r"(?<![A-Za-z0-9_])"
_PEM_BEGIN = r"-----BEGIN[A-Z ]{0,30} PRIVATE KEY-----"
_HINT = "(?:" + "|".join(_NAME_HINTS) + ")"
# A name that holds a hint, then `=` or `:` (a quote of the key and JSON escapes allowed around).
_NAME = (
    r"(?<![\w.-])(?P<k>(?=[A-Za-z_])[\w.-]{0,40}?" + _HINT + r"[\w.-]{0,24})"
    r"(?:\\?[\"'])?\s{0,3}[=:]\s{0,3}(?P<sp>)"
)
# The value: a quoted string (JSON escapes included), a Python list, or a bare word.
_VALUE = (
    r"(?P<v>\"(?:[^\"\\\n]|\\.){1,4000}\"|'[^'\n]{1,4000}'|\[[^\]\n]{1,1000}\]"
    r"|\\\"(?:[^\"\\\n]|\\[^\"]){1,4000}\\\"|[^\s,;'\"&\[\])}][^\s,;'\"&\])}]{0,999}"
    # a quoted value the text was cut inside (evidence cut at a length)
    r"|\[?[\"'][^\"'\n\]]{1,1000}[\"']?\Z)"
)


def _shape(name: str, keywords: tuple[str, ...], regex: str, min_distinct: int = 10) -> _Rule:
    return _Rule(name, keywords, regex, _whole(min_distinct))


def _ctx(name: str, keywords: tuple[str, ...], regex: str, judge: Judge | None = None) -> _Rule:
    return _Rule(name, keywords, regex, judge or _group())


_RULES: tuple[_Rule, ...] = (
    # --- PEM blocks: plain, with a log prefix on every line, or JSON-escaped on one line. The body
    # never crosses another BEGIN, so however many BEGINs a text holds the scan stays linear.
    _shape(
        "pem-private-key",
        ("private key-----",),
        _PEM_BEGIN + r"(?:(?!-----BEGIN)[\s\S]){0,20000}?-----END[A-Z ]{0,30} PRIVATE KEY-----",
    ),
    # A block cut before its END (a truncated paste): the rest of the BEGIN line and every following
    # line that ends in a run of base64, whatever log prefix it has.
    _shape(
        "pem-private-key-truncated",
        ("private key-----",),
        _PEM_BEGIN
        + r"[^\n]{0,200}(?:\n[^\n]{0,200}?[A-Za-z0-9+/=]{40,80}[ \t\r]{0,4}(?=\n|\Z)){1,400}",
    ),
    _shape("pem-private-key-line", ("private key-----",), _PEM_BEGIN + r"[^\n\"']{1,20000}"),
    # --- shapes: the whole token replaced ---
    _shape(
        "huggingface",
        ("hf_", "api_org_"),
        _NOT_AFTER_WORD + r"(?:hf|api_org)_[A-Za-z0-9]{30,64}" + _TOKEN_TAIL,
    ),
    _shape(
        "anthropic",
        ("sk-ant-",),
        _NOT_AFTER_WORD + r"sk-ant-[A-Za-z0-9]{2,12}-[A-Za-z0-9_-]{20,200}",
    ),
    _shape(
        "openai", ("sk-",), r"(?<![A-Za-z0-9_-])sk-(?:[A-Za-z0-9]{1,12}-)?[A-Za-z0-9_-]{20,200}"
    ),
    _shape(
        "github",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        _NOT_AFTER_WORD + r"gh[pousr]_[A-Za-z0-9]{30,255}" + _TOKEN_TAIL,
    ),
    _shape("github-pat", ("github_pat_",), _NOT_AFTER_WORD + r"github_pat_[A-Za-z0-9_]{22,255}"),
    _shape(
        "aws-access-key",
        ("akia", "asia", "abia", "acca"),
        r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])",
        min_distinct=8,
    ),
    _shape("slack", ("xox",), _NOT_AFTER_WORD + r"xox[abposre]-[A-Za-z0-9-]{10,200}"),
    _shape("slack-app", ("xapp-",), _NOT_AFTER_WORD + r"xapp-[A-Za-z0-9-]{10,200}"),
    _shape(
        "gitlab",
        ("glpat-", "gldt-", "glrt-", "glptt-"),
        _NOT_AFTER_WORD + r"gl(?:pat|dt|rt|ptt)-[A-Za-z0-9_-]{20,64}",
    ),
    _shape("pypi", ("pypi-",), _NOT_AFTER_WORD + r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{16,400}"),
    _shape("npm", ("npm_",), _NOT_AFTER_WORD + r"npm_[A-Za-z0-9]{36}" + _TOKEN_TAIL),
    _shape("google-api", ("aiza",), _NOT_AFTER_WORD + r"AIza[A-Za-z0-9_-]{35}"),
    _shape("google-oauth-secret", ("gocspx-",), _NOT_AFTER_WORD + r"GOCSPX-[A-Za-z0-9_-]{20,64}"),
    _shape("google-oauth-token", ("ya29.",), _NOT_AFTER_WORD + r"ya29\.[A-Za-z0-9_-]{30,2000}"),
    _shape(
        "stripe", ("_live_", "_test_"), _NOT_AFTER_WORD + r"[rs]k_(?:live|test)_[A-Za-z0-9]{16,128}"
    ),
    _shape(
        "digitalocean",
        ("dop_v1_", "doo_v1_", "dor_v1_"),
        _NOT_AFTER_WORD + r"do[opr]_v1_[a-f0-9]{64}",
    ),
    _shape("nvidia-ngc", ("nvapi-",), _NOT_AFTER_WORD + r"nvapi-[A-Za-z0-9_-]{20,200}"),
    _shape("replicate", ("r8_",), _NOT_AFTER_WORD + r"r8_[A-Za-z0-9]{30,60}" + _TOKEN_TAIL),
    _shape("groq", ("gsk_",), _NOT_AFTER_WORD + r"gsk_[A-Za-z0-9]{40,80}" + _TOKEN_TAIL),
    _shape("xai", ("xai-",), _NOT_AFTER_WORD + r"xai-[A-Za-z0-9]{40,120}" + _TOKEN_TAIL),
    _shape("perplexity", ("pplx-",), _NOT_AFTER_WORD + r"pplx-[A-Za-z0-9]{40,80}" + _TOKEN_TAIL),
    _shape("tavily", ("tvly-",), _NOT_AFTER_WORD + r"tvly-[A-Za-z0-9_-]{20,80}"),
    _shape("langsmith", ("lsv2_",), _NOT_AFTER_WORD + r"lsv2_(?:pt|sk)_[A-Za-z0-9_]{20,100}"),
    _shape("pinecone", ("pcsk_",), _NOT_AFTER_WORD + r"pcsk_[A-Za-z0-9_]{20,120}"),
    _shape("databricks", ("dapi",), _NOT_AFTER_WORD + r"dapi[a-f0-9]{32}(?:-[0-9])?" + _TOKEN_TAIL),
    _shape(
        "sendgrid", ("sg.",), _NOT_AFTER_WORD + r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}"
    ),
    _shape("telegram-bot", (":aa",), r"(?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_-]{30,40}"),
    _shape("vault", ("hvs.", "hvb.", "hvr."), _NOT_AFTER_WORD + r"hv[sbr]\.[A-Za-z0-9_-]{24,300}"),
    _shape("age-secret", ("age-secret-key-",), r"AGE-SECRET-KEY-1[0-9A-Z]{50,70}"),
    _shape(
        "shopify",
        ("shpat_", "shpss_", "shpca_", "shppa_"),
        _NOT_AFTER_WORD + r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}",
    ),
    _shape("postman", ("pmak-",), _NOT_AFTER_WORD + r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
    _shape(
        "doppler",
        ("dp.pt.", "dp.st.", "dp.sa.", "dp.ct."),
        _NOT_AFTER_WORD + r"dp\.(?:pt|st|sa|ct)\.[A-Za-z0-9]{30,80}",
    ),
    _shape("linear", ("lin_api_",), _NOT_AFTER_WORD + r"lin_api_[A-Za-z0-9]{30,60}"),
    _shape("dockerhub-pat", ("dckr_pat_",), _NOT_AFTER_WORD + r"dckr_pat_[A-Za-z0-9_-]{20,60}"),
    _shape(
        "jwt",
        ("eyj",),
        _NOT_AFTER_WORD
        + r"eyJ[A-Za-z0-9_-]{8,2000}\.eyJ[A-Za-z0-9_-]{8,4000}\.[A-Za-z0-9_-]{8,2000}",
    ),
    _Rule(
        "cut-token",
        tuple(p.lower() for p in _CUT_PREFIXES),
        r"(?<![A-Za-z0-9_])(?:" + "|".join(re.escape(p) for p in _CUT_PREFIXES) + r")"
        r"[A-Za-z0-9_.+/=-]{8,400}\Z",
        _cut_token,
        tail=420,  # it matches at the end of the text only: look there only
    ),
    _shape(
        "webhook-url",
        ("hooks.slack.com/", "discord.com/api/webhooks/", "discordapp.com/api/webhooks/"),
        r"(?<=hooks\.slack\.com/)(?:services|workflows|triggers)/[A-Za-z0-9/_-]{20,300}"
        r"|(?<=discord\.com/api/webhooks/)[0-9]{5,30}/[A-Za-z0-9_-]{30,200}"
        r"|(?<=discordapp\.com/api/webhooks/)[0-9]{5,30}/[A-Za-z0-9_-]{30,200}",
    ),
    # --- contexts: only the value replaced ---
    _ctx(
        "authorization",
        ("bearer", "authorization"),
        r"(?i)(?:\bbearer|\bauthorization\\?[\"']?\s{0,3}[:=]\s{0,3}\\?[\"']?"
        r"(?:(?:token|basic|bearer|digest|bot|apikey|sso-key)\s{1,3})?)\s{0,3}"
        r"(?P<v>[A-Za-z0-9._~+/=:-]{8,4000})",
    ),
    _ctx(
        "cookie",
        ("cookie",),
        r"(?i)(?<![\w-])(?:set-)?cookie\\?[\"']?\s{0,3}[:=]\s{0,3}\\?[\"']?(?P<v>[^\r\n\"'\\]{1,4000})",
        _group(lenient=True),
    ),
    _ctx(
        "url-password",
        ("://",),
        r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,20}://[^\s:/@\"'<>]{0,256}:",
        _url_password,
    ),
    _Rule("named-value", _NAME_HINTS, "(?i)" + _NAME + _VALUE, _named),
    _Rule(
        "cli-flag",
        _NAME_HINTS,
        r"(?i)(?<![\w-])--(?P<k>(?=[A-Za-z])[\w-]{0,40}?" + _HINT + r"[\w-]{0,24})"
        r"(?:=|(?P<sp>\s{1,3}))(?P<v>['\"][^'\"\n]{1,1000}['\"]|[^\s'\"]{1,1000})",
        _flag,
    ),
    _ctx(
        "login-command",
        ("login",),
        r"(?i)\b(?:wandb\s{1,3}login(?:\s{1,3}--[a-z-]{1,20})*|"
        r"docker\s{1,3}login\b[^\n|;&]{0,200}?\s-p|"
        r"machine\s{1,3}\S{1,200}\s{1,3}login\s{1,3}\S{1,200}\s{1,3}password)"
        r"\s{1,3}['\"]?(?P<v>[^\s'\"]{8,1000})",
    ),
    _ctx(
        "netrc-password",
        ("password",),
        r"(?im)^\s{0,8}password\s{1,3}(?P<v>[A-Za-z0-9]{32,200})\s*$",
    ),
    _ctx(
        "prose-key",
        ("key", "token"),
        r"(?i)\b(?:api|access|secret|private|auth|account|secret\s{1,3}access)[ _-]?(?:key|token)"
        r"\s{1,3}(?:(?:is|was|of|=|:)\s{1,3})?['\"]?"
        r"(?P<v>[A-Za-z0-9/+=_.-]{20,400}(?![A-Za-z0-9/+=_.-])|[A-Za-z0-9/+=_.-]{8,19}\Z)",
        _group(check=_mixed),
    ),
)


def _matches(rule: _Rule, text: str) -> Iterator[re.Match[str]]:
    # a search from a position still sees the text before it (look-behinds stay right)
    return rule.pattern.finditer(text, max(0, len(text) - rule.tail) if rule.tail else 0)


def _apply(rule: _Rule, text: str) -> str:
    out: list[str] = []
    pos = 0
    for m in _matches(rule, text):
        span = rule.judge(m)
        if span is None:
            continue
        start, end = span
        if start < pos:
            continue  # inside what an earlier match of this rule replaced
        out.append(text[pos:start])
        # A block spanning lines keeps its line breaks: line numbers after it stay right.
        out.append(REDACTED + "\n" * text.count("\n", start, end))
        pos = end
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


# Any keyword of any rule: one search says whether a text can hold a secret at all (most report
# strings cannot), before the rules are tried one by one. RE2 runs the alternation as one DFA.
_KEYWORDS = sorted({k for r in _RULES for k in r.keywords}, key=len)


@functools.lru_cache(maxsize=1)
def _keyword_finder() -> Any:
    """The keyword alternation compiled by RE2 when it is installed (three times `re`'s speed on
    report strings), else by `re`; compiled on first use, not at import."""
    pattern = "|".join(re.escape(k) for k in _KEYWORDS)
    try:
        import re2

        return re2.compile(pattern)
    except ImportError:
        return re.compile(pattern)


def _keyword_holders(strings: list[str]) -> set[str]:
    """The strings that contain some rule's keyword, found by one search over all of them (the
    lowered strings joined by NULs, which no keyword holds)."""
    lowered = [text.lower() for text in strings]  # lower() may change a length: each on its own
    starts = [0]
    for low in lowered:
        starts.append(starts[-1] + len(low) + 1)
    joined = "\0".join(lowered)
    try:
        found = list(_keyword_finder().finditer(joined))
    except UnicodeError:  # RE2 reads UTF-8: a lone surrogate (undecodable log bytes) cannot go in
        found = list(re.compile(_keyword_finder().pattern).finditer(joined))
    return {strings[bisect_right(starts, m.start()) - 1] for m in found}


def _active(text: str) -> list[_Rule]:
    low = text.lower()
    return [rule for rule in _RULES if any(map(low.__contains__, rule.keywords))]


def redact(text: str) -> str:
    """Replace every secret found in text by `[redacted]`; ordinary text is returned unchanged."""
    if not text:
        return text
    if len(text) <= _CACHED_LENGTH:
        return _redact_short(text)
    return _redact(text)


# A report repeats its strings (the knowledge base's titles and fixes, a line redacted again by the
# history recorder): short strings are redacted once per process.
_CACHED_LENGTH = 2000


@functools.lru_cache(maxsize=2048)  # at most a few MB
def _redact_short(text: str) -> str:
    return _redact(text)


def _redact(text: str) -> str:
    low = text.lower()
    for rule in _RULES:
        if any(map(low.__contains__, rule.keywords)):
            new = _apply(rule, text)
            if new is not text:
                text = new
                low = text.lower()
    return text


def redact_lines(lines: list[str]) -> list[str]:
    """Redact consecutive lines together (a PEM block spans several: each body line alone is only
    base64); one line out per line in, as a redacted block keeps its line breaks."""
    out = redact("\n".join(lines)).split("\n")
    return out if len(out) == len(lines) else [redact(line) for line in lines]


def redact_bytes(data: bytes) -> bytes:
    """`redact` for bytes (decoded as UTF-8 with replacement when needed)."""
    return redact(data.decode("utf-8", "replace")).encode("utf-8")


def find_secrets(text: str) -> list[tuple[str, str]]:
    """(rule name, matched text) for each secret found: for tests and `--explain`, never logged."""
    found: list[tuple[str, str]] = []
    for rule in _active(text):
        for m in _matches(rule, text):
            span = rule.judge(m)
            if span is not None:
                found.append((rule.name, text[span[0] : span[1]]))
    return found


# ---- structured values ------------------------------------------------------------------------


def _secret_leaf(value: Any) -> Any:
    """A value held under a secret name: strings (and strings in lists) replaced, others kept."""
    if isinstance(value, str):
        return value if not value.strip() or _placeholder(value.strip()) else REDACTED
    if isinstance(value, list | tuple):
        return [_secret_leaf(v) for v in value]
    if isinstance(value, dict):
        return {k: _secret_leaf(v) for k, v in value.items()}
    return value  # numbers, booleans, None: a count or a switch, not a credential


def redact_value(value: Any, name: str | None = None, clean: set[str] | None = None) -> Any:
    """Redact a JSON-like value: every string by `redact`, and whatever a secret name holds
    (`{"api_key": ["..."]}`, `{"hf_token": "..."}`) whatever it looks like. Strings in `clean`
    hold no rule's keyword and are kept as they are."""
    if name is not None and is_secret_name(name):
        return _secret_leaf(value)
    if isinstance(value, str):
        return value if clean is not None and value in clean else redact(value)
    if isinstance(value, dict):
        return {redact(str(k)): redact_value(v, str(k), clean) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v, None, clean) for v in value]
    return value


def _strings(value: Any, out: set[str]) -> set[str]:
    """Every string value inside a JSON-like value."""
    if isinstance(value, str):
        out.add(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list | tuple):
        for item in value:
            _strings(item, out)
    return out


# The last report `redact_report` returned: redacting it again would return an equal report, so
# a caller that received it (the history recorder, after the engine redacted) can skip the work.
_last_redacted: list[Report] = []


def is_redacted(report: Report) -> bool:
    """Whether this very object came out of `redact_report` (the last one it returned)."""
    return bool(_last_redacted) and _last_redacted[0] is report


def redact_report(report: Report) -> Report:
    """A copy of the report with every secret removed: evidence, facts (by name too), captures,
    unrecognized lines and their fingerprints. Pure; redacting twice changes nothing more.
    A report holds thousands of strings and few of any rule's keywords: one search over all of
    them finds the few that the rules must read (a rule runs only where its keyword is)."""
    from triage.models import Report

    if is_redacted(report):
        return report
    data = report.to_json_dict()
    strings = list(_strings(data, set()))
    clean = set(strings) - _keyword_holders(strings)
    out = Report.from_json_dict(redact_value(data, None, clean))
    _last_redacted[:] = [out]
    return out
