"""Decide from an event payload (webhook or GitHub Actions) whether there is an issue to triage.

Handled: `issues` (opened, edited, reopened) and `issue_comment` (created, edited) on open issues
that are not pull requests, from GitHub, Gitea and Forgejo. Ignored, with a reason: events sent by
bots (type `Bot`, a `[bot]` login, or the bot's own login), comments written by bots, the
opt-out label, closed issues and every other event. The payload is only read, never evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OPT_OUT_LABELS = {"triage:skip", "no-triage-bot"}
ISSUE_ACTIONS = {"opened", "edited", "reopened"}
COMMENT_ACTIONS = {"created", "edited"}


@dataclass
class IssueJob:
    repo: str
    number: int
    title: str
    body: str
    author: str
    event: str
    action: str
    delivery: str = ""
    comment_body: str = ""
    labels: list[str] = field(default_factory=list)


def _d(obj: Any, key: str) -> dict[str, Any]:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def is_bot_user(user: dict[str, Any], bot_login: str) -> bool:
    login = str(user.get("login") or user.get("username") or "")
    return (
        str(user.get("type", "")).lower() == "bot"
        or login.lower().endswith("[bot]")
        or (bool(bot_login) and login.lower() == bot_login.lower())
    )


def job_from_event(
    event: str, payload: Any, *, bot_login: str = "", delivery: str = ""
) -> IssueJob | str:
    """An IssueJob, or the reason (a short string) why the event is ignored."""
    if not isinstance(payload, dict):
        return "payload is not an object"
    action = str(payload.get("action", ""))
    if event not in ("issues", "issue_comment"):
        return f"event {event!r} not handled"
    if event == "issues" and action not in ISSUE_ACTIONS:
        return f"issues action {action!r} not handled"
    if event == "issue_comment" and action not in COMMENT_ACTIONS:
        return f"issue_comment action {action!r} not handled"
    sender = _d(payload, "sender")
    if is_bot_user(sender, bot_login):
        return "sent by a bot"
    issue = _d(payload, "issue")
    if not issue:
        return "no issue in payload"
    if issue.get("pull_request"):
        return "pull request"
    if str(issue.get("state", "open")) not in ("open", ""):
        return "issue is closed"
    comment = _d(payload, "comment")
    if event == "issue_comment" and is_bot_user(_d(comment, "user"), bot_login):
        return "comment by a bot"
    raw_labels = issue.get("labels")
    labels = [
        str(lb.get("name", ""))
        for lb in (raw_labels if isinstance(raw_labels, list) else [])
        if isinstance(lb, dict)
    ]
    if OPT_OUT_LABELS & {lb.lower() for lb in labels}:
        return "opted out by label"
    repo = str(_d(payload, "repository").get("full_name", ""))
    if "/" not in repo:
        return "no repository in payload"
    try:
        number = int(issue.get("number", 0))
    except (TypeError, ValueError, OverflowError):
        return "bad issue number"
    if number <= 0:
        return "bad issue number"
    return IssueJob(
        repo=repo,
        number=number,
        title=str(issue.get("title") or ""),
        body=str(issue.get("body") or ""),
        author=str(_d(issue, "user").get("login", "")),
        event=event,
        action=action,
        delivery=delivery,
        comment_body=str(comment.get("body") or "") if event == "issue_comment" else "",
        labels=labels,
    )
