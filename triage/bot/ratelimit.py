"""The bot's own cap on content-creating requests: per minute and per hour, below the forge's.

GitHub's secondary limits allow about 80 content-creating requests a minute and 500 an hour; the
bot stays well under (20 and 300 by default). `acquire` waits for a free slot, or raises
`RateLimited` when the wait would exceed `max_wait`. Clock and sleep are injectable for tests.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable


class RateLimited(Exception):
    """No write slot within the allowed wait."""


class WriteLimiter:
    def __init__(
        self,
        per_minute: int = 20,
        per_hour: int = 300,
        *,
        max_wait: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if per_minute < 1 or per_hour < 1:
            raise ValueError("rate limits must be at least 1")
        self.windows = ((60.0, per_minute), (3600.0, per_hour))
        self.max_wait = max_wait
        self.clock = clock
        self.sleep = sleep
        self._stamps: deque[float] = deque()
        self._lock = threading.Lock()

    def _wait_needed(self, now: float) -> float:
        while self._stamps and now - self._stamps[0] >= 3600.0:
            self._stamps.popleft()
        wait = 0.0
        for span, cap in self.windows:
            recent = [t for t in self._stamps if now - t < span]
            if len(recent) >= cap:
                wait = max(wait, recent[len(recent) - cap] + span - now)
        return wait

    def acquire(self) -> None:
        """Take one write slot, sleeping until one is free."""
        waited = 0.0
        while True:
            with self._lock:
                now = self.clock()
                wait = self._wait_needed(now)
                if wait <= 0:
                    self._stamps.append(now)
                    return
            if waited + wait > self.max_wait:
                raise RateLimited(f"write cap reached; next slot in {wait:.0f} s")
            self.sleep(wait)
            waited += wait
