"""The webhook server under load and abuse, over real HTTP on loopback (issue 17, point 6).

Each test reproduces a finding of the reliability audit (F7, F8) against the real server, the real
bot and the fake forge: a burst of 200 concurrent signed deliveries, a flood of forged ones before
a genuine one, and 150 slow-header clients. Counts and times are bounded: every test ends in a few
seconds, and the slow-client test runs with a short header timeout instead of the default.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from test_bot_support import FakeForge, deliver, issue_event, sign

from triage.api import Engine
from triage.bot.forge import GitHub
from triage.bot.ratelimit import WriteLimiter
from triage.bot.respond import IssueBot
from triage.bot.webhook import WebhookServer

ROOT = Path(__file__).resolve().parent.parent.parent
KV_LOG = (ROOT / "examples" / "vllm-kv-cache-oom.log").read_text()
SECRET = b"load-test-secret"
BOT = "triage-bot[bot]"
REPO = "acme/serving"
# What a client sees when the server drops its connection instead of answering it.
DROPPED = (
    ConnectionResetError,
    BrokenPipeError,
    ConnectionAbortedError,
    http.client.RemoteDisconnected,
)


def issue_body(log: str) -> str:
    return f"### Describe the bug\n\nIt fails at start-up.\n\n```text\n{log}```\n"


class LoadRig:
    """Webhook server -> queue -> IssueBot -> fake forge, all on loopback."""

    def __init__(self, engine: Engine, **limits: Any) -> None:
        self.forge = FakeForge("github", bot_login=BOT)
        client = GitHub(
            self.forge.api_url,
            self.forge.token,
            limiter=WriteLimiter(10_000, 100_000),
            sleep=lambda s: None,
        )
        self.bot = IssueBot(engine, client, BOT)
        self.server = WebhookServer(self.bot.handle, SECRET, bot_login=BOT, **limits)
        self.server.start()

    def signed(self, number: int, *, secret: bytes = SECRET) -> tuple[bytes, dict[str, str]]:
        body = json.dumps(issue_event("opened", issue_body(KV_LOG), number=number)).encode()
        headers = {
            "X-GitHub-Event": "issues",
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-Hub-Signature-256": "sha256=" + sign(secret, body),
        }
        return body, headers

    def bot_comments(self, number: int) -> list[dict[str, Any]]:
        return [c for c in self.forge.thread_comments(REPO, number) if c["user"]["login"] == BOT]

    def health(self, timeout: float) -> int:
        parts = urllib.parse.urlsplit(self.server.url)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout)
        try:
            conn.request("GET", "/healthz")
            return conn.getresponse().status
        finally:
            conn.close()

    def close(self) -> None:
        self.server.stop()
        self.forge.close()


@pytest.fixture
def rigs(engine: Engine) -> Iterator[list[LoadRig]]:
    made: list[LoadRig] = []
    yield made
    for rig in made:
        rig.close()


def test_200_concurrent_deliveries_none_reset_one_comment_per_thread(
    engine: Engine, rigs: list[LoadRig]
) -> None:
    # F7: with the default listen backlog of 5, 96 of 200 concurrent deliveries were reset.
    # The per-repository and per-sender caps are raised here: this test is about connections.
    rig = LoadRig(engine, per_minute=1000, sender_per_minute=1000)
    rigs.append(rig)
    numbers = [7] * 100 + list(range(100, 200))  # 100 on one thread, 100 on distinct threads
    requests = [rig.signed(n) for n in numbers]
    start = threading.Barrier(len(requests), timeout=30)

    def send(index: int) -> tuple[int, str]:
        body, headers = requests[index]
        start.wait()  # every client connects at the same moment
        try:
            status, answer, _ = deliver(rig.server.url, body, headers)
        except DROPPED as exc:
            return -1, type(exc).__name__
        return status, answer.get("status", "")

    with ThreadPoolExecutor(len(requests)) as pool:
        results = list(pool.map(send, range(len(requests))))
    dropped = [r for r in results if r[0] == -1]
    assert dropped == [], f"{len(dropped)} of {len(results)} connections dropped: {dropped[:3]}"
    assert results == [(202, "queued")] * len(requests)

    assert rig.server.wait_idle(60)
    assert rig.server.errors == []
    assert len(rig.bot.outcomes) == len(requests)  # every delivery was processed
    for number in set(numbers):
        assert len(rig.bot_comments(number)) == 1, number
    assert rig.forge.creates == 101


def test_forged_flood_costs_a_genuine_delivery_nothing(engine: Engine, rigs: list[LoadRig]) -> None:
    # F7: the cap was charged before the signature, so 120 forged POSTs made the next genuine
    # delivery get 429. Default limits here: 120 per repository, 30 per sender per minute.
    rig = LoadRig(engine)
    rigs.append(rig)
    body, headers = rig.signed(7)
    forgeries: list[dict[str, str]] = []
    for i in range(500):
        forged = dict(headers, **{"X-GitHub-Delivery": str(uuid.uuid4())})
        if i % 3 == 0:
            forged["X-Hub-Signature-256"] = "sha256=" + sign(b"guessed-secret", body)
        elif i % 3 == 1:
            forged["X-Hub-Signature-256"] = "sha256=" + "0" * 64
        else:
            del forged["X-Hub-Signature-256"]
        forgeries.append(forged)

    def send(forged: dict[str, str]) -> int:
        return deliver(rig.server.url, body, forged)[0]

    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(send, forgeries))
    assert statuses == [401] * 500
    assert rig.forge.log == []  # nothing forged reached the forge

    status, answer, _ = deliver(rig.server.url, body, headers)
    assert (status, answer["status"]) == (202, "queued")
    assert rig.server.wait_idle(20)
    assert rig.bot.outcomes == [(REPO, 7, "created")]
    assert len(rig.bot_comments(7)) == 1


def test_slow_header_clients_are_closed_and_hold_no_threads(
    engine: Engine, rigs: list[LoadRig]
) -> None:
    # F8: 150 sockets sending a header line every 5 s kept 114 server threads alive after 30 s.
    # Scaled down in time: a 1 s header deadline, a header line every 0.25 s.
    header_timeout = 1.0
    rig = LoadRig(engine, header_timeout=header_timeout, body_timeout=header_timeout)
    rigs.append(rig)
    baseline = threading.active_count()
    parts = urllib.parse.urlsplit(rig.server.url)
    address = (parts.hostname or "127.0.0.1", parts.port or 0)

    opened: dict[socket.socket, float] = {}
    closed_after: list[float] = []
    try:
        for _ in range(150):
            sock = socket.create_connection(address, timeout=5)
            sock.sendall(b"POST / HTTP/1.1\r\nHost: localhost\r\n")
            sock.setblocking(False)
            opened[sock] = time.monotonic()

        def drip() -> None:
            """One header line to each open socket; note the ones the server has closed."""
            for sock in list(opened):
                try:
                    sock.send(b"X-Drip: 1\r\n")
                    while sock.recv(4096):  # the server's 408, then end of stream
                        pass
                    ended = True
                except BlockingIOError:
                    ended = False
                except OSError:
                    ended = True
                if ended:
                    closed_after.append(time.monotonic() - opened.pop(sock))
                    sock.close()

        peak_threads = baseline
        health_times: list[float] = []
        genuine: list[tuple[int, str]] = []
        give_up = time.monotonic() + header_timeout + 4.0
        while opened and time.monotonic() < give_up:
            drip()
            peak_threads = max(peak_threads, threading.active_count())
            if opened and len(health_times) < 3:  # while the slow clients are connected
                began = time.monotonic()
                assert rig.health(timeout=2.0) == 200
                health_times.append(time.monotonic() - began)
                if not genuine:
                    body, headers = rig.signed(7)
                    status, answer, _ = deliver(rig.server.url, body, headers)
                    genuine.append((status, answer["status"]))
            time.sleep(0.25)
    finally:
        for sock in opened:
            sock.close()

    assert not opened, f"{len(opened)} of 150 slow clients still connected"
    assert max(closed_after) < header_timeout + 2.0, max(closed_after)
    assert peak_threads <= baseline + 4, (baseline, peak_threads)
    assert health_times and max(health_times) < 2.0, health_times
    assert genuine == [(202, "queued")]
    assert rig.server.wait_idle(20)
    assert len(rig.bot_comments(7)) == 1
