"""End to end over real HTTP on loopback: webhook server -> queue -> triage -> fake forge."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_bot_support import FakeForge, deliver, issue_event, secret_corpus, sign

from triage.api import Engine, load_kb
from triage.bot import webhook
from triage.bot.events import IssueJob
from triage.bot.forge import Gitea, GitHub
from triage.bot.ratelimit import DeliveryLimiter, WriteLimiter
from triage.bot.respond import IssueBot
from triage.bot.webhook import WebhookServer, verify_signature

FIX = Path(__file__).parent / "fixtures" / "bot"
ROOT = Path(__file__).parent.parent
KV_LOG = (ROOT / "examples" / "vllm-kv-cache-oom.log").read_text()
ORDINAL_LOG = (FIX / "device-ordinal.log").read_text()
SECRET = b"webhook-test-secret"
BOT = "triage-bot[bot]"


def issue_body(log: str, prose: str = "It fails at start-up.") -> str:
    return f"### 🐛 Describe the bug\n\n{prose}\n\n```text\n{log}```\n"


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(load_kb())


class Rig:
    def __init__(self, engine: Engine, kind: str) -> None:
        self.kind = kind
        self.forge = FakeForge(kind, bot_login=BOT)
        client_cls = GitHub if kind == "github" else Gitea
        self.client = client_cls(
            self.forge.api_url,
            self.forge.token,
            limiter=WriteLimiter(20, 300),
            sleep=lambda s: None,
        )
        self.bot = IssueBot(engine, self.client, BOT)
        self.server = WebhookServer(self.bot.handle, SECRET, bot_login=BOT, max_body=1 << 20)
        self.server.start()

    def send(
        self,
        event: str,
        payload: dict[str, Any],
        *,
        delivery: str | None = None,
        secret: bytes = SECRET,
        raw: bytes | None = None,
    ) -> tuple[int, dict[str, Any]]:
        body = raw if raw is not None else json.dumps(payload).encode()
        delivery = delivery or str(uuid.uuid4())
        if self.kind == "github":
            headers = {
                "X-GitHub-Event": event,
                "X-GitHub-Delivery": delivery,
                "X-Hub-Signature-256": "sha256=" + sign(secret, body),
            }
        else:
            headers = {
                "X-Gitea-Event": event,
                "X-Gitea-Delivery": delivery,
                "X-Gitea-Signature": sign(secret, body),
            }
        status, answer, _ = deliver(self.server.url, body, headers)
        assert self.server.wait_idle(10)
        return status, answer

    def bot_comments(self) -> list[dict[str, Any]]:
        return [
            c for c in self.forge.thread_comments("acme/serving", 7) if c["user"]["login"] == BOT
        ]

    def close(self) -> None:
        self.server.stop()
        self.forge.close()


@pytest.fixture(params=["github", "gitea"])
def rig(request: pytest.FixtureRequest, engine: Engine) -> Iterator[Rig]:
    r = Rig(engine, request.param)
    yield r
    r.close()


def test_issue_lifecycle_one_comment_edit_and_replay(rig: Rig) -> None:
    delivery = str(uuid.uuid4())
    status, answer = rig.send(
        "issues",
        issue_event("opened", issue_body(KV_LOG), gitea=rig.kind == "gitea"),
        delivery=delivery,
    )
    assert (status, answer["status"]) == (202, "queued")
    comments = rig.bot_comments()
    assert len(comments) == 1 and rig.forge.creates == 1
    first = comments[0]["body"]
    assert first.startswith("<!-- triage-bot v1 key=acme/serving#7 digest=")
    assert "kv-cache-no-memory" in first.split("\n")[1]  # the verdict line names the cause
    assert rig.forge.unauthorized == 0

    # The same delivery again (a replay, or GitHub's redelivery): nothing happens at all.
    before = len(rig.forge.log)
    for _ in range(3):
        status, answer = rig.send(
            "issues", issue_event("opened", issue_body(KV_LOG)), delivery=delivery
        )
        assert status == 200 and "duplicate" in answer["status"]
    assert len(rig.forge.log) == before and rig.forge.creates == 1 and rig.forge.edits == 0

    # An edit that changes the verdict updates the same comment.
    rig.send("issues", issue_event("edited", issue_body(ORDINAL_LOG), gitea=rig.kind == "gitea"))
    comments = rig.bot_comments()
    assert len(comments) == 1 and rig.forge.edits == 1 and rig.forge.creates == 1
    assert "cuda-invalid-device-ordinal" in comments[0]["body"].split("\n")[1]

    # An edit that leaves the verdict alone (prose only) writes nothing.
    rig.send(
        "issues",
        issue_event(
            "edited", issue_body(ORDINAL_LOG, "Now with more words."), gitea=rig.kind == "gitea"
        ),
    )
    assert rig.forge.edits == 1 and rig.forge.creates == 1 and len(rig.bot_comments()) == 1


def test_forged_signature_is_401_before_parsing(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bytes] = []
    real = webhook.parse_payload

    def counting(body: bytes) -> Any:
        calls.append(body)
        return real(body)

    monkeypatch.setattr(webhook, "parse_payload", counting)
    payload = issue_event("opened", issue_body(KV_LOG))
    for secret in (b"wrong-secret", b""):
        status, _ = rig.send("issues", payload, secret=secret)
        assert status == 401
    # Not JSON at all and a bad signature: still 401 (the body was never looked at).
    status, _ = rig.send("issues", {}, raw=b"{not json", secret=b"nope")
    assert status == 401
    assert calls == [] and rig.forge.creates == 0 and rig.forge.log == []
    # A good signature on the same kind of payload does reach the parser.
    rig.send("issues", payload)
    assert len(calls) == 1


def test_oversized_body_is_413_without_reading(rig: Rig) -> None:
    import http.client
    import urllib.parse

    parts = urllib.parse.urlsplit(rig.server.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
    conn.putrequest("POST", "/")
    conn.putheader("Content-Length", str(rig.server.max_body + 1))
    conn.putheader("X-GitHub-Event", "issues")
    conn.endheaders()  # no body sent: the server must answer from the header alone
    resp = conn.getresponse()
    assert resp.status == 413
    conn.close()
    assert rig.forge.log == []


def test_events_from_bots_and_itself_are_ignored(rig: Rig) -> None:
    gitea = rig.kind == "gitea"
    for sender, type_ in ((BOT, "User"), ("dependabot[bot]", "User"), ("helper", "Bot")):
        status, answer = rig.send(
            "issues",
            issue_event(
                "opened", issue_body(KV_LOG), sender=sender, sender_type=type_, gitea=gitea
            ),
        )
        if gitea and sender == "helper":  # Gitea has no user type: a human login is processed
            continue
        assert status == 202 and "ignored" in answer["status"], answer
    # A comment written by the bot itself (its own previous answer) never triggers a new run.
    payload = issue_event("created", issue_body(KV_LOG), gitea=gitea)
    payload["comment"] = {
        "id": 5,
        "body": "<!-- triage-bot v1 key=x digest=0 -->",
        "user": {"login": BOT},
    }
    payload["sender"] = {"login": BOT}
    status, answer = rig.send("issue_comment", payload)
    assert "ignored" in answer["status"]
    if not gitea:
        assert rig.forge.creates == 0


def test_planted_marker_by_someone_else_is_not_ours(rig: Rig) -> None:
    rig.forge.add_comment(
        "acme/serving",
        7,
        "<!-- triage-bot v1 key=acme/serving#7 digest=0 -->\nfake",
        login="mallory",
    )
    rig.send("issues", issue_event("opened", issue_body(KV_LOG), gitea=rig.kind == "gitea"))
    assert rig.forge.creates == 1 and rig.forge.edits == 0
    mallory = [
        c for c in rig.forge.thread_comments("acme/serving", 7) if c["user"]["login"] == "mallory"
    ]
    assert mallory[0]["body"].endswith("fake")


def test_secrets_never_reach_the_forge(rig: Rig) -> None:
    corpus = secret_corpus(11)
    log = KV_LOG + "".join(line + "\n" for _, line in corpus)
    # Make every secret line also an "error" line so the renderer would want to quote it.
    log += "".join(f"ERROR 10-25 13:08:44 [x.py:1] failed: {line}\n" for _, line in corpus)
    rig.send("issues", issue_event("opened", issue_body(log), gitea=rig.kind == "gitea"))
    assert rig.forge.posted
    for body in rig.forge.posted:
        for secret, _ in corpus:
            assert secret not in body
            assert not any(secret[i : i + 12] in body for i in range(len(secret) - 11))


def test_no_mentions_and_size_limit(rig: Rig) -> None:
    noise = "".join(
        f"ERROR 10-25 13:08:44 [x.py:1] @user{i} broke ```` <b>#{i}</b>\n" for i in range(3000)
    )
    rig.send("issues", issue_event("opened", issue_body(KV_LOG + noise), gitea=rig.kind == "gitea"))
    body = rig.bot_comments()[0]["body"]
    assert len(body) <= 60_000
    assert "@user" not in body.replace("@\u200buser", "")
    assert "kv-cache-no-memory" in body.split("\n")[1]


def test_ping_and_health(rig: Rig) -> None:
    status, answer = rig.send("ping", {"zen": "hi"})
    assert (status, answer["status"]) == (200, "pong")


def test_signature_test_vectors() -> None:
    # GitHub's documented vector.
    body = b"Hello, World!"
    sig = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert verify_signature(
        b"It's a Secret to Everybody", body, {"X-Hub-Signature-256": "sha256=" + sig}
    )
    assert not verify_signature(b"It's a Secret to Everybody", body, {"X-Hub-Signature-256": sig})
    assert not verify_signature(
        b"It's a Secret to Everybody", body, {"X-Hub-Signature": "sha1=" + sig}
    )
    # RFC 4231 test case 2, as Gitea/Forgejo send it (bare hex).
    rfc = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    assert verify_signature(b"Jefe", b"what do ya want for nothing?", {"X-Gitea-Signature": rfc})
    assert verify_signature(b"Jefe", b"what do ya want for nothing?", {"X-Forgejo-Signature": rfc})
    # With the Forgejo header present, only it counts (no fallback to the Gitea header).
    assert not verify_signature(
        b"Jefe",
        b"what do ya want for nothing?",
        {"X-Forgejo-Signature": "00" * 32, "X-Gitea-Signature": rfc},
    )
    assert not verify_signature(b"", body, {"X-Hub-Signature-256": "sha256=" + sig})
    assert not verify_signature(b"Jefe", b"x", {"X-Gitea-Signature": "\u00e9" * 64})


def test_mutated_deliveries_all_rejected() -> None:
    import random

    rng = random.Random(3)
    secret = b"s3cret"
    body = json.dumps(issue_event("opened", "x")).encode()
    good = sign(secret, body)
    for i in range(300):
        mutated = bytearray(body)
        choice = i % 5
        headers = {"X-Hub-Signature-256": "sha256=" + good}
        if choice == 0:
            pos = rng.randrange(len(mutated))
            mutated[pos] ^= 1 << rng.randrange(8)
        elif choice == 1:
            mutated = mutated[: rng.randrange(len(mutated))]
        elif choice == 2:
            headers = {
                "X-Hub-Signature-256": "sha256=" + good[:-1] + ("0" if good[-1] != "0" else "1")
            }
        elif choice == 3:
            headers = {"X-Hub-Signature-256": "sha1=" + good}
        else:
            headers = {}
        assert not verify_signature(secret, bytes(mutated), headers)


# -- Limits: every delivery is processed or answered with a status the forge may retry --------


class Recorder:
    """A job handler that records jobs, and can be held to fill the queue."""

    def __init__(self) -> None:
        self.jobs: list[IssueJob] = []
        self.release = threading.Event()
        self.release.set()

    def __call__(self, job: IssueJob) -> str:
        self.release.wait(10)
        self.jobs.append(job)
        return "recorded"


@pytest.fixture
def servers() -> Iterator[list[WebhookServer]]:
    made: list[WebhookServer] = []
    yield made
    for server in made:
        server.stop()


def started(servers: list[WebhookServer], handler: Recorder, **limits: Any) -> WebhookServer:
    server = WebhookServer(handler, SECRET, bot_login=BOT, **limits)
    server.start()
    servers.append(server)
    return server


def signed_delivery(
    number: int = 7, *, repo: str = "acme/serving", sender: str = "reporter", delivery: str = ""
) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(issue_event("opened", "text", number=number, repo=repo, sender=sender))
    headers = {
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": "sha256=" + sign(SECRET, body.encode()),
    }
    return body.encode(), headers


def exchange(server: WebhookServer, data: bytes, timeout: float = 5.0) -> bytes:
    """Send raw bytes, return everything the server answers until it closes the connection."""
    parts = urllib.parse.urlsplit(server.url)
    with socket.create_connection((parts.hostname or "", parts.port or 0), timeout=timeout) as s:
        s.sendall(data)
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
        return answer


def test_limits_per_repository_and_sender_count_verified_deliveries_only(
    servers: list[WebhookServer],
) -> None:
    recorder = Recorder()
    server = started(servers, recorder, per_minute=3, sender_per_minute=2)
    now = [1000.0]
    server.limiter.clock = lambda: now[0]
    for _ in range(20):  # forged: charged to nobody, whatever repository they name
        body, headers = signed_delivery()
        headers["X-Hub-Signature-256"] = "sha256=" + sign(b"guess", body)
        assert deliver(server.url, body, headers)[0] == 401
    statuses = [deliver(server.url, *signed_delivery(sender=s))[0] for s in ("ann", "ann", "bob")]
    assert statuses == [202, 202, 202]
    # ann's third in the minute: her cap (2); carol's: the repository's cap (3).
    refused_body, refused_headers = signed_delivery(sender="ann")
    status, answer, headers = deliver(server.url, refused_body, refused_headers)
    assert (status, answer["status"]) == (429, "rate limited")
    assert 1 <= int(headers["retry-after"]) <= 61
    assert deliver(server.url, *signed_delivery(sender="carol"))[0] == 429
    # Another repository has its own window; bob's delivery counts in it.
    assert deliver(server.url, *signed_delivery(repo="acme/other", sender="bob"))[0] == 202
    # A minute later the refused delivery, redelivered with the same id, is processed: the
    # refusal did not enter it in the replay log.
    now[0] += 61
    status, answer, _ = deliver(server.url, refused_body, refused_headers)
    assert (status, answer["status"]) == (202, "queued")
    assert server.wait_idle(5)
    assert len(recorder.jobs) == 5


def test_full_queue_answers_503_and_the_redelivery_is_processed(
    servers: list[WebhookServer],
) -> None:
    recorder = Recorder()
    recorder.release.clear()  # the worker holds the first job until released
    server = started(servers, recorder, queue_size=1)
    assert deliver(server.url, *signed_delivery(1))[0] == 202  # taken by the worker
    deadline = time.monotonic() + 5
    while server.jobs.qsize() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert deliver(server.url, *signed_delivery(2))[0] == 202  # waits in the queue
    body, headers = signed_delivery(3)
    status, answer, response_headers = deliver(server.url, body, headers)
    assert (status, answer["status"]) == (503, "queue full")
    assert response_headers["retry-after"] == "30"
    recorder.release.set()
    assert server.wait_idle(5)
    status, answer, _ = deliver(server.url, body, headers)  # the forge's redelivery
    assert (status, answer["status"]) == (202, "queued")
    assert server.wait_idle(5)
    assert [job.number for job in recorder.jobs] == [1, 2, 3]


def test_connection_cap_answers_503_not_a_reset(servers: list[WebhookServer]) -> None:
    server = started(servers, Recorder(), max_connections=3)
    parts = urllib.parse.urlsplit(server.url)
    idle = [socket.create_connection((parts.hostname or "", parts.port or 0)) for _ in range(3)]
    try:
        time.sleep(0.1)  # the intake accepts the three
        body, headers = signed_delivery()
        status, answer, response_headers = deliver(server.url, body, headers)
        assert (status, answer["status"]) == (503, "too many connections")
        assert int(response_headers["retry-after"]) > 0
    finally:
        for sock in idle:
            sock.close()
    deadline = time.monotonic() + 5
    while server.intake.open and time.monotonic() < deadline:
        time.sleep(0.01)
    assert deliver(server.url, body, headers)[0] == 202  # the retry gets through


def test_framing_is_answered_before_a_handler_sees_it(servers: list[WebhookServer]) -> None:
    server = started(servers, Recorder(), header_timeout=0.5, body_timeout=0.5, max_body=1000)
    started_at = time.monotonic()
    # A body that stops short: 408 at the body deadline, then closed.
    answer = exchange(server, b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n" + b"x" * 10)
    assert answer.startswith(b"HTTP/1.1 408 ") and b"request body timeout" in answer
    # Headers that never end: 408 at the header deadline.
    answer = exchange(server, b"POST / HTTP/1.1\r\nX-Slow: 1\r\n")
    assert answer.startswith(b"HTTP/1.1 408 ") and b"request header timeout" in answer
    assert time.monotonic() - started_at < 3.0
    # No length, a length above max_body, two different lengths, a header block above 64 KiB.
    assert exchange(server, b"POST / HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 411 ")
    assert exchange(server, b"POST / HTTP/1.1\r\nContent-Length: 1001\r\n\r\n").startswith(
        b"HTTP/1.1 413 "
    )
    two = b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"
    assert exchange(server, two).startswith(b"HTTP/1.1 411 ")
    huge = b"POST / HTTP/1.1\r\n" + b"X-Pad: " + b"a" * (70 << 10) + b"\r\n\r\n"
    assert exchange(server, huge).startswith(b"HTTP/1.1 431 ")
    # Expect: 100-continue gets its interim answer, then the delivery is processed.
    body, headers = signed_delivery()
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    request = (
        f"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
        f"Content-Length: {len(body)}\r\n{head}\r\n"
    ).encode()
    parts = urllib.parse.urlsplit(server.url)
    with socket.create_connection((parts.hostname or "", parts.port or 0), timeout=5) as s:
        s.sendall(request)
        assert s.recv(4096).startswith(b"HTTP/1.1 100 Continue")
        s.sendall(body)
        assert b" 202 " in s.recv(4096).split(b"\r\n")[0]
    assert server.wait_idle(5)


def test_memory_for_partial_bodies_is_bounded_largest_refused_first(
    servers: list[WebhookServer],
) -> None:
    recorder = Recorder()
    server = started(servers, recorder, max_body=1 << 20, max_buffered=2 << 20)
    parts = urllib.parse.urlsplit(server.url)
    address = (parts.hostname or "", parts.port or 0)
    big = []
    for size in (900 << 10, 800 << 10, 500 << 10):  # 2.2 MiB held: over the 2 MiB budget
        sock = socket.create_connection(address, timeout=5)
        sock.sendall(b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % (1 << 20))
        sock.sendall(b"x" * size)
        big.append(sock)
    try:
        first = b""
        while chunk := big[0].recv(4096):  # the largest partial body is the one refused
            first += chunk
        assert first.startswith(b"HTTP/1.1 503 ") and b"Retry-After: " in first
        assert deliver(server.url, *signed_delivery())[0] == 202  # a small delivery gets through
        assert server.intake.buffered <= 2 << 20
    finally:
        for sock in big:
            sock.close()
    assert server.wait_idle(5)
    assert len(recorder.jobs) == 1


def test_delivery_limiter_windows_and_refund() -> None:
    now = [0.0]
    limiter = DeliveryLimiter(per_repository=2, per_sender=5, clock=lambda: now[0])
    assert limiter.admit("o/r", "a") == 0 and limiter.admit("O/R", "b") == 0  # case-insensitive
    assert limiter.admit("o/r", "c") == pytest.approx(60.0)
    limiter.refund("o/r", "b")
    assert limiter.admit("o/r", "c") == 0
    now[0] = 30.0
    assert limiter.admit("o/r", "d") == pytest.approx(30.0)  # the window slides
    now[0] = 60.0
    assert limiter.admit("o/r", "d") == 0
    with pytest.raises(ValueError):
        DeliveryLimiter(0, 1)
