"""Write the files triage owns without ever destroying one it does not own.

Every path a command writes (`--kb`, `kb docs -o`, `draft -o`, a run directory's `triage.md` and
`triage.json`) goes through `check_target` first: a missing or zero-length file is new; an
existing one is replaced only when it carries triage's own mark (the SQLite application id of a
compiled knowledge base, the header of a generated page, the schema of a report), and otherwise
`ForeignFileError` is raised before anything is written (the CLI prints it on one line and exits 2).
`write_atomic` then writes a temporary file in the same directory, fsyncs it and moves it into
place with `os.replace`: a reader sees the old file or the new one, never half of either.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

SQLITE_MAGIC = b"SQLite format 3\0"
HEAD_BYTES = 4096  # what a recogniser sees of an existing file


class ForeignFileError(Exception):
    """A path triage was asked to write holds a file that is not triage's (nothing written)."""


def check_target(path: Path, what: str, is_ours: Callable[[Path, bytes], bool]) -> None:
    """Raise ForeignFileError unless `path` is missing, empty, or recognised by `is_ours(path,
    head)` (head: its first HEAD_BYTES bytes). `what` names the file in the message."""
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return  # nothing there to destroy (writing it may still fail, as for any new file)
    except OSError as exc:
        raise ForeignFileError(f"{path}: cannot check it before writing: {exc.strerror}") from None
    if path.is_dir():
        raise ForeignFileError(f"{path} is a directory, not {what}: choose a file path")
    if not path.is_file():
        raise ForeignFileError(f"{path} is not a regular file: refusing to replace it with {what}")
    if st.st_size == 0:
        return
    try:
        with path.open("rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError as exc:
        raise ForeignFileError(f"{path}: cannot check it before writing: {exc.strerror}") from None
    if not is_ours(path, head):
        raise ForeignFileError(
            f"{path} exists and is not {what}: refusing to overwrite it "
            f"(move it aside: mv '{path}' '{path}.bak', or choose another path)"
        )


def sqlite_application_id(head: bytes) -> int | None:
    """The application id in an SQLite header (bytes 68-71, big-endian), None if not SQLite."""
    if not head.startswith(SQLITE_MAGIC) or len(head) < 72:
        return None
    return int.from_bytes(head[68:72], "big")


def starts_with(marker: bytes) -> Callable[[Path, bytes], bool]:
    """A recogniser for text files triage writes with a fixed first line."""
    return lambda _path, head: head.lstrip(b"\xef\xbb\xbf").startswith(marker)


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write `data` to `path` through a temporary file beside it and `os.replace`."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # only a write needs it (it imports `random`: ~10 ms of a run's start-up)

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(OSError):
            # the mode of the file being replaced, else what open() would give (mkstemp's is 0600)
            os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    """The process umask, read without setting it (os.umask would race other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022
