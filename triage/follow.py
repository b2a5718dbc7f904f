"""Follow mode: `triage --follow FILE` (like `tail -F`), `journalctl -fu vllm | triage --follow -`.

Each input is read as it grows and cut into segments by the same reader as a batch run
(`triage.read.iter_segments`), so line numbers, JSON-line decoding and ANSI stripping are the same;
each segment goes through the engine's matcher, and each hypothesis that appears for the first time
is written as one JSON line: `{"event": "hypothesis", "input": ..., <hypothesis fields>}`.

A file is followed by name: when it is renamed away (logrotate) the rest of the old file is read
and the new file is opened from its start; when it shrinks (copytruncate) it is read again from its
start; when it does not exist yet, it is waited for. Each such restart is a new *generation*: line
numbers start again at 1 and hypotheses are reported afresh (a restarted server is a new story).
Notices about these events are JSON lines too (`{"event": "notice", ...}`).

Memory stays bounded over hours: nothing keeps the lines that went by; a partial line waits in the
reader (up to its line limit); the matcher keeps at most a fixed number of hits per pattern and this
module trims the text of every kept line.
"""

from __future__ import annotations

import json
import os
import select
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, TextIO, cast

from triage.api import Engine
from triage.match import Matcher
from triage.models import Line, Report
from triage.read import Segment, Source, iter_segments
from triage.redact import redact_value

FOLLOW_CHUNK = 1 << 20  # bytes asked for per read; a read returns what is there
KEPT_TEXT = 4000  # characters of a matched line kept for evidence
MAX_NOTES = 20  # reader notes kept per generation
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

Emit = Callable[[dict[str, Any]], None]
# Called in the follower's thread after each segment, and with True when a generation ended
# (e.g. to write a Prometheus textfile).
Observe = Callable[["Follower", bool], None]


