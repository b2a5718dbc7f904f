"""The webhook server for GitHub, Gitea and Forgejo: read, verify, dedupe, queue, answer at once.

Three stages, each with a fixed number of threads, so no client can make the server grow:

1. **Intake**, one thread with a selector: accepts connections (listen backlog `backlog`) and
   reads each request into memory without giving it a thread. The header block must be complete
   within `header_timeout` seconds of the connection and `MAX_HEADER_BYTES`; then a POST needs
   `Content-Length` at most `max_body` (413, answered from the header, the body is not read) and
   the body must arrive within `body_timeout` seconds. A slow client costs a socket, never a
   thread, and is answered 408 and closed at its deadline. At most `max_connections` are open at
   once; one more is answered 503 with `Retry-After` (as is a body that would take the memory held
   by bodies past `max_buffered`).
2. **Handlers**, `http_threads` threads, get complete requests only. For every POST, in order:
   the HMAC-SHA256 of the raw body with the shared secret, compared in constant time: GitHub's
   `X-Hub-Signature-256: sha256=<hex>`, Forgejo's `X-Forgejo-Signature` / Gitea's
   `X-Gitea-Signature` as bare hex (when the Forgejo header is present it alone is checked);
   anything else is 401, before any limit is charged, so forged requests cost genuine ones
   nothing; a delivery id seen before is a replay: 200, nothing done; only then the JSON is
   parsed and bots' events are dropped (202); then the per-repository and per-sender caps
   (`DeliveryLimiter`, 429 with `Retry-After`) and the job queue (503 with `Retry-After` when
   full); else the job is queued (202).
3. **Worker**, one thread, takes jobs from the queue and calls the handler, so the forge gets its
   answer in milliseconds.

Every delivery is processed or answered with a status the sender may retry; a delivery answered
429 or 503 is not remembered as seen, so its redelivery is processed. Nothing from the payload
reaches a shell, `eval` or a template engine.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import io
import json
import queue
import selectors
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from triage.bot.events import IssueJob, job_from_event
from triage.bot.ratelimit import DeliveryLimiter

MAX_BODY = 25 << 20  # GitHub does not deliver payloads above 25 MB
MAX_HEADER_BYTES = 64 << 10  # the request line and headers; http.server allows 64 KiB per line
BACKLOG = 1024  # the kernel caps it at net.core.somaxconn (4096 on current Linux)
LINGER = 1.0  # seconds an answered-early connection is drained, so closing it sends no reset
RETRY_AFTER = 5  # seconds, when the server is at its connection or memory limit


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

    def forget(self, delivery: str) -> None:
        """The delivery was refused (429, 503): its redelivery must not count as a replay."""
        with self._lock:
            self._ids.pop(delivery, None)


def early_answer(status: int, message: str, headers: Mapping[str, str] | None = None) -> bytes:
    """A complete HTTP response that closes the connection (sent by the intake, not a handler)."""
    data = (json.dumps({"status": message}) + "\n").encode()
    lines = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        "Server: triage-bot",
        "Content-Type: application/json",
        f"Content-Length: {len(data)}",
        "Connection: close",
        *(f"{k}: {v}" for k, v in (headers or {}).items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data


def header_block_end(data: bytes | bytearray, start: int = 0) -> int:
    """Length of the request line and headers once the empty line that ends them is in, else 0."""
    ends = [(data.find(sep, start), len(sep)) for sep in (b"\n\r\n", b"\n\n")]
    found = [pos + size for pos, size in ends if pos >= 0]
    return min(found) if found else 0


def header_values(head: bytes, name: bytes) -> set[bytes]:
    """The distinct values of header `name` (lower case) in a header block."""
    values = set()
    for line in head.split(b"\n")[1:]:
        key, colon, value = line.partition(b":")
        if colon and key.strip().lower() == name:
            values.add(value.strip())
    return values


def declared_length(head: bytes) -> int | None:
    """The `Content-Length` of a header block: None when absent or unusable (several values)."""
    values = header_values(head, b"content-length")
    if len(values) != 1:
        return None
    (value,) = values
    return int(value) if value.isdigit() else None


@dataclass(eq=False)
class _Connection:
    """One accepted socket while the intake reads its request."""

    sock: socket.socket
    address: Any
    deadline: float  # header deadline, then body deadline, then linger deadline
    data: bytearray = field(default_factory=bytearray)
    head: int = 0  # length of the header block once complete
    need: int = 0  # length of the whole request once known
    held: int = 0  # body bytes charged to the memory limit
    draining: bool = False  # answered early: read and discard until end of stream or deadline
    counted: bool = True  # counts against max_connections (False: refused at the limit)


class _Intake:
    """Accept and read requests on one thread; hand each complete request to `dispatch`."""

    def __init__(
        self,
        listener: socket.socket,
        dispatch: Callable[[_Connection], None],
        *,
        max_connections: int,
        header_timeout: float,
        body_timeout: float,
        max_body: int,
        max_buffered: int,
        log: Callable[[str], None],
    ) -> None:
        self.listener = listener
        self.log = log
        self.dispatch = dispatch
        self.max_connections = max_connections
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.max_body = max_body
        self.max_buffered = max_buffered
        self.open = 0  # connections counted against max_connections, handlers' included
        self.buffered = 0  # body bytes held, handlers' included
        self.refused = 0  # connections refused at the limit and still draining
        self._lock = threading.Lock()
        self._conns: dict[socket.socket, _Connection] = {}
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._stopping = False
        self._listener_paused_until = 0.0

    # -- called from other threads --

    def stop(self) -> None:
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def done(self, conn: _Connection) -> None:
        """A handler finished with the connection (it closed the socket)."""
        with self._lock:
            self.open -= 1
            self.buffered -= conn.held

    # -- the intake thread --

    def run(self) -> None:
        self.listener.setblocking(False)
        self._selector.register(self.listener, selectors.EVENT_READ, None)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        try:
            while not self._stopping:
                for key, _ in self._selector.select(self._sweep()):
                    if key.fileobj is self.listener:
                        self._accept()
                    elif key.fileobj is self._wake_r:
                        self._wake_r.recv(64)
                    else:
                        try:
                            self._read(key.data)
                        except Exception as exc:  # one bad connection must not stop the intake
                            self.log(f"connection failed: {type(exc).__name__}: {exc}")
                            self._close(key.data)
        finally:
            for conn in list(self._conns.values()):
                self._close(conn)
            self._selector.close()
            self._wake_r.close()
            self._wake_w.close()

    def _sweep(self) -> float:
        """Answer and close every connection past its deadline; seconds until the next one."""
        now = time.monotonic()
        if self._listener_paused_until and now >= self._listener_paused_until:
            self._listener_paused_until = 0.0
            self._selector.register(self.listener, selectors.EVENT_READ, None)
        soonest = now + 0.5
        for conn in list(self._conns.values()):
            if conn.deadline <= now:
                if not conn.draining:
                    phase = "body" if conn.head else "header"
                    self._send(conn, early_answer(408, f"request {phase} timeout"))
                self._close(conn)
            else:
                soonest = min(soonest, conn.deadline)
        if self._listener_paused_until:
            soonest = min(soonest, self._listener_paused_until)
        return max(0.0, soonest - now)

    def _accept(self) -> None:
        for _ in range(64):  # then let the reads of connections already open have their turn
            try:
                sock, address = self.listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # Out of descriptors or memory: leave the rest in the backlog a moment.
                    self._selector.unregister(self.listener)
                    self._listener_paused_until = time.monotonic() + 0.1
                    return
                continue  # the client gave up before it was accepted
            sock.setblocking(False)
            now = time.monotonic()
            with self._lock:
                admitted = self.open < self.max_connections
                if admitted:
                    self.open += 1
            conn = _Connection(sock, address, now + self.header_timeout, counted=admitted)
            self._conns[sock] = conn
            self._selector.register(sock, selectors.EVENT_READ, conn)
            if not admitted:
                self.refused += 1
                self._answer_early(
                    conn, 503, "too many connections", {"Retry-After": str(RETRY_AFTER)}
                )
                if self.refused > self.max_connections:  # a flood: no draining for these
                    self._close(conn)

    def _read(self, conn: _Connection) -> None:
        try:
            chunk = conn.sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            self._close(conn)
            return
        if not chunk:
            self._close(conn)
            return
        if conn.draining:
            return
        seen = len(conn.data)
        conn.data += chunk
        if not conn.head:
            conn.head = header_block_end(conn.data, max(0, seen - 2))
            if not conn.head:
                if len(conn.data) > MAX_HEADER_BYTES:
                    self._answer_early(conn, 431, "request header fields too large")
                return
            if not self._start_body(conn):
                return
        if not self._hold(conn, len(conn.data) - max(seen, conn.head)):
            return
        if len(conn.data) >= conn.need:
            self._selector.unregister(conn.sock)
            del self._conns[conn.sock]
            self.dispatch(conn)

    def _start_body(self, conn: _Connection) -> bool:
        """Decide from the header block how much body to wait for; False when answered here."""
        head = bytes(conn.data[: conn.head])
        if conn.head > MAX_HEADER_BYTES:
            self._answer_early(conn, 431, "request header fields too large")
            return False
        length = declared_length(head)
        if length is None:
            if head.startswith(b"POST "):
                self._answer_early(conn, 411, "length required")
                return False
            length = 0
        if length > self.max_body:
            self._answer_early(conn, 413, "payload too large")
            return False
        conn.need = conn.head + length
        conn.deadline = time.monotonic() + self.body_timeout
        if length and b"100-continue" in header_values(head, b"expect"):
            self._send(conn, b"HTTP/1.1 100 Continue\r\n\r\n")  # curl waits a second without it
        return True

    def _hold(self, conn: _Connection, size: int) -> bool:
        """Charge `size` body bytes received; over `max_buffered`, refuse the largest holder.

        Counting bytes received (not declared) means holding memory costs an attacker the bytes;
        refusing the largest partial body first means small deliveries get through a flood of
        large ones. False when `conn` itself was refused.
        """
        if size <= 0:
            return True
        with self._lock:
            self.buffered += size
            conn.held += size
            over = self.buffered > self.max_buffered
        while over:
            partial = [c for c in self._conns.values() if c.held and not c.draining]
            if not partial:
                break
            largest = max(partial, key=lambda c: c.held)
            self._answer_early(largest, 503, "server busy", {"Retry-After": str(RETRY_AFTER)})
            if largest is conn:
                return False
            with self._lock:
                over = self.buffered > self.max_buffered
        return True

    def _send(self, conn: _Connection, data: bytes) -> None:
        with contextlib.suppress(OSError):
            conn.sock.send(data)  # a fresh socket's send buffer takes a short answer whole

    def _answer_early(
        self, conn: _Connection, status: int, message: str, headers: dict[str, str] | None = None
    ) -> None:
        """Answer before the request is read, then drain it so that closing sends no reset."""
        self._send(conn, early_answer(status, message, headers))
        with contextlib.suppress(OSError):
            conn.sock.shutdown(socket.SHUT_WR)
        conn.draining = True
        conn.deadline = time.monotonic() + LINGER
        conn.data = bytearray()
        self._release(conn)

    def _release(self, conn: _Connection) -> None:
        with self._lock:
            self.buffered -= conn.held
            conn.held = 0

    def _close(self, conn: _Connection) -> None:
        if self._conns.pop(conn.sock, None) is None:
            return
        self._selector.unregister(conn.sock)
        conn.sock.close()
        self._release(conn)
        if conn.counted:
            with self._lock:
                self.open -= 1
        else:
            self.refused -= 1


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
        sender_per_minute: int = 30,
        queue_size: int = 1000,
        backlog: int = BACKLOG,
        http_threads: int = 4,
        max_connections: int = 256,
        header_timeout: float = 10.0,
        body_timeout: float = 30.0,
        max_buffered: int | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        if not secret:
            raise ValueError("a webhook secret is required")
        if (
            min(backlog, http_threads, max_connections) < 1
            or min(header_timeout, body_timeout) <= 0
        ):
            raise ValueError("backlog, threads, connections and timeouts must be positive")
        self.handler = handler
        self.secret = secret
        self.bot_login = bot_login
        self.max_body = max_body
        self.http_threads = http_threads
        self.limiter = DeliveryLimiter(per_minute, sender_per_minute)
        self.deliveries = DeliveryLog()
        self.jobs: queue.Queue[IssueJob | None] = queue.Queue(maxsize=queue_size)
        self.log = log or (lambda _msg: None)
        self.errors: list[str] = []
        self.httpd = HTTPServer((host, port), self._make_handler(), bind_and_activate=False)
        self.httpd.request_queue_size = backlog  # socketserver's default of 5 resets bursts
        try:
            self.httpd.server_bind()
            self.httpd.server_activate()
        except OSError:
            self.httpd.server_close()
            raise
        self._requests: queue.Queue[_Connection | None] = queue.Queue()
        self.intake = _Intake(
            self.httpd.socket,
            self._requests.put,
            max_connections=max_connections,
            header_timeout=header_timeout,
            body_timeout=body_timeout,
            max_body=max_body,
            max_buffered=max(max_body, max_buffered or 4 * max_body),
            log=self.log,
        )
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        """Start the intake (`_threads[0]`, alive while the server serves), handlers, worker."""
        targets = [(self.intake.run, "webhook-intake")]
        targets += [(self._serve_requests, f"webhook-http-{i}") for i in range(self.http_threads)]
        targets.append((self._work, "webhook-worker"))
        for target, name in targets:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self.intake.stop()
        for _ in range(self.http_threads):
            self._requests.put(None)
        self.jobs.put(None)
        for t in self._threads:
            t.join(timeout=5)
        self.httpd.server_close()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Block until every queued job is done (for tests and graceful shutdown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.jobs.unfinished_tasks == 0:
                return True
            time.sleep(0.005)
        return False

    def _serve_requests(self) -> None:
        """A handler thread: answer complete requests read by the intake, one at a time."""
        while True:
            conn = self._requests.get()
            if conn is None:
                return
            try:
                conn.sock.setblocking(True)
                conn.sock.settimeout(self.intake.header_timeout)  # bounds writing the answer
                self.httpd.RequestHandlerClass(
                    (conn.sock, bytes(conn.data[: conn.need])), conn.address, self.httpd
                )
            except Exception as exc:  # the client went away mid-answer; keep serving
                self.log(f"connection failed: {type(exc).__name__}: {exc}")
            finally:
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_WR)
                conn.sock.close()
                self.intake.done(conn)

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

    def _make_handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "triage-bot"
            sys_version = ""

            def setup(self) -> None:
                # The intake already read the whole request: parse it from memory, answer on the
                # socket. `request` is (socket, request bytes).
                self.connection, data = self.request
                self.rfile = io.BytesIO(data)
                self.wfile = self.connection.makefile("wb")

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
                if length > server.max_body:  # the intake refused it already; kept as a guard
                    self.close_connection = True
                    self._answer(413, "payload too large", {"Connection": "close"})
                    return
                body = self.rfile.read(length)
                headers = dict(self.headers.items())
                if len(body) != length or not verify_signature(server.secret, body, headers):
                    self._answer(401, "bad signature")
                    return
                # Only verified deliveries from here on: they alone reach the replay log, the
                # parser and the rate limits.
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
                sender = payload.get("sender") if isinstance(payload, dict) else None
                login = str(sender.get("login") or "") if isinstance(sender, dict) else ""
                wait = server.limiter.admit(job.repo, login)
                if wait > 0:
                    server.deliveries.forget(delivery)
                    retry = str(max(1, int(wait) + 1))
                    self._answer(429, "rate limited", {"Retry-After": retry})
                    return
                try:
                    server.jobs.put_nowait(job)
                except queue.Full:
                    server.limiter.refund(job.repo, login)
                    server.deliveries.forget(delivery)
                    self._answer(503, "queue full", {"Retry-After": "30"})
                    return
                self._answer(202, "queued")

        return Handler
