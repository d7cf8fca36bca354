"""How fetched batches reach the worker pool: the seam between fetching and consuming modes.

The poll thread calls :meth:`Dispatch.submit` for every new batch and
:meth:`Dispatch.tick` once per loop; concurrent mode hands batches straight to the
pool, orderly and key-ordered modes (``ordering.orderly``) hold them back to keep
one handler per partition or per key.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from typing import Protocol

from ordering.process_queue import Batch


class Dispatch(Protocol):
    """Receives new batches from the poll thread."""

    def submit(self, batch: Batch) -> None: ...

    def tick(self) -> None: ...


class ConcurrentDispatch:
    """Every batch to the pool at once: batches of one partition run in parallel (RocketMQ's concurrent mode)."""

    def __init__(self, pool: Executor, run: Callable[[Batch], None]) -> None:
        self._pool, self._run = pool, run

    def submit(self, batch: Batch) -> None:
        self._pool.submit(self._run, batch)

    def tick(self) -> None:
        pass
