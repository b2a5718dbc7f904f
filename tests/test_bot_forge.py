"""Forge clients against the fake forge: auth, pagination, Retry-After, write caps, attachments."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_bot_support import FakeForge

from triage.bot.forge import ForgeError, Gitea, GitHub
from triage.bot.ratelimit import RateLimited, WriteLimiter
from triage.bot.sticky import find_own, publish

BOT = "triage-bot[bot]"
MARK = "<!-- triage-bot v1 key=acme/serving#7 digest={} -->\nbody {}"


@pytest.fixture
def gh() -> Iterator[FakeForge]:
    f = FakeForge("github", bot_login=BOT)
    yield f
    f.close()


@pytest.fixture
def gt() -> Iterator[FakeForge]:
    f = FakeForge("gitea", bot_login=BOT)
    yield f
    f.close()


def test_auth_headers_checked(gh: FakeForge, gt: FakeForge) -> None:
    assert GitHub(gh.api_url, gh.token).whoami() == BOT
    assert Gitea(gt.api_url, gt.token).whoami() == BOT
    with pytest.raises(ForgeError) as exc:
        GitHub(gh.api_url, "wrong").whoami()
    assert exc.value.status == 401
    # A GitHub-style header against Gitea is refused too.
    with pytest.raises(ForgeError):
        GitHub(gt.api_url, gt.token).whoami()


def test_pagination_finds_own_comment_late_in_thread(gh: FakeForge) -> None:
    for i in range(130):
        gh.add_comment("acme/serving", 7, f"comment {i}", login="someone")
    cid = gh.add_comment("acme/serving", 7, MARK.format("aaaa", 1), login=BOT, type_="Bot")
    for i in range(20):
        gh.add_comment("acme/serving", 7, f"later {i}", login="someone")
    client = GitHub(gh.api_url, gh.token)
    comments = client.list_comments("acme/serving", 7)
    assert len(comments) == 151
    own = find_own(comments, BOT, "acme/serving#7")
    assert own is not None and own.id == cid
    assert publish(client, "acme/serving", 7, MARK.format("aaaa", 2), bot_login=BOT) == "unchanged"
    assert publish(client, "acme/serving", 7, MARK.format("bbbb", 3), bot_login=BOT) == "edited"
    assert gh.edits == 1 and gh.creates == 0


def test_gitea_pagination(gt: FakeForge) -> None:
    for i in range(120):
        gt.add_comment("acme/serving", 3, f"c{i}", login="u")
    assert len(Gitea(gt.api_url, gt.token).list_comments("acme/serving", 3)) == 120


def test_retry_after_is_honoured(gh: FakeForge) -> None:
    waits: list[float] = []
    client = GitHub(gh.api_url, gh.token, sleep=waits.append)
    gh.fail_next = [(429, {"Retry-After": "7"}), (403, {"Retry-After": "2"})]
    client.create_comment("acme/serving", 7, "hello")
    assert waits == [7.0, 2.0] and gh.creates == 1
    gh.fail_next = [(429, {"Retry-After": "1"})] * 10
    with pytest.raises(ForgeError):
        client.create_comment("acme/serving", 7, "again")
    assert gh.creates == 1


def test_ratelimit_reset_header(gh: FakeForge) -> None:
    waits: list[float] = []
    client = GitHub(gh.api_url, gh.token, sleep=waits.append, max_backoff=30)
    gh.fail_next = [(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "99999999999"})]
    client.create_comment("acme/serving", 7, "hello")
    assert waits == [30]


def test_plain_403_is_not_retried(gh: FakeForge) -> None:
    gh.add_comment("acme/serving", 7, "theirs", login="someone")
    client = GitHub(gh.api_url, gh.token, sleep=lambda s: None)
    with pytest.raises(ForgeError) as exc:
        client.edit_comment("acme/serving", gh.next_id, "mine now")
    assert exc.value.status == 403


def test_write_limiter_caps_per_minute() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    limiter = WriteLimiter(
        per_minute=3, per_hour=5, clock=lambda: now[0], sleep=sleep, max_wait=4000
    )
    for _ in range(3):
        limiter.acquire()
    assert slept == []
    limiter.acquire()  # the fourth waits for the minute window
    assert slept == [60.0]
    limiter.acquire()  # fifth: a minute slot is free again
    assert now[0] == 60.0
    # Hour cap: five writes done, the sixth must wait for the hour window.
    limiter.acquire()
    assert now[0] >= 3600.0


def test_write_limiter_gives_up_past_max_wait() -> None:
    limiter = WriteLimiter(
        per_minute=1, per_hour=10, clock=lambda: 0.0, sleep=lambda s: None, max_wait=5
    )
    limiter.acquire()
    with pytest.raises(RateLimited):
        limiter.acquire()


def test_attachments_fetched_without_credentials_and_only_from_forge(gh: FakeForge) -> None:
    gh.files["/files/1/server.log"] = b"ERROR boom\n"
    gh.files["/files/2/shot.png"] = b"\x89PNG\x00\x00binary"
    client = GitHub(gh.api_url, gh.token)
    assert client.fetch_attachment(gh.base + "/files/1/server.log") == "ERROR boom\n"
    assert client.fetch_attachment(gh.base + "/files/2/shot.png") is None
    assert client.fetch_attachment("http://169.254.169.254/latest/meta-data/x.txt") is None
    fetched = [entry for entry in gh.log if entry[1].startswith("/files/")]
    assert fetched and not any(authorized for _, _, authorized in fetched)


def test_repo_names_are_validated(gh: FakeForge) -> None:
    client = GitHub(gh.api_url, gh.token)
    for bad in ("nope", "a/b/c", "../x"):
        with pytest.raises(ValueError):
            client.list_comments(bad, 1)
