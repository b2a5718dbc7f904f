"""Forge REST clients for issue comments: GitHub, and Gitea/Forgejo (same shapes under /api/v1).

Over `urllib.request`, no extra dependency. API calls never follow redirects (so the token is
never sent to another host); writes pass through the `WriteLimiter`; 403/429 answers with
`Retry-After` (or an exhausted `x-ratelimit-remaining` with `x-ratelimit-reset`) are waited out
and retried a fixed number of times. Attachments are fetched without credentials, only from the
forge's own hosts, size-capped, and dropped when they are not text.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from triage.bot.ratelimit import WriteLimiter

USER_AGENT = "triage-bot/1"
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
MAX_ATTACHMENT = 8 << 20
MAX_RESPONSE = 32 << 20


class ForgeError(Exception):
    """The forge refused or failed a request (status and a short reason)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


@dataclass
class Comment:
    id: int
    body: str
    author: str
    author_type: str = "User"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> None:
        return None


class Forge:
    """Common HTTP plumbing; subclasses name the auth scheme and pagination."""

    kind = "forge"
    page_size = 50

    def __init__(
        self,
        api_url: str,
        token: str,
        *,
        limiter: WriteLimiter | None = None,
        sleep: Callable[[float], None] = time.sleep,
        timeout: float = 20.0,
        max_retries: int = 3,
        max_backoff: float = 120.0,
        attachment_hosts: set[str] | None = None,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self._token = token
        self.limiter = limiter or WriteLimiter()
        self.sleep = sleep
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_backoff = max_backoff
        host = urllib.parse.urlsplit(self.api_url).hostname or ""
        self.attachment_hosts = set(attachment_hosts or ()) | {host}
        self._api_opener = urllib.request.build_opener(_NoRedirect)
        self.requests: list[tuple[str, str]] = []  # (method, path) log, for tests and dry runs

    # -- subclass hooks --
    def _auth(self) -> str:
        raise NotImplementedError

    def _extra_headers(self) -> dict[str, str]:
        return {}

    def _page_query(self, page: int) -> str:
        return f"page={page}&limit={self.page_size}"

    # -- HTTP --
    def request(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        """One API call with retries on rate limits; returns the decoded JSON (or None)."""
        url = self.api_url + path
        data = json.dumps(payload).encode("utf-8") if payload is not None else None
        write = method in ("POST", "PATCH", "PUT", "DELETE")
        for attempt in range(self.max_retries + 1):
            if write:
                self.limiter.acquire()
            req = urllib.request.Request(url, data=data, method=method)
            req.add_header("Authorization", self._auth())
            req.add_header("User-Agent", USER_AGENT)
            req.add_header("Accept", "application/json")
            for k, v in self._extra_headers().items():
                req.add_header(k, v)
            if data is not None:
                req.add_header("Content-Type", "application/json")
            self.requests.append((method, path))
            try:
                with self._api_opener.open(req, timeout=self.timeout) as resp:
                    body = resp.read(MAX_RESPONSE)
                    return json.loads(body) if body.strip() else None
            except urllib.error.HTTPError as exc:
                wait = self._retry_after(exc)
                exc.close()
                if wait is None or attempt == self.max_retries:
                    raise ForgeError(exc.code, f"{method} {path}: {exc.reason}") from None
                self.sleep(wait)
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                if attempt == self.max_retries:
                    raise ForgeError(0, f"{method} {path}: {exc}") from None
                self.sleep(min(2.0**attempt, self.max_backoff))
        raise ForgeError(0, f"{method} {path}: retries exhausted")  # pragma: no cover

    def _retry_after(self, exc: urllib.error.HTTPError) -> float | None:
        """Seconds to wait before retrying, or None when the error is not a rate limit."""
        headers = exc.headers
        if exc.code in (502, 503, 504):
            return 1.0
        if exc.code not in (403, 429):
            return None
        retry = headers.get("Retry-After") if headers else None
        if retry is not None:
            try:
                return min(max(float(retry), 0.0), self.max_backoff)
            except ValueError:
                return min(30.0, self.max_backoff)
        if headers and headers.get("x-ratelimit-remaining") == "0":
            try:
                return min(
                    max(float(headers.get("x-ratelimit-reset", "0")) - time.time(), 0.0) + 1,
                    self.max_backoff,
                )
            except ValueError:
                return min(60.0, self.max_backoff)
        return 60.0 if exc.code == 429 else None

    # -- comments --
    def list_comments(self, repo: str, number: int) -> list[Comment]:
        out: list[Comment] = []
        for page in range(1, 101):
            items = self.request(
                "GET",
                f"/repos/{_repo(repo)}/issues/{int(number)}/comments?" + self._page_query(page),
            )
            if not isinstance(items, list):
                break
            out.extend(_comment(c) for c in items if isinstance(c, dict))
            if len(items) < self.page_size:
                break
        return out

    def create_comment(self, repo: str, number: int, body: str) -> Comment:
        got = self.request(
            "POST", f"/repos/{_repo(repo)}/issues/{int(number)}/comments", {"body": body}
        )
        return _comment(got if isinstance(got, dict) else {})

    def edit_comment(self, repo: str, comment_id: int, body: str) -> Comment:
        got = self.request(
            "PATCH", f"/repos/{_repo(repo)}/issues/comments/{int(comment_id)}", {"body": body}
        )
        return _comment(got if isinstance(got, dict) else {})

    def whoami(self) -> str:
        got = self.request("GET", "/user")
        return str(got.get("login", "")) if isinstance(got, dict) else ""

    def fetch_attachment(self, url: str, max_bytes: int = MAX_ATTACHMENT) -> str | None:
        """The text of an attachment on this forge's hosts, or None (other host, binary, error)."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("https", "http") or parts.hostname not in self.attachment_hosts:
            return None
        if parts.scheme == "http" and not self.api_url.startswith("http://"):
            return None
        req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})  # no credentials
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                data: bytes = resp.read(max_bytes + 1)
        except (urllib.error.URLError, TimeoutError, OSError, ValueError):
            return None
        if b"\x00" in data[:8192]:
            return None
        text = data[:max_bytes].decode("utf-8", "replace")
        return text if len(data) <= max_bytes else text + "\n[attachment truncated]\n"


class GitHub(Forge):
    kind = "github"
    page_size = 100

    def _auth(self) -> str:
        return f"Bearer {self._token}"

    def _extra_headers(self) -> dict[str, str]:
        return {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}

    def _page_query(self, page: int) -> str:
        return f"per_page={self.page_size}&page={page}"


class Gitea(Forge):
    """Gitea and Forgejo (`api_url` ends in `/api/v1`)."""

    kind = "gitea"

    def _auth(self) -> str:
        return f"token {self._token}"


def make_forge(kind: str, api_url: str, token: str, **kw: Any) -> Forge:
    if kind == "github":
        return GitHub(api_url, token, **kw)
    if kind in ("gitea", "forgejo"):
        return Gitea(api_url, token, **kw)
    raise ValueError(f"unknown forge kind {kind!r} (github, gitea, forgejo)")


def _repo(repo: str) -> str:
    owner, _, name = repo.partition("/")
    if not all(_NAME.fullmatch(part) and part.strip(".") for part in (owner, name)):
        raise ValueError(f"repository must be owner/name, got {repo!r}")
    return f"{owner}/{name}"


def _comment(raw: dict[str, Any]) -> Comment:
    user = raw.get("user") if isinstance(raw.get("user"), dict) else {}
    assert isinstance(user, dict)
    return Comment(
        id=int(raw.get("id", 0) or 0),
        body=str(raw.get("body") or ""),
        author=str(user.get("login", "")),
        author_type=str(user.get("type", "User")),
    )
