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

A listener may also return a :class:`concurrent.futures.Future` (say, of a produce's
delivery report; any object with the same ``done``, ``exception``, ``add_done_callback``
and ``result`` methods will do): the message is handled once the future resolves. The partition's
next messages go to the listener meanwhile -- asynchronous work is pipelined, the
worker never waits for it -- but the position, and so the commit, moves past a
message only after its future and every earlier one resolved (two cursors: *handed*
to the listener, and *settled*). A batch with unsettled messages stays ``running``,
so a graceful leave waits for them before it commits. A failed future is a failed
try: the partition rewinds to that message (the messages handed after it run again)
and is suspended, and after ``max_reconsume_times`` failures the message is
dead-lettered when its turn comes again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from facade.logs import message_fields
from facade.message import ConsumeOrderlyStatus, Suspend
from ordering.dispatch import DueTimers
from ordering.process_queue import Batch, ProcessQueue

if TYPE_CHECKING:
    from ordering.push_consumer import PushConsumer

log = logging.getLogger(__name__)

#: A queue whose lock check failed is offered again this much later (s), not in a busy loop.
LOCK_RECHECK_S = 0.05


@dataclass(frozen=True)
class Progress:
    """A batch listener's answer: what it did with the raw records it was given (orderly mode).

    A listener object with a ``consume_batch(records) -> Progress`` method gets each
    partition's raw confluent-kafka records in offset order, many at a time, instead of
    one decoded message per call (for sidecars that move records; tag filters must be ``*``).

    Parameters:
        handled: how many records from the front it took.
        future: resolves when those are durable (``None``: already); a failure makes the
            partition rewind to the first of them and offer them again after the suspend time.
        suspend_ms: pause the partition, then offer ``records[handled]`` again (``Suspend``'s
            "not yet"); ``None``: carry on. Taking none without a pause suspends for the
            consumer's ``suspend_current_queue_time_ms``.
    """

    handled: int
    future: Any = None
    suspend_ms: int | None = None


@dataclass(eq=False)
class _Handed:
    """A message given to the listener and not settled yet: its future (or an earlier one) is unresolved."""

    batch: Batch
    index: int
    msg: Any
    future: Future | None  # None: handled synchronously, waits only for the ones before it


