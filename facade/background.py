"""A bounded queue drained by one background thread: side writes (trace events, index entries) off the message path.

:meth:`BackgroundQueue.put` appends and returns at once -- it never blocks and never
raises; when the queue is full the item is dropped and counted, so a slow or dead trace
topic or index can cost trace entries, never a message's progress. The thread hands
what accumulated to ``drain`` in lists; an exception there is logged (once per kind)
and the batch is dropped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class BackgroundQueue(Generic[T]):
    """Items put from any thread, drained in batches by a daemon thread.

    Parameters:
        name: names the thread and log lines.
        drain: called on the thread with the items that accumulated (at most ``batch`` at a time).
        capacity: items held at most; more are dropped (:attr:`dropped`).
        idle: ``drain`` is also called with ``[]`` after this many seconds without items (flush timers).
    """

    def __init__(self, name: str, drain: Callable[[list[T]], None], capacity: int = 100_000, batch: int = 1000,
                 idle: float = 0.1) -> None:
        self.name, self._drain, self.capacity, self._batch, self._idle = name, drain, capacity, batch, idle
        self._items: deque[T] = deque()
        self._wake = threading.Event()
        self._stopping = False
        self._busy = 0  # items taken and not drained yet
        self._failed: set[str] = set()
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name=f"rk-{name}", daemon=True)
        self._thread.start()

    def put(self, item: T) -> bool:
        """Queue ``item``; False (and counted) when the queue is full or closed."""
        if self._stopping or len(self._items) >= self.capacity:
            self.dropped += 1
            return False
        self._items.append(item)  # deque.append is atomic: no lock on the caller's path
        if not self._wake.is_set():
            self._wake.set()
        return True

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything queued so far was drained; False when ``timeout`` s passed first."""
        deadline = time.monotonic() + timeout
        while (self._items or self._busy) and time.monotonic() < deadline:
            self._wake.set()
            time.sleep(0.005)
        return not self._items and not self._busy

    def close(self, timeout: float = 10.0) -> None:
        """Drain what is queued (up to ``timeout`` s), then stop the thread. Idempotent."""
        if self._stopping:
            return
        self.flush(timeout)
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            self._wake.wait(self._idle)
            self._wake.clear()
            while True:
                self._busy = 1  # before taking: flush() must not see an empty queue while items are in hand
                taken = [self._items.popleft() for _ in range(min(self._batch, len(self._items)))]
                self._call(taken)
                self._busy = 0
                if not self._items:
                    break
            if self._stopping:
                return

    def _call(self, items: list[T]) -> None:
        try:
            self._drain(items)
        except Exception as exc:  # never let a side write kill the thread
            kind = type(exc).__name__
            if kind not in self._failed:
                self._failed.add(kind)
                log.warning("%s: a background write failed, %d item(s) dropped: %s", self.name, len(items), exc)
            self.dropped += len(items)
