"""A thread that keeps a lock table renewed, for callers without a loop of their own.

The ownership engine renews from its own loop instead; this serves tools and tests
that hold locks directly.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from rocketkafka.errors import StateError
from rocketkafka.ordering.locks.table import LockTable
from rocketkafka.topic_partition import TP

log = logging.getLogger(__name__)


class LockRenewer:
    """A daemon thread that calls :meth:`LockTable.renew_batch` whenever :meth:`~LockTable.renew_due`.

    For callers without a loop of their own; a consumer's rebalance thread calls
    ``renew_batch`` itself instead.

    Parameters:
        table: the lock table to keep renewed.
        on_lost: called (in the renewer thread) with the set of locks a renewal reported lost.
        tick_ms: how often to check whether a renewal is due (default: a tenth of the interval,
            between 10 ms and 1 s).

    >>> with LockRenewer(table, on_lost=print):   # doctest: +SKIP
    ...     consume()
    """

    def __init__(self, table: LockTable, on_lost: Callable[[set[TP]], None] | None = None,
                 tick_ms: int | None = None) -> None:
        self.table, self.on_lost = table, on_lost
        self.tick = (tick_ms if tick_ms is not None else min(max(table.settings.renew_interval_ms // 10, 10), 1000)) / 1000
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rk-lock-renew-{table.owner}", daemon=True)

    def start(self) -> LockRenewer:
        self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Stop the thread (it finishes a round in flight) and wait for it."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def __enter__(self) -> LockRenewer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.tick):
            try:
                if not self.table.renew_due():
                    continue
                lost = self.table.renew_batch()
            except StateError:
                return  # the table was closed under us
            except Exception:
                log.exception("lock renewal of %s failed", self.table.owner)
                continue
            if lost and self.on_lost is not None:
                try:
                    self.on_lost(lost)
                except Exception:
                    log.exception("on_lost callback of %s failed", self.table.owner)
