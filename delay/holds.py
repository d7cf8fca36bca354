"""Held records: delivered at their exact due time by the engine's one timer wheel, not by another hop.

A record whose hop is over with at most ``hold_ms`` left is held in memory and
produced to its real topic exactly when due; the partition goes on meanwhile, and its
commit point stays on the held record until the delivery is acknowledged (the
returned :class:`~rocketkafka.deliveries.Ack`), so a crash re-forwards it rather than
loses it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rocketkafka.deliveries import Ack
from rocketkafka.ordering.work.timers import DueTimers
from rocketkafka.schedule.routing import now_ms


class HoldTimer:
    """Runs ``produce()`` for each held record once the wall clock reaches its due time (epoch ms)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._timers = DueTimers(self._lock, self._fire, "rk-delay-holds")

    def add(self, due_ms: int, produce: Callable[[], Ack]) -> Ack:
        """Hold a record until ``due_ms``; the returned ack resolves when its delivery does."""
        done = Ack()
        with self._lock:
            # held for at most hold_ms: monotonic and wall clock do not drift apart in that time
            self._timers.add(time.monotonic() + max(0, due_ms - now_ms()) / 1000, (due_ms, produce, done))
        return done

    def close(self) -> None:
        """Stop; records still held are not delivered (their partitions are being left: the next owner does)."""
        with self._lock:
            self._timers.close()
        self._timers.join()

    @staticmethod
    def _fire(item: tuple[int, Callable[[], Ack], Ack]) -> None:
        due_ms, produce, done = item
        if due_ms > now_ms():  # never before the due time (a timer may wake a hair early)
            time.sleep((due_ms - now_ms()) / 1000)
        try:
            produce().add_done_callback(lambda ack: done.resolve(ack.exception()))
        except Exception as exc:
            done.resolve(exc)