class OrderlyDispatch:
    """Hands each partition's batches to the pool one at a time, honouring suspensions."""

    def __init__(self, consumer: PushConsumer) -> None:
        self.consumer = consumer
        self.options = consumer.options
        self._pending: dict[ProcessQueue, deque[Batch]] = {}
        self._in_flight: set[ProcessQueue] = set()
        self._attempts: dict[tuple[ProcessQueue, int], int] = {}  # (queue, offset) -> failed tries
        self._unsettled: dict[ProcessQueue, deque[_Handed]] = {}  # in offset order
        self._handed: dict[Batch, int] = {}  # index of a batch's next record for the listener, when ahead of batch.index
        self._current: dict[ProcessQueue, Batch] = {}  # the batch a worker is in
        self._rewound: set[ProcessQueue] = set()  # a future failed: the worker in it must stop handing records
        self._give_up: dict[tuple[ProcessQueue, int], tuple[Any, str]] = {}  # (queue, offset) -> (msg, reason): dead-letter it
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
        for handed in self._unsettled.pop(pq, ()):
            self._handed.pop(handed.batch, None)
        self._rewound.discard(pq)
        for table in (self._attempts, self._give_up):
            for key in [k for k in table if k[0] is pq]:
                del table[key]

    # -- worker ---------------------------------------------------------------------
    def _run(self, pq: ProcessQueue) -> None:
        """Consume the partition's pending batches in order until done, suspended or out of time."""
        started = time.monotonic()
        try:
            with pq.consume_lock:
                while True:
                    with self._lock:
                        queue = self._pending.get(pq)
                        batch = queue[0] if queue and pq not in self._rewound else None
                    if batch is None or not self._run_batch(pq, batch, started):
                        return
                    if time.monotonic() - started > self.options.max_continuous_consume_ms / 1000:
                        return  # let other partitions have the pool
        finally:
            with self._lock:
                self._rewound.discard(pq)
                self._in_flight.discard(pq)
                self._schedule(pq)

    def _run_batch(self, pq: ProcessQueue, batch: Batch, started: float) -> bool:
        """True when every record of the batch was handed out (it leaves ``_pending``); False when the
        partition must stop for now."""
        if batch.done:
            with self._lock:
                self._pop_pending(pq, batch)
            return True
        if not pq.admit(batch):
            return False
        with self._lock:
            self._current[pq] = batch
            first = self._handed.get(batch, batch.index)
        handed_all = False
        try:
            consume_batch = self._batch_listener(batch.records[first]) if first < len(batch.records) else None
            if consume_batch is not None:
                handed_all = self._run_batch_listener(pq, batch, first, consume_batch)
                return handed_all
            for i in range(first, len(batch.records)):
                if pq.dropped:
                    return False  # leaving: the message in the handler was the last one
                if not self.consumer.may_consume(pq):  # lock expired: the poll thread revokes the queue soon
                    pq.suspended_until = time.monotonic() + LOCK_RECHECK_S
                    return False
                key = (pq, batch.records[i].offset())
                futures: list[tuple[Any, Future]] = []
                given_up = self._give_up.get(key)
                if given_up is not None:
                    self.consumer.dead_letter(given_up[0], given_up[1])
                    pause, failures = None, 0
                else:
                    pause, failures = consume_in_place(self.consumer, batch.records[i], self._attempts.get(key, 0), futures)
                with self._lock:
                    if pq in self._rewound:
                        return False  # an earlier future failed: this record runs again after the rewind
                    if pause is not None:
                        self._attempts[key] = failures
                        pq.suspended_until = time.monotonic() + pause / 1000
                        return False
                    self._give_up.pop(key, None)
                    unsettled = self._unsettled.get(pq)
                    if not futures and not unsettled:
                        self._attempts.pop(key, None)
                        batch.advance(i)
                        continue
                    msg, future = futures[0] if futures else (None, None)
                    self._unsettled.setdefault(pq, deque()).append(_Handed(batch, i, msg, future))
                    self._handed[batch] = i + 1
                if future is not None:
                    future.add_done_callback(lambda _f, pq=pq: self._settle(pq))  # runs here if done already
            handed_all = True
            return True
        finally:
            with self._lock:
                self._current.pop(pq, None)
                unsettled = self._unsettled.get(pq)
                batch.running = bool(unsettled) and unsettled[-1].batch is batch
                if handed_all and pq not in self._rewound:
                    self._pop_pending(pq, batch)

    def _batch_listener(self, record: Any) -> Callable[[list[Any]], Progress] | None:
        """The ``consume_batch`` of the record's listener, when it has one and takes every tag."""
        sub, _ = self.consumer.subscription_of(record)
        if sub is None or not sub.filter.matches_all:
            return None
        return getattr(sub.listener, "consume_batch", None)

    def _run_batch_listener(self, pq: ProcessQueue, batch: Batch, first: int,
                            consume_batch: Callable[[list[Any]], Progress]) -> bool:
        """Hand the raw records from ``first`` on to a batch listener; True when it took them all."""
        records, i = batch.records, first
        while i < len(records):
            if pq.dropped:
                return False
            if not self.consumer.may_consume(pq):
                pq.suspended_until = time.monotonic() + LOCK_RECHECK_S
                return False
            progress = consume_batch(records[i:] if i else records)
            handled, future = progress.handled, progress.future
            with self._lock:
                if pq in self._rewound:
                    return False
                if handled:
                    last = i + handled - 1
                    if future is None and not self._unsettled.get(pq):
                        batch.advance(last)
                    else:
                        self._unsettled.setdefault(pq, deque()).append(_Handed(batch, last, None, future))
                        self._handed[batch] = last + 1
                if progress.suspend_ms is not None or not handled:
                    pause = progress.suspend_ms if progress.suspend_ms is not None else self.options.suspend_current_queue_time_ms
                    pq.suspended_until = time.monotonic() + pause / 1000
            if future is not None:
                future.add_done_callback(lambda _f, pq=pq: self._settle(pq))
            if progress.suspend_ms is not None or not handled:
                return False
            i += handled
        return True

    def _pop_pending(self, pq: ProcessQueue, batch: Batch) -> None:
        queue = self._pending.get(pq)
        if queue and queue[0] is batch:
            queue.popleft()

    def _settle(self, pq: ProcessQueue) -> None:
        """Advance past handled messages, in order, as far as their futures resolved (any thread)."""
        with self._lock:
            unsettled = self._unsettled.get(pq)
            while unsettled:
                handed = unsettled[0]
                if handed.future is not None:
                    if not handed.future.done():
                        return
                    if handed.future.exception() is not None:
                        self._rewind(pq, handed)
                        return
                unsettled.popleft()
                self._attempts.pop((pq, handed.batch.records[handed.index].offset()), None)
                handed.batch.advance(handed.index)
                if not unsettled or unsettled[0].batch is not handed.batch:  # a batch's entries are contiguous
                    self._handed.pop(handed.batch, None)
                    if self._current.get(pq) is not handed.batch:
                        handed.batch.running = False
            self._unsettled.pop(pq, None)

    def _rewind(self, pq: ProcessQueue, failed: _Handed) -> None:
        """A future failed (caller holds the lock): run again from its message after the suspend time."""
        error = failed.future.exception()
        reason = f"{type(error).__name__}: {error}"
        key = (pq, failed.batch.records[failed.index].offset())
        failures = self._attempts.get(key, 0) + 1
        if failed.msg is None:  # a batch listener's records: retried until they go through
            log.warning("batch listener's future failed at %s (%s); partition %s rewinds", key[1], reason, pq.tp)
        elif failures > self.options.max_reconsume_times:
            self._give_up[key] = (failed.msg, f"max reconsume times {self.options.max_reconsume_times} reached: {reason}")
        else:
            self._attempts[key] = failures
            log.info("orderly listener's future failed on %s (%s); partition %s rewinds", failed.msg.id, reason, pq.tp,
                     extra=message_fields(failed.msg))
        batches: list[Batch] = []
        for handed in self._unsettled.pop(pq):
            if handed.batch not in batches:
                batches.append(handed.batch)
        pending = self._pending.setdefault(pq, deque())
        current = self._current.get(pq)
        for batch in reversed(batches):
            self._handed.pop(batch, None)
            if current is not batch:
                batch.running = False
            if batch not in pending:
                pending.appendleft(batch)
        if pq in self._in_flight:
            self._rewound.add(pq)  # the worker stops before its next record
        pq.suspended_until = time.monotonic() + self.options.suspend_current_queue_time_ms / 1000
        self._schedule(pq)


def is_future(result: Any) -> bool:
    """A :class:`~concurrent.futures.Future`, or an object with its ``done``, ``exception`` and
    ``add_done_callback`` (and ``result``) methods."""
    return isinstance(result, Future) or (hasattr(result, "add_done_callback") and hasattr(result, "exception"))


def consume_in_place(consumer: PushConsumer, record: Any, failures: int,
                     futures: list[tuple[Any, Future]] | None = None) -> tuple[int | None, int]:
    """Hand one record to its orderly listener; a failure is retried in place, never skipped.

    ``failures`` is how often this record failed before (it becomes the message's
    ``reconsume_times``). Returns ``(None, 0)`` when the record is finished -- handled,
    filtered out, or dead-lettered after ``max_reconsume_times`` failures -- and
    ``(pause_ms, failures)`` when its queue (partition or key) must pause that long and
    then offer the same record again.

    A listener's :class:`~concurrent.futures.Future` is appended with the message to
    ``futures`` when given (the caller settles it); without ``futures`` it is waited for here.
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
        if is_future(result):
            if futures is not None:
                futures.append((msg, result))
                return None, 0
            result = result.result()
    except Exception as exc:
        log.info("orderly listener failed on %s: %s", msg.id, exc, extra=message_fields(msg))
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
