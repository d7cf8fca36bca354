"""Which shard runs next, where and when; the poll thread's side of the work (parallel-consumer's work
manager).

The mode of a consumer is only how its records are sharded (:mod:`~rocketkafka.ordering.work.partition`'s
chunkers): concurrent batches run on their own, an orderly partition is one shard, a
key-ordered partition one shard per order key. A shard's batches run front to back on
one :class:`~rocketkafka.ordering.work.lanes.Lane` at a time; different shards run in parallel
on ``threads`` workers.

**One writer.** Workers and future callbacks only post to the mailbox, and a post wakes the poll
loop (:attr:`Scheduler.posted`: while work is :attr:`~Scheduler.out` it waits on that, not on Kafka); the poll thread
applies every message at its next :meth:`Scheduler.tick` (:mod:`~rocketkafka.ordering.work.settlement`)
and alone writes batches, partitions and shards, decides what is dispatched, and so
computes commit points and cuts without locks (Parallel Consumer's
``processWorkCompleteMailBox``). Suspended shards wait on a heap the poll thread looks
at; :meth:`Scheduler.tick` returns how soon it wants the loop back.

**Fast handlers run on the poll thread.** Handing a batch to a worker costs a thread
switch, and in CPython the poll thread and the workers take turns on one interpreter
anyway: for a listener that takes microseconds the hand-off is most of the cost. So once
the handler's measured time per record is below :data:`INLINE_PER_RECORD_S`, new lanes
wait for the poll thread's :meth:`Scheduler.tick`, which runs them itself for at most
:data:`INLINE_BUDGET_S`; the rest goes to the workers. A lane on the poll thread posts to
the mailbox like a worker's.

A handler that is usually fast may still block now and then. If one runs on the poll
thread longer than :data:`INLINE_STALL_S`, the timer thread hands polling to a fresh
thread (``on_stall``): fetching goes on, the stuck thread finishes its lane -- posting,
as a worker would -- and returns without touching anything else, and the handler runs on
the workers for a while.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from queue import Empty, SimpleQueue
from typing import Any

from rocketkafka.ordering.work import settlement
from rocketkafka.ordering.work.lanes import BatchHandler, Handled, Lane, LaneEnded, Run, Settled
from rocketkafka.ordering.work.partition import Batch, PartitionWork
from rocketkafka.ordering.work.settlement import Shard
from rocketkafka.ordering.work.timers import DueTimers

log = logging.getLogger(__name__)

#: The poll thread runs lanes itself while the handler's recent time per record is below this (s).
INLINE_PER_RECORD_S = 20e-6
#: ... for at most this long per poll loop (s); a lane taking longer moves the handler to the workers.
INLINE_BUDGET_S = 0.005
#: A handler that took this long on one batch stays on the workers for :data:`SLOW_MEMORY_S` (s).
SLOW_BATCH_S = 0.005
SLOW_MEMORY_S = 5.0
#: A lane running on the poll thread longer than this makes a fresh thread take over polling (s).
INLINE_STALL_S = 0.02
#: How soon the poll loop looks at Kafka again while lanes or futures are out (s): their posts wake it sooner.
OUT_LANES_WAIT_S = 0.005
#: Batches a lane holds at a time: enough that a worker seldom waits for the poll thread between batches
#: (a leaving partition takes back those no worker has begun, :meth:`Scheduler.recall`).
FEED_AHEAD = 16


class Scheduler:
    """Schedules batches of every owned partition on a pool of ``threads`` workers (poll thread).

    Parameters:
        handler: what runs a batch.
        threads: worker threads.
        max_continuous_ms: a worker yields its shard after this long.
        rewind_pause_ms: how long a shard pauses after a future failed, before its records run again.
        name: thread name prefix.
        on_stall: called (on the timer thread) when a lane on the poll thread runs past
            :data:`INLINE_STALL_S`: another thread must take over polling. ``None``: lanes never
            run on the poll thread.
    """

    def __init__(self, handler: BatchHandler, threads: int, max_continuous_ms: int, rewind_pause_ms: int,
                 name: str, on_stall: Callable[[], None] | None = None) -> None:
        self.handler = handler
        self._rewind_pause_s = rewind_pause_ms / 1000
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix=f"rk-consume-{name}")
        self._max_continuous_s = max_continuous_ms / 1000
        self._shards: dict[Hashable, Shard] = {}
        self._mailbox: SimpleQueue[Any] = SimpleQueue()
        #: Set by every post: the poll loop waits on it while work is out (it clears it before each tick).
        self.posted = threading.Event()
        self._awaited = 0  # futures whose Settled post is still to come
        self._due: list[tuple[float, int, Shard]] = []  # suspended shards, by when they may run again
        self._seq = itertools.count()
        self._lanes_out = 0
        self._closed = False
        self._per_record_s = float("inf")  # recent handler time per record (unknown: workers first)
        self._slow_until = 0.0  # also set by the timer thread on a stall: a hint, not batch state
        # a handler that ends something when its lane ends (a transaction's commit, ~90 ms) never runs on the
        # poll thread: inline lanes end every few ms; nor does one that says ``off_poll_thread`` (it waits for
        # coroutines, which await I/O)
        self._on_stall = on_stall if getattr(handler, "lane_ended", None) is None \
            and not getattr(handler, "off_poll_thread", False) else None
        self._inline: deque[Lane] = deque()  # lanes the poll thread runs at its next tick()
        self._guard = threading.Lock()  # makes "still inside the tick" and "hand polling over" one step
        self._guarded = -1  # the tick whose inline lane the poll thread is in (-1: none)
        self._stalled: set[int] = set()  # ticks whose thread was replaced as poll thread
        self._runs = itertools.count()
        self.realigned = 0  # times the order guard rebuilt a serial shard's queue (:meth:`_realign`)
        self._timers = DueTimers(self._guard, self._stall_check, f"rk-timers-{name}") if on_stall else None

    def post(self, message: Any) -> None:
        """Put a message in the mailbox and wake the poll loop (any thread: workers, future callbacks)."""
        self._mailbox.put(message)
        self.posted.set()

    # -- poll thread ---------------------------------------------------------------------
    @property
    def out(self) -> bool:
        """Whether lanes or futures are out: a post is to come."""
        return self._lanes_out > 0 or self._awaited > 0

    def submit(self, batch: Batch) -> None:
        """A new batch; concurrent batches (shard ``None``) start at once, others queue behind their shard."""
        key = batch.shard
        if key is None:
            shard = Shard(batch)
        elif key in self._shards:
            shard = self._shards[key]
        else:
            shard = self._shards[key] = Shard(key)
        shard.batches.append(batch)
        if shard.lane is not None:
            self._feed(shard)
        else:
            self._schedule(shard)

    def recall(self, work: PartitionWork) -> None:
        """Take back the runs of ``work`` that no worker has begun (the partition leaves or was lost).

        A worker takes runs from its feed one at a time; whatever is still in the feed is the poll
        thread's to take (``get_nowait``: each run goes to exactly one of them). What a worker holds
        comes back with its outcome.
        """
        lanes = {id(b.run.lane): b.run.lane for b in work.batches if b.run is not None and b.run.lane is not None}
        for lane in lanes.values():
            shard = lane.shard
            while True:
                try:
                    run = lane.feed.get_nowait()
                except Empty:
                    break
                settlement.returned(run.batch, run)
                shard.fed -= 1
            lane.more = False

    def tick(self) -> float | None:
        """Once per poll loop: apply the mailbox, start what is due, run the poll thread's lanes.

        Returns how soon (s) the loop should come back (lanes or futures out, a suspension ending), or ``None``.
        """
        self._pump()
        if self._due:
            self._wake_due()
        if self._inline:
            if not self._run_inline():
                return None  # another thread polls now: this one touches nothing more
            self._pump()
        if self.out:
            return OUT_LANES_WAIT_S
        if self._due:
            return max(0.0, self._due[0][0] - time.monotonic())
        return None

    def close(self) -> None:
        """Stop scheduling; running lanes finish, queued ones never start."""
        self._closed = True
        if self._timers is not None:
            with self._guard:
                self._timers.close()
            self._timers.join()
        self._pool.shutdown(wait=True, cancel_futures=True)

    # -- the mailbox -----------------------------------------------------------------------
    def _pump(self) -> None:
        """Apply every message posted so far (settling a done future may post more: those too)."""
        mailbox = self._mailbox
        while True:
            try:
                message = mailbox.get_nowait()
            except Empty:
                return
            if type(message) is Handled:
                lane = message.lane
                self._awaited += settlement.handled(lane.shard, lane, message, self.post)
                self._measure(message.seconds, message.outcome.handled)
                if lane.shard.lane is lane and message.outcome.pause_ms is None:
                    self._feed(lane.shard)  # top it up (a paused lane ends: it gets no more)
            elif type(message) is LaneEnded:
                lane = message.lane
                self._lanes_out -= 1
                settlement.lane_ended(lane.shard, lane, message.pause_ms)
                self._schedule(lane.shard)
            elif type(message) is Settled:
                self._awaited -= 1
                shard = message.shard
                if settlement.settle(shard, self._rewind_pause_s):
                    self._schedule(shard)

    # -- scheduling ----------------------------------------------------------------------
    def _schedule(self, shard: Shard) -> None:
        """Start a lane for ``shard`` if it may run now; forget it when it has nothing left."""
        if self._closed or shard.lane is not None:
            return
        batches = shard.batches
        while batches and not batches[0].work.may_start(batches[0].position):
            batches.popleft()  # its partition left (or was lost) before it started: never
        if not batches:
            if not shard.unsettled and self._shards.get(shard.key) is shard:
                del self._shards[shard.key]
            return
        if shard.due > time.monotonic():
            heapq.heappush(self._due, (shard.due, next(self._seq), shard))
            return
        front = batches[0]
        if front.shard is front.work and front.work.first_open() is not front:  # a serial claim, out of step
            self._realign(shard, front.work)
        lane = shard.lane = Lane(shard, shard.epoch, exact=not shard.unsettled)
        shard.fed = 0
        self._lanes_out += 1
        inline = self._on_stall is not None and self._per_record_s < INLINE_PER_RECORD_S \
            and time.monotonic() >= self._slow_until
        self._feed(shard)
        if inline:
            self._inline.append(lane)
        else:
            self._pool.submit(lane.run, self.handler, self.post, self._max_continuous_s)

    def _realign(self, shard: Shard, work: PartitionWork) -> None:
        """A serial claim's shard would go on from a batch other than the claim's first open one, handing a record
        before an earlier one: said loudly, and its queue becomes the claim's open batches again, in order.

        The shard's queue and the claim's batches grow together and only ever shrink from the front
        (:func:`~rocketkafka.ordering.work.settlement.handled`, :meth:`_schedule`), so this should never happen;
        it guards the order promise rather than trusting that reasoning (one chaos run reordered a partition
        this way, cause not found).
        """
        self.realigned += 1
        log.error("order guard: the shard of %s would go on from %r, but the claim's first open batch is %r; "
                  "its queue is rebuilt from the claim's batches (shard: %s; claim: cut=%s revoked=%s out=%d "
                  "batches=%s)", work.tp, shard.batches[0], work.first_open(), list(shard.batches)[:4], work.cut,
                  work.revoked, work.out, list(work.batches)[:6])
        shard.batches = deque(b for b in work.batches if b.index < len(b.records) and b.shard is shard.key
                              and work.may_start(b.records[b.index].offset()))
        shard.fed = 0

    def _feed(self, shard: Shard) -> None:
        """Top the shard's lane up to :data:`FEED_AHEAD` batches, of those that may start (trimmed to a
        leaving partition's cut)."""
        lane = shard.lane
        assert lane is not None
        if lane.cancelled:
            return
        batches = shard.batches
        ahead = min(len(batches), FEED_AHEAD)
        while shard.fed < ahead:
            batch = batches[shard.fed]
            work = batch.work
            stop = work.stop_for(batch)
            if stop is None:
                lane.more = False
                return  # at or after the cut: this batch and the ones behind it never start
            run = Run(batch, stop, dict(work.failures) if work.failures else {}, lane)
            batch.run = run
            work.out += 1
            shard.fed += 1
            lane.feed.put(run)
        lane.more = shard.fed < len(batches)

    def _wake_due(self) -> None:
        now = time.monotonic()
        due = self._due
        while due and due[0][0] <= now:
            shard = heapq.heappop(due)[2]
            if shard.due <= now:
                self._schedule(shard)

    def _measure(self, seconds: float, records: int) -> None:
        """Follow the handler's time per record (a hint for where lanes run)."""
        if seconds >= SLOW_BATCH_S:
            self._slow_until = time.monotonic() + SLOW_MEMORY_S
        if records:
            per_record = seconds / records
            known = self._per_record_s
            self._per_record_s = per_record if known == float("inf") else 0.8 * known + 0.2 * per_record

    # -- lanes on the poll thread ------------------------------------------------------------
    def _run_inline(self) -> bool:
        """Run the lanes queued for the poll thread, for at most the budget; the rest go to the workers.

        Returns False when this thread stalled in a handler and another took over polling.
        """
        deadline = time.monotonic() + INLINE_BUDGET_S
        inline = self._inline
        run = next(self._runs)
        with self._guard:  # one check a tick: past the budget, only a lane that is stuck is still running
            assert self._timers is not None
            self._timers.add(time.monotonic() + INLINE_STALL_S, run)
        while inline:
            if time.monotonic() >= deadline or time.monotonic() < self._slow_until:
                break
            lane = inline.popleft()
            with self._guard:
                self._guarded = run
            lane.run(self.handler, self.post, self._max_continuous_s, deadline)
            with self._guard:
                if run in self._stalled:  # handed over: even the guard is the new poll thread's now
                    self._stalled.discard(run)
                    return False
                self._guarded = -1
            self._pump()  # applied at once: the shard's next lane may run in this tick too
        while inline:
            self._pool.submit(inline.popleft().run, self.handler, self.post, self._max_continuous_s)
        return True

    def _stall_check(self, run: int) -> None:
        """The timer thread, holding the guard: is the poll thread still inside an inline lane of tick ``run``?"""
        if self._guarded != run or self._on_stall is None:
            return
        self._stalled.add(run)
        self._slow_until = time.monotonic() + SLOW_MEMORY_S
        self.posted.set()  # the new poll thread looks at Kafka at once rather than waiting for the stuck lane's post
        log.warning("a listener ran over %d ms on the poll thread; another thread takes over polling and "
                    "the listener runs on the workers for %g s", INLINE_STALL_S * 1000, SLOW_MEMORY_S)
        self._on_stall()

