"""One bot comment per thread: find our own earlier comment, edit it when the verdict changed.

A comment is ours only when both hold: it starts with our hidden marker for this key, and its
author is the bot's login (anyone can paste a marker). Same digest: nothing is written. Dry run:
the comment that would be posted is handed to `echo` instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from triage.bot.forge import Comment, Forge
from triage.redact import redact

_MARKER = re.compile(
    r"^<!-- triage-bot v1 key=(?P<key>[^ ]{1,120}) digest=(?P<digest>[0-9a-f]{1,64}) -->"
)


def parse_marker(body: str) -> tuple[str, str] | None:
    m = _MARKER.match(body)
    return (m.group("key"), m.group("digest")) if m else None


def find_own(comments: list[Comment], bot_login: str, key: str) -> Comment | None:
    """The bot's own comment for this key (the most recent, should there be several)."""
    mine = None
    for c in comments:
        got = parse_marker(c.body)
        if got and got[0] == key and c.author.lower() == bot_login.lower():
            mine = c
    return mine


def publish(
    forge: Forge,
    repo: str,
    number: int,
    body: str,
    *,
    bot_login: str,
    dry_run: bool = False,
    echo: Callable[[str], None] = print,
    comments: list[Comment] | None = None,
) -> str:
    """Create or edit the thread's bot comment. Returns created | edited | unchanged | dry-run."""
    body = redact(body)
    got = parse_marker(body)
    if got is None:
        raise ValueError("comment body has no triage-bot marker")
    key, digest = got
    if comments is None:
        comments = forge.list_comments(repo, number)
    own = find_own(comments, bot_login, key)
    if own is not None:
        old = parse_marker(own.body)
        if old is not None and old[1] == digest:
            return "unchanged"
    if dry_run:
        action = "edit" if own is not None else "create"
        echo(f"--- dry run: would {action} a comment on {repo}#{number} ---\n{body}")
        return "dry-run"
    if own is not None:
        forge.edit_comment(repo, own.id, body)
        return "edited"
    forge.create_comment(repo, number, body)
    return "created"
