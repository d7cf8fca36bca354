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

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from facade.message import ConsumeOrderlyStatus, Suspend
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
        self._timers: list[tuple[float, int, ProcessQueue]] = []
        self._seq = itertools.count()
        self._wake = threading.Condition(self._lock)
        self._closed = False
        threading.Thread(target=self._scheduler, name="rk-orderly-scheduler", daemon=True).start()

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
            self._wake.notify()

    # -- scheduling (callers hold self._lock) ---------------------------------------
    def _schedule(self, pq: ProcessQueue) -> None:
        if pq in self._in_flight or pq.dropped or not self._pending.get(pq):
            return
        now = time.monotonic()
        if pq.suspended_until > now:
            heapq.heappush(self._timers, (pq.suspended_until, next(self._seq), pq))
            self._wake.notify()
            return
        self._in_flight.add(pq)
        self.consumer._pool.submit(self._run, pq)

    def _forget(self, pq: ProcessQueue) -> None:
        self._pending.pop(pq, None)
        for key in [k for k in self._attempts if k[0] is pq]:
            del self._attempts[key]

    def _scheduler(self) -> None:
        with self._lock:
            while not self._closed:
                timeout = self._timers[0][0] - time.monotonic() if self._timers else None
                if timeout is None or timeout > 0:
                    self._wake.wait(timeout)
                    continue
                _, _, pq = heapq.heappop(self._timers)
                self._schedule(pq)

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
            for record in batch.records:
                if record.offset() < batch.position:
                    continue
                if pq.dropped or not self.consumer.may_consume(pq):
                    return False  # leaving: the message in the handler was the last one
                if not self._consume(pq, record):
                    return False
                batch.position = record.offset() + 1
            return True
        finally:
            batch.running = False

    def _consume(self, pq: ProcessQueue, record: Any) -> bool:
        """Handle one record; False when the partition is suspended on it."""
        prepared = self.consumer.prepare(record)
        if prepared is None:
            return True
        sub, msg = prepared
        key = (pq, record.offset())
        msg.reconsume_times += self._attempts.get(key, 0)
        try:
            result = sub.listener(msg)
        except Exception as exc:
            log.info("orderly listener failed on %s: %s", msg.id, exc)
            result = Suspend(self.options.suspend_current_queue_time_ms), f"{type(exc).__name__}: {exc}"
        else:
            if result is ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT:
                result = Suspend(self.options.suspend_current_queue_time_ms)
            result = (result, "listener asked to suspend")
        suspend, reason = result
        if not isinstance(suspend, Suspend):
            self._attempts.pop(key, None)
            return True
        if suspend.failed:
            tries = self._attempts.get(key, 0) + 1
            if tries > self.options.max_reconsume_times:
                self.consumer.dead_letter(msg, f"max reconsume times {self.options.max_reconsume_times} reached: {reason}")
                self._attempts.pop(key, None)
                return True
            self._attempts[key] = tries
        pq.suspended_until = time.monotonic() + suspend.millis / 1000
        return False
