"""Orderly consumption (``MessageListenerOrderly``): one handler per partition at a time, in offset order.

RocketMQ's three locks map here as:
    lock table       the Redis lease: a partition is consumed only while it is held and unexpired
                     (checked before every message, so a paused-then-resumed process stops at once);
    queue lock       one worker per partition: a partition's batches are handed out one at a time;
    consume lock     ``ProcessQueue.consume_lock`` held around the handler, and the batch's
                     ``running`` flag that rebalance waits on before it commits and unlocks.

A failed message (``Suspend``, ``SUSPEND_CURRENT_QUEUE_A_MOMENT`` or an exception) is
re-consumed in place after the suspend time, never skipped, up to
``max_reconsume_times``; then it goes to the dead-letter topic and the partition
moves on. Suspended partitions wait on one scheduler thread with a heap of due
times (no sleeping per partition, no polling).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from facade.message import ConsumeOrderlyStatus, Suspend
from ordering.dispatch import DueTimers
from ordering.process_queue import Batch, ProcessQueue

if TYPE_CHECKING:
    from ordering.push_consumer import PushConsumer

log = logging.getLogger(__name__)


class OrderlyDispatch:
    """Hands each partition's batches to the pool one at a time, honouring suspensions."""

    def __init__(self, consumer: PushConsumer) -> None:
        self.consumer = consumer
        self.options = consumer.options
        self._pending: dict[ProcessQueue, deque[Batch]] = {}
        self._in_flight: set[ProcessQueue] = set()
        self._attempts: dict[tuple[ProcessQueue, int], int] = {}  # (queue, offset) -> failed tries
        self._lock = threading.Lock()
        self._timers = DueTimers(self._lock, self._schedule, "rk-orderly-scheduler")
        self._closed = False

    # -- Dispatch protocol (poll thread) --------------------------------------------
    def submit(self, batch: Batch) -> None:
        with self._lock:
            self._pending.setdefault(batch.queue, deque()).append(batch)
            self._schedule(batch.queue)

    def tick(self) -> None:
        with self._lock:
            for pq in [pq for pq in self._pending if pq.revoked or (pq.dropped and pq.drained())]:
                self._forget(pq)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._timers.close()

    # -- scheduling (callers hold self._lock) ---------------------------------------
    def _schedule(self, pq: ProcessQueue) -> None:
        if self._closed or pq in self._in_flight or pq.dropped or not self._pending.get(pq):
            return
        if pq.suspended_until > time.monotonic():
            self._timers.add(pq.suspended_until, pq)
            return
        self._in_flight.add(pq)
        self.consumer._pool.submit(self._run, pq)

    def _forget(self, pq: ProcessQueue) -> None:
        self._pending.pop(pq, None)
        for key in [k for k in self._attempts if k[0] is pq]:
            del self._attempts[key]

    # -- worker ---------------------------------------------------------------------
    def _run(self, pq: ProcessQueue) -> None:
        """Consume the partition's pending batches in order until done, suspended or out of time."""
        started = time.monotonic()
        try:
            with pq.consume_lock:
                while True:
                    with self._lock:
                        queue = self._pending.get(pq)
                        batch = queue[0] if queue else None
                    if batch is None or not self._run_batch(pq, batch, started):
                        return
                    with self._lock:
                        queue.popleft()
                    if time.monotonic() - started > self.options.max_continuous_consume_ms / 1000:
                        return  # let other partitions have the pool
        finally:
            with self._lock:
                self._in_flight.discard(pq)
                self._schedule(pq)

    def _run_batch(self, pq: ProcessQueue, batch: Batch, started: float) -> bool:
        """True when the batch is finished; False when the partition must stop for now."""
        if batch.done:
            return True
        if not pq.admit(batch):
            return False
        try:
            for i in range(batch.index, len(batch.records)):
                if pq.dropped or not self.consumer.may_consume(pq):
                    return False  # leaving: the message in the handler was the last one
                key = (pq, batch.records[i].offset())
                pause, failures = consume_in_place(self.consumer, batch.records[i], self._attempts.get(key, 0))
                if pause is not None:
                    self._attempts[key] = failures
                    pq.suspended_until = time.monotonic() + pause / 1000
                    return False
                self._attempts.pop(key, None)
                batch.advance(i)
            return True
        finally:
            batch.running = False


def consume_in_place(consumer: PushConsumer, record: Any, failures: int) -> tuple[int | None, int]:
    """Hand one record to its orderly listener; a failure is retried in place, never skipped.

    ``failures`` is how often this record failed before (it becomes the message's
    ``reconsume_times``). Returns ``(None, 0)`` when the record is finished -- handled,
    filtered out, or dead-lettered after ``max_reconsume_times`` failures -- and
    ``(pause_ms, failures)`` when its queue (partition or key) must pause that long and
    then offer the same record again.
    """
    prepared = consumer.prepare(record)
    if prepared is None:
        return None, 0
    sub, msg = prepared
    msg.reconsume_times += failures
    options = consumer.options
    try:
        result = sub.listener(msg)
        reason = "listener asked to suspend"
    except Exception as exc:
        log.info("orderly listener failed on %s: %s", msg.id, exc)
        result, reason = Suspend(options.suspend_current_queue_time_ms), f"{type(exc).__name__}: {exc}"
    if result is ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT:
        result = Suspend(options.suspend_current_queue_time_ms)
    if not isinstance(result, Suspend):
        return None, 0
    if result.failed:
        failures += 1
        if failures > options.max_reconsume_times:
            consumer.dead_letter(msg, f"max reconsume times {options.max_reconsume_times} reached: {reason}")
            return None, 0
    return result.millis, failures
