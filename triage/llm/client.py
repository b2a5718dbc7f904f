"""POST one chat completion to an OpenAI-compatible server and return its message text.

Standard library only (urllib). The request goes to exactly the URL the user gave: proxies from
the environment are ignored and redirects are refused, so the evidence cannot be forwarded to a
host the user did not name. The whole exchange has one deadline (not only each socket read), and
the answer is read up to a byte limit, so a slow or runaway server costs a bounded time and memory.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

MAX_ANSWER_BYTES = 64 << 10  # a whole chat-completion response; a valid answer is ~2 KiB
DEFAULT_TIMEOUT_S = 60.0


class LlmError(Exception):
    """The server could not give an answer: the reason is one short line for stderr."""


@dataclass(frozen=True)
class Completion:
    content: str  # the assistant message's text
    model: str  # the model id the server says answered


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        raise LlmError("the server answered with a redirect; give its final URL with --llm")


def endpoint(base_url: str) -> str:
    """The chat-completions URL of an OpenAI-compatible base URL (`http://host:8000/v1`)."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise LlmError(
            f"--llm needs an http(s) base URL such as http://127.0.0.1:8000/v1, got {base_url!r}"
        )
    path = parts.path.rstrip("/")
    if not path.endswith("/chat/completions"):
        path += "/chat/completions"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def public_url(url: str) -> str:
    """The URL without user:password@, for reports and notes."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def post_chat(
    url: str,
    body: bytes,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    max_bytes: int = MAX_ANSWER_BYTES,
    api_key: str | None = None,
) -> Completion:
    """Send `body` (the exact JSON payload) and return the first choice's message content."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
    deadline = time.monotonic() + timeout
    try:
        with opener.open(request, timeout=timeout) as response:
            raw = _read_bounded(response, max_bytes, deadline, timeout)
    except LlmError:
        raise
    except urllib.error.HTTPError as exc:
        raise LlmError(f"the server answered HTTP {exc.code}") from None
    except TimeoutError:
        raise LlmError(f"no answer within {timeout:g} s") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            raise LlmError(f"no answer within {timeout:g} s") from None
        raise LlmError(f"could not reach the server: {reason}") from None
    return _completion(raw)


def _read_bounded(response: Any, max_bytes: int, deadline: float, timeout: float) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise LlmError(f"no complete answer within {timeout:g} s")
        chunk = response.read(min(16 << 10, max_bytes + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            raise LlmError(f"the answer is larger than {max_bytes} bytes")


def _completion(raw: bytes) -> Completion:
    try:
        data = json.loads(raw)
        message = data["choices"][0]["message"]
        content = message.get("content")
        model = str(data.get("model") or "")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise LlmError("the server's response is not an OpenAI chat completion") from None
    if not isinstance(content, str):
        raise LlmError("the server's response has no message text")
    return Completion(content=content, model=model)
