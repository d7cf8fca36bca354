"""How fetched batches reach the worker pool: the seam between fetching and consuming modes.

The poll thread cuts each partition's fetched records into batches with the
dispatch's ``chunk`` (contiguous slices unless the dispatch has its own, see
:func:`contiguous`), calls :meth:`Dispatch.submit` for every new batch and
:meth:`Dispatch.tick` once per loop. Concurrent mode hands batches straight to the
pool; orderly mode (``ordering.orderly``) holds them back to keep one handler per
partition, key-ordered mode (``ordering.key_ordered``) one handler per order key.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import Executor
from typing import Any, Protocol

from ordering.process_queue import Batch


class Dispatch(Protocol):
    """Receives new batches from the poll thread.

    A dispatch may also define ``chunk(records, size)`` yielding ``(key, records)``
    pairs to choose how a partition's fetched records become batches; without it
    the poll thread uses :func:`contiguous`.
    """

    def submit(self, batch: Batch) -> None: ...

    def tick(self) -> None: ...


def contiguous(records: list[Any], size: int) -> Iterator[tuple[Hashable | None, list[Any]]]:
    """Fetched records of one partition as contiguous batches of at most ``size``, without a key."""
    for i in range(0, len(records), size):
        yield None, records[i:i + size]


class ConcurrentDispatch:
    """Every batch to the pool at once: batches of one partition run in parallel (RocketMQ's concurrent mode)."""

    def __init__(self, pool: Executor, run: Callable[[Batch], None]) -> None:
        self._pool, self._run = pool, run

    def submit(self, batch: Batch) -> None:
        self._pool.submit(self._run, batch)

    def tick(self) -> None:
        pass


class DueTimers:
    """One daemon thread calling ``fire(item)`` once an item's due time (monotonic seconds) has passed.

    ``fire`` runs holding ``lock`` -- the dispatcher's own lock -- and callers of
    :meth:`add` and :meth:`close` hold it too, so timers see the same state as the
    scheduling code. Suspended queues wait here, one heap for all, no thread sleeping
    per queue and no polling.
    """

    def __init__(self, lock: threading.Lock, fire: Callable[[Any], None], name: str) -> None:
        self._wake = threading.Condition(lock)
        self._heap: list[tuple[float, int, Any]] = []
        self._seq = itertools.count()
        self._fire = fire
        self._closed = False
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def add(self, due: float, item: Any) -> None:
        """Fire ``item`` at ``due`` (caller holds the lock)."""
        heapq.heappush(self._heap, (due, next(self._seq), item))
        self._wake.notify()

    def close(self) -> None:
        """Stop the thread; pending items never fire (caller holds the lock)."""
        self._closed = True
        self._wake.notify()

    def _run(self) -> None:
        with self._wake:
            while not self._closed:
                timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                if timeout is None or timeout > 0:
                    self._wake.wait(timeout)
                    continue
                _, _, item = heapq.heappop(self._heap)
                self._fire(item)
