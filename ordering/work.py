"""Runs batches on a worker pool, one worker per shard at a time (parallel-consumer's work manager, RocketMQ's consume services).

The mode of a consumer is only how its records are sharded (:mod:`~rocketkafka.ordering.partition`'s
chunkers): concurrent batches run on their own, an orderly partition is one shard, a
key-ordered partition one shard per order key. A shard's batches run front to back on
one worker at a time; different shards run in parallel on ``threads`` workers.

A :class:`BatchHandler` (the listener handler, the delay forwarder's) handles one batch
from its next record and answers with an :class:`Outcome`:

- ``handled`` records from the batch's ``index`` are through the handler;
- ``settled``: a future that resolves when those are durable (``None``: already). Later
  records keep going meanwhile (pipelining), but the commit point passes a record only
  once its future and every earlier one resolved. A failed future rewinds the shard to
  its first unsettled record and suspends it;
- ``pause_ms``: suspend the shard that long, then offer ``records[index]`` again
  (an orderly failure, a record not yet due, a lock that must be renewed first).

Suspended shards wait on one timer thread (:class:`~rocketkafka.ordering.timers.DueTimers`).
A worker yields its shard after ``max_continuous_ms`` so other shards get turns.

**Fast handlers run on the poll thread.** Handing a batch to a worker costs a thread
switch, and in CPython the poll thread and the workers take turns on one interpreter
anyway: for a listener that takes microseconds the hand-off is most of the cost
(measured: a no-op concurrent consumer does 0.45M msg/s through the pool, 0.61M msg/s
inline). So once the handler's measured time per record is below :data:`INLINE_PER_RECORD_S`,
new batches wait in a local queue that the poll thread runs itself at the end of its
loop (:meth:`WorkManager.tick`), for at most :data:`INLINE_BUDGET_S`; the rest goes to the
workers. Ordering is unchanged: a shard still runs on one thread at a time.

A handler that is usually fast may still block now and then (a slow call, a lock). If
one runs on the poll thread longer than :data:`INLINE_STALL_S`, the timer thread hands
polling to a fresh thread (``on_stall``): fetching goes on, the stuck thread finishes its
batch as a worker would and stops being the poll thread, and the handler runs on the
workers for a while. One thread owns the Kafka client at any time: the stuck thread
touches it no more (it was past the client in its loop).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from rocketkafka.ordering.partition import Batch
from rocketkafka.ordering.timers import DueTimers

log = logging.getLogger(__name__)

#: The poll thread runs batches itself while the handler's recent time per record is below this (s).
INLINE_PER_RECORD_S = 20e-6
#: ... for at most this long per poll loop (s); a batch taking longer moves the handler to the workers.
INLINE_BUDGET_S = 0.005
#: A handler that took this long on one batch stays on the workers for :data:`SLOW_MEMORY_S` (s).
SLOW_BATCH_S = 0.005
SLOW_MEMORY_S = 5.0
#: A batch running on the poll thread longer than this makes a fresh thread take over polling (s).
INLINE_STALL_S = 0.02


@dataclass(slots=True)
class Outcome:
    """What a handler did with a batch (see the module docstring)."""

    handled: int = 0
    settled: Any = None
    pause_ms: int | None = None


class BatchHandler(Protocol):
    """Handles one batch from ``batch.index`` on a worker thread."""

    def handle(self, batch: Batch) -> Outcome:
        """Hand ``batch.records[batch.index:]`` on, front to back; stop where the outcome says.

        A handler may also move ``batch.done`` forward record by record as records finish, while
        ``batch.pipelined`` is False and it returned no future yet: the commit point then follows
        a slow handler message by message instead of batch by batch.

        First it asks ``batch.work.admit(batch)`` (False: the partition is leaving and the
        batch lies after the cut, or it was lost: hand nothing) and stops at ``batch.limit``;
        before each record it checks ``batch.work.valid_until()`` (passed: pause briefly, the
        lock must be renewed first).
        """


class _Settlement:
    """Records of one batch handed out and not yet durable: they settle when ``future`` resolves."""

    __slots__ = ("batch", "upto", "future")

    def __init__(self, batch: Batch, upto: int, future: Any) -> None:
        self.batch, self.upto, self.future = batch, upto, future


class _StallCheck:
    """A timer item: is the poll thread still inside its tick number ``run``?"""

    __slots__ = ("run",)

    def __init__(self, run: int) -> None:
        self.run = run


class _Shard:
    """Batches that run one after another on one worker at a time."""

    __slots__ = ("key", "batches", "running", "suspended_until", "unsettled", "forgotten", "rewinds")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.batches: deque[Batch] = deque()
        self.running = False
        self.suspended_until = 0.0
        self.unsettled: deque[_Settlement] = deque()
        self.forgotten = False
        self.rewinds = 0  # bumped by a rewind: an outcome begun before it is void


class WorkManager:
    """Schedules batches of every owned partition on a pool of ``threads`` workers.

    Parameters:
        handler: what runs a batch.
        threads: worker threads.
        max_continuous_ms: a worker yields its shard after this long.
        rewind_pause_ms: how long a shard pauses after a future failed, before its records run again.
        name: thread name prefix.
        on_stall: called (on the timer thread) when a batch on the poll thread runs past
            :data:`INLINE_STALL_S`: another thread must take over polling. ``None``: batches never
            run on the poll thread.
    """

    def __init__(self, handler: BatchHandler, threads: int, max_continuous_ms: int, rewind_pause_ms: int,
                 name: str, on_stall: Callable[[], None] | None = None) -> None:
        self.handler = handler
        self._rewind_pause_s = rewind_pause_ms / 1000
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix=f"rk-consume-{name}")
        self._max_continuous_s = max_continuous_ms / 1000
        self._shards: dict[Hashable, _Shard] = {}
        self._lock = threading.RLock()  # re-entrant: a future that is already done settles inline
        self._timers = DueTimers(self._lock, self._timer, f"rk-timers-{name}")
        self._closed = False
        self._per_record_s = float("inf")  # recent handler time per record (unknown: workers first)
        self._slow_until = 0.0
        self._on_stall = on_stall
        self._inline: deque[_Shard] = deque()  # shards the poll thread runs at its next tick()
        self._inline_runs = itertools.count()  # identifies one batch run on the poll thread
        self._stalled: set[int] = set()  # ticks whose thread was replaced as poll thread
        self._tick_run = -1  # the tick the poll thread is in (-1: none)

    # -- poll thread ---------------------------------------------------------------------
    def submit(self, batch: Batch) -> None:
        """A new batch; concurrent batches (shard ``None``) start at once, others queue behind their shard.

        When the handler is fast, a shard that can start waits for the poll thread's :meth:`tick`
        instead of a worker (see the module docstring).
        """
        with self._lock:
            key = batch.shard
            if key is None:
                shard = _Shard(batch)
            elif key in self._shards:
                shard = self._shards[key]
            else:
                shard = self._shards[key] = _Shard(key)
            shard.batches.append(batch)
            inline = self._on_stall is not None and self._per_record_s < INLINE_PER_RECORD_S \
                and time.monotonic() >= self._slow_until
            if self._schedule(shard, start=not inline):
                self._inline.append(shard)

    def tick(self) -> None:
        """Once per poll loop, on the poll thread: run the shards queued for it, for at most the budget.

        What is left when the budget is spent -- or when this thread stalled in a handler and
        another took over polling -- goes to the workers.
        """
        if not self._inline:
            return
        now = time.monotonic()
        deadline = now + INLINE_BUDGET_S
        run = next(self._inline_runs)
        with self._lock:
            self._timers.add(now + INLINE_STALL_S, _StallCheck(run))  # one check for the whole tick
            self._tick_run = run
        try:
            while True:
                with self._lock:
                    if not self._inline:
                        return
                    if time.monotonic() >= deadline:
                        self._to_workers()
                        return
                    shard = self._inline.popleft()
                self._run(shard, deadline=deadline)
                if run in self._stalled:  # another thread polls now: this one is done being the poll thread
                    with self._lock:
                        self._to_workers()
                    return
        finally:
            with self._lock:
                self._tick_run = -1
                self._stalled.discard(run)

    def _to_workers(self) -> None:
        """Every shard queued for the poll thread goes to a worker instead (caller holds the lock)."""
        while self._inline:
            self._pool.submit(self._run, self._inline.popleft())

    def close(self) -> None:
        """Stop scheduling; running batches finish, queued ones never start."""
        with self._lock:
            self._closed = True
            self._timers.close()
        self._timers.join()
        self._pool.shutdown(wait=True, cancel_futures=True)

    # -- scheduling (callers hold the lock) ------------------------------------------------
    def _timer(self, item: _Shard | _StallCheck) -> None:
        """The timer thread: a suspended shard's time came, or a stall check of a batch on the poll thread."""
        if not isinstance(item, _StallCheck):
            self._schedule(item)
            return
        if self._tick_run == item.run and self._on_stall is not None:
            self._stalled.add(item.run)
            self._slow_until = time.monotonic() + SLOW_MEMORY_S
            log.warning("a listener ran over %d ms on the poll thread; another thread takes over polling and "
                        "the listener runs on the workers for %g s", INLINE_STALL_S * 1000, SLOW_MEMORY_S)
            self._on_stall()

    def _schedule(self, shard: _Shard, start: bool = True) -> bool:
        """Run ``shard`` if it may run now: on a worker (``start``), else tell the caller to run it (True)."""
        if self._closed or shard.running or shard.forgotten:
            return False
        while shard.batches and not shard.batches[0].work.may_start(shard.batches[0].position):
            shard.batches.popleft()  # its partition left (or was lost) before it started: never
        if not shard.batches:
            self._forget(shard)
            return False
        if shard.suspended_until > time.monotonic():
            self._timers.add(shard.suspended_until, shard)
            return False
        shard.running = True
        if start:
            self._pool.submit(self._run, shard)
            return False
        return True

    def _forget(self, shard: _Shard) -> None:
        if not shard.unsettled:
            shard.forgotten = True
            if self._shards.get(shard.key) is shard:
                del self._shards[shard.key]

    # -- workers -------------------------------------------------------------------------
    def _run(self, shard: _Shard, deadline: float | None = None) -> None:
        """Run the shard's batches in order until empty, suspended, cut off, or out of time.

        ``deadline`` (monotonic s): on the poll thread; what is left after it goes to a worker.
        ``Batch.running`` is true exactly while a handler executes the batch here.
        """
        started = time.monotonic()
        batch: Batch | None = None
        try:
            while True:
                with self._lock:
                    if batch is not None:
                        batch.running = False
                    batch = shard.batches[0] if shard.batches else None
                    if batch is None:
                        return
                    batch.running = True
                    batch.pipelined = bool(shard.unsettled)
                    rewinds = shard.rewinds
                began = time.perf_counter()
                try:
                    outcome = self.handler.handle(batch)
                except BaseException:  # a handler must not kill a worker: stop the shard, log loudly
                    log.exception("batch handler failed on %r; the partition pauses and retries it", batch)
                    outcome = Outcome(0, None, 1000)
                self._measure(time.perf_counter() - began, outcome.handled)
                if not self._apply(shard, batch, outcome, rewinds):
                    return
                now = time.monotonic()
                if now - started > self._max_continuous_s or (deadline is not None and now >= deadline):
                    return
        finally:
            with self._lock:
                if batch is not None:
                    batch.running = False
                shard.running = False
                self._schedule(shard)

    def _measure(self, seconds: float, records: int) -> None:
        """Follow the handler's time per record (benign races: it is a hint for where batches run)."""
        if seconds >= SLOW_BATCH_S:
            self._slow_until = time.monotonic() + SLOW_MEMORY_S
        if records:
            per_record = seconds / records
            known = self._per_record_s
            self._per_record_s = per_record if known == float("inf") else 0.8 * known + 0.2 * per_record

    def _apply(self, shard: _Shard, batch: Batch, outcome: Outcome, rewinds: int) -> bool:
        """Record ``outcome``; True when the shard may go on with its next batch.

        A rewind while the handler ran voids the outcome: the shard starts again from its
        first unsettled record (what this run handed out is handed again).
        """
        with self._lock:
            if shard.rewinds != rewinds:
                return False
            if outcome.handled:
                batch.index += outcome.handled
                if outcome.settled is None and not shard.unsettled:
                    batch.done = batch.index
                else:
                    shard.unsettled.append(_Settlement(batch, batch.index, outcome.settled))
            whole = batch.index >= len(batch.records)
            if whole:
                shard.batches.popleft()
            if outcome.pause_ms is not None:
                shard.suspended_until = time.monotonic() + outcome.pause_ms / 1000
            go_on = whole and outcome.pause_ms is None
        if outcome.settled is not None and outcome.handled:
            outcome.settled.add_done_callback(lambda _f, shard=shard: self._settle(shard))
        return go_on

    def _settle(self, shard: _Shard) -> None:
        """Finish handed records, in order, as far as their futures resolved (any thread)."""
        with self._lock:
            while shard.unsettled:
                head = shard.unsettled[0]
                future = head.future
                if future is not None:
                    if not future.done():
                        return
                    if future.exception() is not None:
                        self._rewind(shard, head, future.exception())
                        return
                shard.unsettled.popleft()
                head.batch.done = max(head.batch.done, head.upto)
            if shard.forgotten is False and not shard.batches and not shard.running:
                self._forget(shard)

    def _rewind(self, shard: _Shard, failed: _Settlement, error: BaseException) -> None:
        """A future failed (caller holds the lock): hand everything unsettled again, after the suspend time."""
        work = failed.batch.work
        first = failed.batch.records[failed.batch.done].offset() if failed.batch.done < len(failed.batch.records) \
            else failed.batch.end
        tries, _ = work.failures.get(first, (0, ""))
        work.failures[first] = (tries + 1, f"{type(error).__name__}: {error}")
        log.warning("delivery of %s@%d failed (%s); the partition rewinds there and retries", work.tp, first, error)
        rewound: list[Batch] = []
        for settlement in shard.unsettled:
            batch = settlement.batch
            if batch not in rewound:
                rewound.append(batch)
                batch.index = batch.done
        shard.unsettled.clear()
        shard.rewinds += 1
        for batch in reversed(rewound):
            if batch not in shard.batches:
                shard.batches.appendleft(batch)
        shard.suspended_until = time.monotonic() + self._rewind_pause_s
        self._schedule(shard)
