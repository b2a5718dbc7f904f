"""The progress line on stderr while a large input is read: bytes read, MB/s and, for files, the
time left. Shown only when stderr is a terminal (never with -q, never in a pipe or a log file), and
only once an input turns out to be large, so a small log's run prints nothing extra. Drawn by
rich's Progress, imported only when it is first shown."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

# Below this many bytes a run is over before a progress line would help.
SHOW_AFTER_BYTES = 32 << 20


class ProgressLine:
    """Called with (input name, bytes read) after every segment; see RunOptions.progress."""

    def __init__(self) -> None:
        self.read: dict[str, int] = {}
        self.progress: Any = None
        self.tasks: dict[str, Any] = {}
        self.started = time.monotonic()

    def __call__(self, name: str, nbytes: int) -> None:
        done = self.read.get(name, 0) + nbytes
        self.read[name] = done
        if self.progress is None:
            if sum(self.read.values()) < SHOW_AFTER_BYTES:
                return
            self._start()
        task = self.tasks.get(name)
        if task is None:
            # an input's name is its path as given (stdin is "<stdin>"): sized when first shown
            total = None if name == "<stdin>" else _plain_size(Path(name))
            task = self.progress.add_task(name, total=total, completed=0)
            self.tasks[name] = task
        self.progress.update(task, completed=done)

    def _start(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self.progress = Progress(
            TextColumn("[dim]{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(file=sys.stderr),
            transient=True,  # the line disappears when the run ends: the report stands alone
        )
        self.progress.start()

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def wanted(quiet: bool) -> bool:
    """A progress line is drawn only for a person watching a terminal."""
    if quiet or os.environ.get("TERM") == "dumb":
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _plain_size(path: Path) -> int | None:
    """The byte size of an uncompressed regular file (its ETA is known), else None."""
    if path.suffix.lower() in (".gz", ".zst"):
        return None
    try:
        return path.stat().st_size if path.is_file() else None
    except OSError:
        return None
