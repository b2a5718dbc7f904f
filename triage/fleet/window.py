"""The recent window that `triage node-check` triages: the tail of each source, bounded in bytes
and, when asked, in time.

Sources are the kernel messages of the journal (`journalctl -k`, which reads the current boot
only), the journal of named units (`journalctl -u UNIT`), or log files. Whatever the source, only
its last `max_bytes` bytes are kept: a file is read from `size - max_bytes` on (a seek, so a 1 GB
log costs what its tail costs), a pipe through a ring buffer of that size; for a window of the
whole boot, journalctl is asked only for its last entries (`-n`, read backwards from the end), so
its own work is bounded too. A cut at the start of the window drops the partial line it leaves.

The time window of the journal is journalctl's own `--since` (or `-b` for the current boot). A file
has no such index, so a time window drops the lines before the first line stamped at or after the
cutoff, reading the stamps that kernel logs carry: ISO 8601 (journalctl `-o short-iso`,
`dmesg --time-format iso`), `dmesg -T` and syslog's `Mon DD HH:MM:SS`. Seconds since boot
(`[ 1843.30]`) say nothing about the wall clock, so a file with only those is windowed by bytes
alone. Anything that makes the window unknowable (journalctl missing, failing, or finding no
journal at all) raises `WindowError`: NPD must hear "Unknown", never "OK", from a blind check.
"""

from __future__ import annotations

import gzip
import re
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, cast

DEFAULT_MAX_BYTES = 8 << 20
DEFAULT_SINCE = "-10min"
READ_CHUNK = 1 << 20
JOURNAL_TIMEOUT = 20.0  # seconds journalctl may take before the check says Unknown
STAMP_HEAD = 80  # a line's timestamp is within its first characters
MIN_LINE_BYTES = 32  # a short kernel line in `-o short-iso`, stamp and host included

# journalctl prints these on stderr, and exits 0, when it cannot see the journal it was asked for.
_BLIND_JOURNAL = {
    "No journal files were found": "no journal files found (journal not mounted?)",
    "not seeing messages from other users and the system": "journal not readable by this user",
}


class WindowError(Exception):
    """The window cannot be read; the message is short and the same on every run."""


@dataclass(frozen=True)
class Since:
    """A time window: `boot` (the current boot), `seconds` before now, or none (bytes only)."""

    text: str  # as given, e.g. "-10min", "boot", "all"
    seconds: float | None = None
    boot: bool = False

    @property
    def unbounded(self) -> bool:
        return self.seconds is None and not self.boot


_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hour": 3600, "d": 86400, "day": 86400}
_SPAN = re.compile(r"-?(\d+)\s*(s|sec|m|min|h|hour|d|day)s?")


def parse_since(text: str) -> Since:
    """`-10min`, `10m`, `2h`, `1d`, `boot`, or `all` (no time window)."""
    value = text.strip().lower()
    if value == "boot":
        return Since(text, boot=True)
    if value == "all":
        return Since(text)
    m = _SPAN.fullmatch(value)
    if not m:
        raise ValueError(f"--since {text!r}: give -10min, 2h, 1d, boot or all")
    return Since(text, seconds=float(int(m.group(1)) * _UNITS[m.group(2)]))


def journal_since_args(since: Since) -> list[str]:
    """journalctl's arguments for a window (`-k` implies the current boot already)."""
    if since.boot or since.unbounded:
        return []
    assert since.seconds is not None
    return [f"--since=-{int(since.seconds)}s"]


