"""The webhook server for GitHub, Gitea and Forgejo: verify, dedupe, queue, answer at once.

Order of checks for every POST, before any byte of the body is interpreted:

1. `Content-Length` present (411 otherwise) and within `max_body` (413, the body is not read);
2. inbound cap per minute (429 with `Retry-After`);
3. HMAC-SHA256 of the raw body with the shared secret, compared in constant time: GitHub's
   `X-Hub-Signature-256: sha256=<hex>`, Forgejo's `X-Forgejo-Signature` / Gitea's
   `X-Gitea-Signature` as bare hex (when the Forgejo header is present it alone is checked);
   anything else is 401;
4. a delivery id seen before is a replay: 200, nothing done;
5. only then the JSON is parsed, bots' events dropped, and the job queued (202).

A worker thread takes jobs from the queue and calls the handler, so the forge gets its answer in
milliseconds. Nothing from the payload reaches a shell, `eval` or a template engine.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import queue
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from triage.bot.events import IssueJob, job_from_event

MAX_BODY = 25 << 20  # GitHub does not deliver payloads above 25 MB


def expected_signature(secret: bytes, body: bytes) -> str:
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify_signature(secret: bytes, body: bytes, headers: Mapping[str, str]) -> bool:
    """True when the request carries a valid HMAC-SHA256 of body under secret (see module doc)."""
    if not secret:
        return False
    lowered = {k.lower(): v for k, v in headers.items()}
    if "x-forgejo-signature" in lowered:
        given = lowered["x-forgejo-signature"]
    elif "x-gitea-signature" in lowered:
        given = lowered["x-gitea-signature"]
    elif "x-hub-signature-256" in lowered:
        value = lowered["x-hub-signature-256"]
        if not value.startswith("sha256="):
            return False
        given = value[len("sha256=") :]
    else:
        return False
    try:
        return hmac.compare_digest(expected_signature(secret, body), given.strip())
    except TypeError:  # non-ASCII header
        return False


def delivery_id(headers: Mapping[str, str]) -> str:
    lowered = {k.lower(): v for k, v in headers.items()}
    for name in ("x-forgejo-delivery", "x-gitea-delivery", "x-github-delivery"):
        if lowered.get(name):
            return lowered[name].strip()[:100]
    return ""


def event_name(headers: Mapping[str, str]) -> str:
    lowered = {k.lower(): v for k, v in headers.items()}
    for name in ("x-forgejo-event", "x-gitea-event", "x-github-event"):
        if lowered.get(name):
            return lowered[name].strip()[:60]
    return ""


def parse_payload(body: bytes) -> Any:
    """JSON of a verified body (a function of its own so tests can see when it runs)."""
    return json.loads(body.decode("utf-8"))


class DeliveryLog:
    """Delivery ids already accepted (bounded, in memory): a replay is answered and dropped."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def first_time(self, delivery: str) -> bool:
        with self._lock:
            if delivery in self._ids:
                return False
            self._ids[delivery] = None
            while len(self._ids) > self.size:
                self._ids.popitem(last=False)
            return True


class WebhookServer:
    """A loopback-friendly HTTP server; `handler` runs on the worker thread, one job at a time."""

    def __init__(
        self,
        handler: Callable[[IssueJob], object],
        secret: bytes,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        bot_login: str = "",
        max_body: int = MAX_BODY,
        per_minute: int = 120,
        queue_size: int = 1000,
        log: Callable[[str], None] | None = None,
    ) -> None:
        if not secret:
            raise ValueError("a webhook secret is required")
        self.handler = handler
        self.secret = secret
        self.bot_login = bot_login
        self.max_body = max_body
        self.per_minute = per_minute
        self.deliveries = DeliveryLog()
        self.jobs: queue.Queue[IssueJob | None] = queue.Queue(maxsize=queue_size)
        self.log = log or (lambda _msg: None)
        self.errors: list[str] = []
        self._arrivals: deque[float] = deque()
        self._arrivals_lock = threading.Lock()
        self.httpd = ThreadingHTTPServer((host, port), self._make_handler())
        self.httpd.daemon_threads = True
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        serve = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        serve.start()
        self._threads.append(serve)
        worker = threading.Thread(target=self._work, daemon=True)
        worker.start()
        self._threads.append(worker)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.jobs.put(None)
        for t in self._threads:
            t.join(timeout=5)

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Block until every queued job is done (for tests and graceful shutdown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.jobs.unfinished_tasks == 0:
                return True
            time.sleep(0.005)
        return False

    def _work(self) -> None:
        while True:
            job = self.jobs.get()
            try:
                if job is None:
                    return
                outcome = self.handler(job)
                self.log(f"{job.repo}#{job.number} ({job.event}/{job.action}): {outcome}")
            except Exception as exc:  # keep serving; the error is logged, never echoed to clients
                self.errors.append(f"{type(exc).__name__}: {exc}")
                self.log(f"job failed: {type(exc).__name__}: {exc}")
            finally:
                self.jobs.task_done()

    def _admit(self) -> float:
        """0 when a delivery may be accepted now, else seconds until one may."""
        now = time.monotonic()
        with self._arrivals_lock:
            while self._arrivals and now - self._arrivals[0] >= 60.0:
                self._arrivals.popleft()
            if len(self._arrivals) >= self.per_minute:
                return 60.0 - (now - self._arrivals[0])
            self._arrivals.append(now)
            return 0.0

    def _make_handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 15  # a slow client cannot hold a thread for long
            server_version = "triage-bot"
            sys_version = ""

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _answer(
                self, status: int, message: str, headers: dict[str, str] | None = None
            ) -> None:
                data = (json.dumps({"status": message}) + "\n").encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/healthz":
                    self._answer(200, "ok")
                else:
                    self._answer(404, "not found")

            def do_POST(self) -> None:
                length_header = self.headers.get("Content-Length")
                if length_header is None or not length_header.strip().isdigit():
                    self.close_connection = True
                    self._answer(411, "length required")
                    return
                length = int(length_header)
                if length > server.max_body:
                    self.close_connection = True
                    self._answer(413, "payload too large", {"Connection": "close"})
                    return
                wait = server._admit()
                if wait > 0:
                    self.close_connection = True
                    self._answer(429, "rate limited", {"Retry-After": str(max(1, int(wait) + 1))})
                    return
                body = self.rfile.read(length)
                headers = dict(self.headers.items())
                if len(body) != length or not verify_signature(server.secret, body, headers):
                    self._answer(401, "bad signature")
                    return
                delivery = delivery_id(headers)
                if not delivery:
                    self._answer(400, "missing delivery id")
                    return
                if not server.deliveries.first_time(delivery):
                    self._answer(200, "duplicate delivery ignored")
                    return
                event = event_name(headers)
                if event == "ping":
                    self._answer(200, "pong")
                    return
                try:
                    payload = parse_payload(body)
                except (ValueError, UnicodeDecodeError, RecursionError):
                    self._answer(400, "payload is not JSON")
                    return
                job = job_from_event(event, payload, bot_login=server.bot_login, delivery=delivery)
                if isinstance(job, str):
                    self._answer(202, f"ignored: {job}")
                    return
                try:
                    server.jobs.put_nowait(job)
                except queue.Full:
                    self._answer(503, "queue full", {"Retry-After": "30"})
                    return
                self._answer(202, "queued")

        return Handler
