"""The bot's rate limits: its own writes to the forge, and the deliveries it accepts.

`WriteLimiter` caps content-creating requests per minute and per hour, below the forge's: GitHub's
secondary limits allow about 80 a minute and 500 an hour; the bot stays well under (20 and 300 by
default). `acquire` waits for a free slot, or raises `RateLimited` when the wait would exceed
`max_wait`.

`DeliveryLimiter` caps the webhook deliveries queued per repository and per sender in any sliding
minute. It is charged only for deliveries whose signature was verified, so its keys (repository
and sender names from the payload) come from the forge, never from whoever can reach the port.

Clocks and sleep are injectable for tests.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
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


class DeliveryLimiter:
    """At most `per_repository` and `per_sender` admissions per key in any sliding `window`."""

    def __init__(
        self,
        per_repository: int = 120,
        per_sender: int = 30,
        *,
        window: float = 60.0,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_repository < 1 or per_sender < 1:
            raise ValueError("rate limits must be at least 1")
        self.caps = {"repository": per_repository, "sender": per_sender}
        self.window = window
        self.max_keys = max_keys  # keys tracked at once; the least recently used is forgotten
        self.clock = clock
        self._stamps: OrderedDict[tuple[str, str], deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _keys(self, repository: str, sender: str) -> list[tuple[str, str]]:
        keys = [("repository", repository.lower())]
        if sender:
            keys.append(("sender", sender.lower()))
        return keys

    def admit(self, repository: str, sender: str = "") -> float:
        """0 when the delivery is admitted (and charged to both keys), else seconds to wait."""
        now = self.clock()
        with self._lock:
            wait = 0.0
            keys = self._keys(repository, sender)
            for key in keys:
                stamps = self._stamps.get(key)
                if stamps is None:
                    continue
                while stamps and now - stamps[0] >= self.window:
                    stamps.popleft()
                if len(stamps) >= self.caps[key[0]]:
                    wait = max(wait, stamps[0] + self.window - now)
            if wait > 0:
                return wait
            for key in keys:
                self._stamps.setdefault(key, deque()).append(now)
                self._stamps.move_to_end(key)
            while len(self._stamps) > self.max_keys:
                self._stamps.popitem(last=False)
            return 0.0

    def refund(self, repository: str, sender: str = "") -> None:
        """Give back the last admission (the delivery was admitted but could not be queued)."""
        with self._lock:
            for key in self._keys(repository, sender):
                stamps = self._stamps.get(key)
                if stamps:
                    stamps.pop()