class _FileTail:
    """A blocking byte stream over a file followed by name (tail -F semantics).

    `read` returns the next bytes, waiting (polling) until there are some; it returns b"" when
    the current generation ends (`ended` says why: rotated, truncated, stopped)."""

    def __init__(
        self, path: Path, name: str, poll: float, stop: threading.Event, emit: Emit
    ) -> None:
        self.path = path
        self.name = name
        self.poll = poll
        self.stop = stop
        self.emit = emit
        self.fd: int | None = None
        self.ident: tuple[int, int] | None = None
        self.offset = 0
        self.ended: str | None = None
        self._said_missing = False

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _open(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except (FileNotFoundError, PermissionError, NotADirectoryError):
            return False
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            os.close(fd)
            raise IsADirectoryError(f"{self.name}: is a directory")
        self.close()
        self.fd = fd
        self.ident = (st.st_dev, st.st_ino)
        self.offset = 0
        self._said_missing = False
        return True

    def restart(self) -> None:
        """Begin a new generation after `read` returned b""."""
        if self.ended == "rotated":
            self.close()
        elif self.ended == "truncated" and self.fd is not None:
            os.lseek(self.fd, 0, os.SEEK_SET)
            self.offset = 0
        self.ended = None

    def _name_changed(self) -> str | None:
        """rotated: the name now holds another file; truncated: the file shrank under us."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None  # renamed away, nothing new yet: keep reading the old file
        if (st.st_dev, st.st_ino) != self.ident:
            return "rotated"
        if self.fd is not None and os.fstat(self.fd).st_size < self.offset:
            return "truncated"
        return None

    def read(self, size: int) -> bytes:
        while True:
            if self.stop.is_set():
                self.ended = "stopped"
                return b""
            if self.fd is None and not self._open():
                if not self._said_missing:
                    self.emit(
                        {
                            "event": "notice",
                            "input": self.name,
                            "message": "waiting for the file to appear",
                        }
                    )
                    self._said_missing = True
                self.stop.wait(self.poll)
                continue
            assert self.fd is not None
            data = os.read(self.fd, size)
            if data:
                self.offset += len(data)
                return data
            change = self._name_changed()
            if change == "rotated":
                data = os.read(self.fd, size)  # what the writer added before it switched
                if data:
                    self.offset += len(data)
                    return data
            if change is not None:
                self.ended = change
                return b""
            self.stop.wait(self.poll)


class _PipeTail:
    """A byte stream over a pipe (stdin) that returns what is there, and b"" at EOF or stop."""

    def __init__(self, stream: BinaryIO, poll: float, stop: threading.Event) -> None:
        self.stream = stream
        self.poll = poll
        self.stop = stop
        self.ended: str | None = None
        try:
            self.fd: int | None = stream.fileno()
        except (OSError, AttributeError, ValueError):
            self.fd = None

    def restart(self) -> None:
        self.ended = None

    def read(self, size: int) -> bytes:
        while True:
            if self.stop.is_set():
                self.ended = "stopped"
                return b""
            if self.fd is None:
                reader = getattr(self.stream, "read1", None) or self.stream.read
                data: bytes = reader(size)
            else:
                ready, _, _ = select.select([self.fd], [], [], self.poll)
                if not ready:
                    continue
                data = os.read(self.fd, size)
            if not data:
                self.ended = "eof"
            return data


@dataclass
class _Generation:
    """What one generation of one input keeps: its counters, its matcher, what was reported."""

    source: Source
    matcher: Matcher
    reported: set[str]  # signatures already written as hypotheses
    owners: set[str]  # signatures with at least one hit so far


def _trim(line: Line) -> None:
    if len(line.raw) > KEPT_TEXT:
        line.raw = line.raw[:KEPT_TEXT]
    if len(line.text) > KEPT_TEXT:
        line.text = line.text[:KEPT_TEXT]
    if len(line.message) > KEPT_TEXT:
        line.message = line.message[:KEPT_TEXT]


class Follower:
    """Follows one input and reports each new hypothesis through `emit`."""

    def __init__(
        self,
        engine: Engine,
        name: str,
        stream: _FileTail | _PipeTail,
        emit: Emit,
        observe: Observe | None = None,
    ) -> None:
        self.engine = engine
        self.name = name
        self.stream = stream
        self.emit = emit
        self.observe = observe
        self.failed = False
        self.generation: _Generation | None = None
        self._bytes_before = 0  # bytes of the generations before the current one

    @property
    def bytes_read(self) -> int:
        """Bytes read since following began, over every generation."""
        current = self.generation.source.bytes if self.generation else 0
        return self._bytes_before + current

    def snapshot(self) -> Report:
        """The current generation's report; call it from `observe` (the follower's thread)."""
        gen = self.generation or self._new_generation()
        return self.engine.report(gen.matcher, [gen.source], {}, {})

    def _new_generation(self) -> _Generation:
        return _Generation(Source(name=self.name), self.engine.new_matcher(), set(), set())

    def run(self) -> None:
        while True:
            if self.generation is not None:
                self._bytes_before += self.generation.source.bytes
            self.generation = gen = self._new_generation()
            for segment in self._segments(gen):
                self.feed(gen, segment)
                if self.observe is not None:
                    self.observe(self, False)
            if self.observe is not None:
                self.observe(self, True)
            why = self.stream.ended
            if why in ("rotated", "truncated"):
                self.emit(
                    {
                        "event": "notice",
                        "input": self.name,
                        "message": f"file {why}; reading it again from the start",
                        "lines_read": gen.source.lines,
                    }
                )
                self.stream.restart()
                continue
            self.emit(
                {
                    "event": "end",
                    "input": self.name,
                    "reason": why or "eof",
                    "lines_read": gen.source.lines,
                }
            )
            return

    def _segments(self, gen: _Generation) -> Iterator[Segment]:
        # the tails are duck-typed byte streams (read(size) -> bytes), which is all the reader uses
        stream = cast(BinaryIO, self.stream)
        return iter_segments(stream, gen.source, chunk_size=FOLLOW_CHUNK)

    def feed(self, gen: _Generation, segment: Segment) -> None:
        matcher = gen.matcher
        before = len(matcher.result.hits)
        matcher.feed(segment)
        hits = matcher.result.hits
        for hit in hits[before:]:
            _trim(hit.line)
        if len(gen.source.notes) > MAX_NOTES:
            del gen.source.notes[: len(gen.source.notes) - MAX_NOTES]
        # The set of hypotheses can change only when a signature gets its first hit; more hits of
        # known signatures only move scores. Ranking again only then keeps the cost per segment
        # flat however often a failure repeats.
        refs = self.engine.table.refs
        fresh = {
            refs[h.pattern_index].owner
            for h in hits[before:]
            if refs[h.pattern_index].kind in ("sig", "diff")
        } - gen.owners
        if not fresh:
            return
        gen.owners |= fresh
        report = self.engine.report(matcher, [gen.source], {}, {})
        for hyp in report.hypotheses:
            if hyp.signature in gen.reported:
                continue
            gen.reported.add(hyp.signature)
            if hyp.severity == "error":
                self.failed = True
            fields = hyp.to_json_dict()
            fields.pop("explain", None)
            self.emit(
                {
                    "event": "hypothesis",
                    "input": self.name,
                    "time": datetime.now(UTC).isoformat(timespec="seconds"),
                    **fields,
                }
            )


def run_follow(
    args: list[str],
    engine: Engine,
    out: TextIO,
    poll_interval: float = 0.5,
    stop: threading.Event | None = None,
    *,
    stdin: BinaryIO | None = None,
    observe: Observe | None = None,
) -> int:
    """Follow the inputs ('-' is stdin) until `stop` is set (or stdin ends); JSON lines to `out`.

    Exit status: 1 when an error-severity hypothesis was reported, 0 otherwise, 2 when an input
    cannot be followed (a directory, or stdin twice)."""
    stop = stop or threading.Event()
    lock = threading.Lock()

    def emit(event: dict[str, Any]) -> None:
        if engine.options.redact:  # hypotheses come redacted; notices and errors name inputs
            event = redact_value(event)
        text = json.dumps(event, ensure_ascii=True)  # escapes every control and bidi character
        with lock:
            out.write(text + "\n")
            out.flush()

    args = list(args) or ["-"]
    if args.count("-") > 1:
        emit({"event": "error", "message": "stdin ('-') can be followed only once"})
        return EXIT_USAGE
    followers: list[Follower] = []
    for arg in args:
        if arg == "-":
            pipe = _PipeTail(stdin or sys.stdin.buffer, poll_interval, stop)
            followers.append(Follower(engine, "<stdin>", pipe, emit, observe))
            continue
        path = Path(arg)
        if path.is_dir():
            emit(
                {
                    "event": "error",
                    "input": arg,
                    "message": "is a directory; follow files, not directories",
                }
            )
            return EXIT_USAGE
        followers.append(
            Follower(engine, arg, _FileTail(path, arg, poll_interval, stop, emit), emit, observe)
        )

    errors: list[str] = []

    def guarded(follower: Follower) -> None:
        try:
            follower.run()
        except Exception as exc:  # one input failing must not take the others down
            errors.append(f"{follower.name}: {type(exc).__name__}: {exc}")
            emit(
                {
                    "event": "error",
                    "input": follower.name,
                    "message": f"{type(exc).__name__}: {exc}",
                }
            )
        finally:
            if isinstance(follower.stream, _FileTail):
                follower.stream.close()

    if len(followers) == 1:
        guarded(followers[0])
    else:
        threads = [threading.Thread(target=guarded, args=(f,), daemon=True) for f in followers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        return EXIT_USAGE
    return EXIT_FAILURE if any(f.failed for f in followers) else EXIT_OK