def journal_lines(max_bytes: int) -> int:
    """How many entries journalctl is asked for (`-n`): enough to fill the byte window with
    short kernel lines, so that journalctl, which reads `-n` backwards from the end, never formats
    a whole chatty boot only for the tail to be kept."""
    return max(1000, max_bytes // MIN_LINE_BYTES)


def kernel_command(
    since: Since, directory: Path | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> list[str]:
    return _journalctl(["-k", *journal_since_args(since)], directory, since, max_bytes)


def unit_command(
    units: Sequence[str],
    since: Since,
    directory: Path | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[str]:
    args = [a for u in units for a in ("-u", u)]
    if since.boot:
        args.append("-b")
    return _journalctl([*args, *journal_since_args(since)], directory, since, max_bytes)


def _journalctl(args: list[str], directory: Path | None, since: Since, max_bytes: int) -> list[str]:
    where = ["--directory", str(directory)] if directory else []
    if since.seconds is None:
        # journalctl takes -n from the end only without --since: with it, it shows the first
        # entries after the cutoff (systemd 252), the opposite of a recent window
        args = [*args, "-n", str(journal_lines(max_bytes))]
    # not --quiet: it would also silence "No journal files were found", which must be Unknown
    return ["journalctl", *where, *args, "-o", "short-iso", "--no-pager"]


@dataclass
class Window:
    name: str
    data: bytes
    truncated: bool  # the source had more bytes before the window


class _Tail:
    """The last `limit` bytes of what is appended (memory stays below twice the limit)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buf = bytearray()
        self.dropped = False

    def add(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) > 2 * self.limit:
            del self.buf[: len(self.buf) - self.limit]
            self.dropped = True

    def result(self) -> tuple[bytes, bool]:
        if len(self.buf) > self.limit:
            del self.buf[: len(self.buf) - self.limit]
            self.dropped = True
        return bytes(self.buf), self.dropped


def _from_line_start(data: bytes, truncated: bool) -> bytes:
    """Drop the partial line a cut leaves at the start of the window."""
    if not truncated:
        return data
    nl = data.find(b"\n")
    return data[nl + 1 :] if nl >= 0 else b""


def tail_stream(stream: IO[bytes], max_bytes: int) -> tuple[bytes, bool]:
    tail = _Tail(max_bytes)
    while chunk := stream.read(READ_CHUNK):
        tail.add(chunk)
    data, truncated = tail.result()
    return _from_line_start(data, truncated), truncated


def read_file_tail(path: Path, max_bytes: int) -> Window:
    """The last `max_bytes` of a file (.gz and .zst are read through, keeping only the tail)."""
    name = str(path)
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
            fh.seek(0)
            if magic[:2] == b"\x1f\x8b":
                with gzip.GzipFile(fileobj=fh) as gz:
                    data, truncated = tail_stream(cast(IO[bytes], gz), max_bytes)
            elif magic == b"\x28\xb5\x2f\xfd":
                import zstandard

                with zstandard.ZstdDecompressor().stream_reader(fh) as zs:
                    data, truncated = tail_stream(zs, max_bytes)
            else:
                size = fh.seek(0, 2)
                start = max(0, size - max_bytes)
                fh.seek(start)
                data = _from_line_start(fh.read(max_bytes), start > 0)
                truncated = start > 0
    except (OSError, EOFError, ValueError) as exc:
        raise WindowError(f"{_reason(exc)}: {name}") from None  # the reason first: NPD cuts the end
    return Window(name, data, truncated)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return type(exc).__name__


def read_journal(cmd: Sequence[str], max_bytes: int, timeout: float = JOURNAL_TIMEOUT) -> Window:
    """Run journalctl and keep the tail of what it prints. Nothing is written to disk (the
    DaemonSet's root file system is read-only): stderr is drained by a thread, its head kept."""
    name = " ".join(cmd[: cmd.index("-n")] if "-n" in cmd else cmd)
    try:
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        raise WindowError(f"cannot run journalctl: {_reason(exc)}") from None
    assert proc.stdout is not None and proc.stderr is not None
    err_head = bytearray()

    def drain(stream: IO[bytes]) -> None:
        while chunk := stream.read(65536):
            if len(err_head) < 4096:
                err_head.extend(chunk[: 4096 - len(err_head)])

    drainer = threading.Thread(target=drain, args=(proc.stderr,), daemon=True)
    drainer.start()
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        data, truncated = tail_stream(proc.stdout, max_bytes)
        status = proc.wait()
        drainer.join()
    finally:
        timer.cancel()
        proc.stdout.close()
        proc.stderr.close()
    stderr = err_head.decode("utf-8", "replace")
    if status < 0:
        raise WindowError(f"journalctl timed out after {timeout:g}s")
    for said, reason in _BLIND_JOURNAL.items():
        if said in stderr:
            raise WindowError(f"journalctl: {reason}")
    if status != 0:
        first = stderr.strip().splitlines()[0] if stderr.strip() else f"exit status {status}"
        raise WindowError(f"journalctl failed: {first[:120]}")
    return Window(name, data, truncated)


# -- time stamps ---------------------------------------------------------------------------------

_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTHS = {m: i for i, m in enumerate(_MONTH_NAMES, 1)}
_ISO = re.compile(
    r"(?<!\d)(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,]\d{1,9})?\s?(Z|[+-]\d\d:?\d\d)?"
)
_DMESG_T = re.compile(
    r"\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) ([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d) (\d{4})\]"
)
_SYSLOG = re.compile(r"([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d) ")


def line_time(line: str, now: float) -> float | None:
    """The wall-clock time a log line is stamped with (epoch seconds), or None."""
    head = line[:STAMP_HEAD]
    m = _ISO.search(head)
    if m:
        y, mo, d, hh, mi, ss, tz = m.groups()
        text = f"{y}-{mo}-{d}T{hh}:{mi}:{ss}"
        if tz:
            text += "+00:00" if tz == "Z" else (tz if ":" in tz else f"{tz[:3]}:{tz[3:]}")
        try:
            return datetime.fromisoformat(text).timestamp()  # naive: local time
        except ValueError:
            return None
    m = _DMESG_T.search(head)
    if m and m.group(1) in _MONTHS:
        mon, d, hh, mi, ss, y = m.groups()
        return _local(int(y), _MONTHS[mon], int(d), int(hh), int(mi), int(ss))
    m = _SYSLOG.match(head)
    if m and m.group(1) in _MONTHS:
        mon, d, hh, mi, ss = m.groups()
        year = time.localtime(now).tm_year
        stamp = _local(year, _MONTHS[mon], int(d), int(hh), int(mi), int(ss))
        if stamp is not None and stamp > now + 86400:  # syslog has no year: December's in January
            stamp = _local(year - 1, _MONTHS[mon], int(d), int(hh), int(mi), int(ss))
        return stamp
    return None


def _local(y: int, mo: int, d: int, hh: int, mi: int, ss: int) -> float | None:
    try:
        return datetime(y, mo, d, hh, mi, ss).timestamp()
    except ValueError:
        return None


def boot_time() -> float:
    """When this machine booted (the kernel's btime), for `--since boot` over files."""
    with open("/proc/stat", "rb") as fh:
        for line in fh:
            if line.startswith(b"btime "):
                return float(line.split()[1])
    raise WindowError("cannot read the boot time from /proc/stat")


def cutoff(since: Since, now: float) -> float | None:
    if since.boot:
        return boot_time()
    if since.seconds is not None:
        return now - since.seconds
    return None


def drop_before(data: bytes, limit: float, now: float) -> bytes:
    """The data from the first line stamped at or after `limit` on (logs are written in order,
    so the rest of the window is kept whole, continuation lines included). Lines stamped with
    nothing the parser knows do not decide; when no line is stamped at all, nothing is dropped."""
    offset = 0
    stamped = False
    while offset < len(data):
        end = data.find(b"\n", offset)
        end = len(data) if end < 0 else end + 1
        stamp = line_time(
            data[offset : min(end, offset + STAMP_HEAD)].decode("utf-8", "replace"), now
        )
        if stamp is not None:
            stamped = True
            if stamp >= limit:
                return data[offset:]
        offset = end
    return b"" if stamped else data


def collect(
    files: Sequence[Path],
    units: Sequence[str],
    since: Since | None,
    max_bytes: int,
    *,
    journal_dir: Path | None = None,
    now: float | None = None,
) -> list[Window]:
    """The windows of a node check: the files given (else the kernel journal) and the units'
    journal. `since` None means the default: the journal's last 10 minutes, files by bytes only."""
    now = time.time() if now is None else now
    windows: list[Window] = []
    journal_since = since or parse_since(DEFAULT_SINCE)
    if files:
        limit = cutoff(since, now) if since is not None else None
        for path in files:
            window = read_file_tail(path, max_bytes)
            if limit is not None:
                window.data = drop_before(window.data, limit, now)
            windows.append(window)
    else:
        windows.append(
            read_journal(kernel_command(journal_since, journal_dir, max_bytes), max_bytes)
        )
    if units:
        command = unit_command(units, journal_since, journal_dir, max_bytes)
        windows.append(read_journal(command, max_bytes))
    return windows
