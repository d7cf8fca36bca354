"""One daemon thread that fires items once their due time (monotonic seconds) has passed.

The delay forwarder's held records wait here, and the scheduler's stall checks of the
poll thread (suspended shards wait on the poll thread's own heap): one heap for all, no
thread sleeping per item and no polling. ``fire`` runs holding the
owner's lock (given at construction), and callers of :meth:`DueTimers.add` and
:meth:`DueTimers.close` hold it too, so a timer sees the same state as the code that
scheduled it. The owner joins the thread once it released the lock: the thread holds
the owner (through ``fire``), and an owner that still has a thread never becomes garbage
-- with it whatever the owner holds, such as a Kafka client and librdkafka's threads.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any


class DueTimers:
    """Fires ``fire(item)`` under ``lock`` once ``item``'s due time (``time.monotonic()`` seconds) has passed.

    Parameters:
        lock: the owner's lock; :meth:`add` and :meth:`close` must be called holding it.
        fire: called holding ``lock`` for each due item, on the timer thread.
        name: the thread's name.
    """

    def __init__(self, lock: threading.Lock | threading.RLock, fire: Callable[[Any], None],
                 name: str) -> None:
        self._wake = threading.Condition(lock)
        self._heap: list[tuple[float, int, Any]] = []
        self._seq = itertools.count()
        self._fire = fire
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def add(self, due: float, item: Any) -> None:
        """Fire ``item`` at ``due`` (caller holds the lock)."""
        heapq.heappush(self._heap, (due, next(self._seq), item))
        self._wake.notify()

    def close(self) -> None:
        """Stop the thread; pending items never fire (caller holds the lock, then calls :meth:`join`)."""
        self._closed = True
        self._wake.notify()

    def join(self, timeout: float | None = 10.0) -> None:
        """Wait until the thread has ended after :meth:`close` (caller must not hold the lock)."""
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        with self._wake:
            while not self._closed:
                timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                if timeout is None or timeout > 0:
                    self._wake.wait(timeout)
                    continue
                _, _, item = heapq.heappop(self._heap)
                self._fire(item)
            # drop the items and the owner's callback: no cycle through this object outlives the thread
            self._heap.clear()
            self._fire = _ignore


def _ignore(item: Any) -> None:
    """What a closed timer would fire (nothing: it never fires again)."""
