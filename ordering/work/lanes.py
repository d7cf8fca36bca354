"""What a worker may do: run a shard's batches through the handler and post what happened to the mailbox.

The poll thread alone writes batch state (:mod:`~rocketkafka.ordering.work.scheduler`). It
hands a shard to a worker as a :class:`Lane`: a feed of :class:`Run` s, one per batch,
each a snapshot of what the handler may do (the records from ``start`` to ``stop``,
already trimmed to a leaving partition's cut, and the in-place retry counts). The worker
runs them front to back and *posts* each :class:`Outcome` (:class:`Handled`); it never
writes a batch, a partition or a shard. The only things it writes are its own: a run's
``done`` (exact progress, which the poll thread reads for the commit point) and
``failure``. The poll thread keeps feeding a lane that is out, so an orderly partition
or an order key fed without pause never waits for the poll thread between batches.

A lane holds at most :data:`~rocketkafka.ordering.work.scheduler.FEED_AHEAD` batches at a time. When a
partition leaves or is lost, the poll thread takes back the runs no worker has begun
(:meth:`~rocketkafka.ordering.work.scheduler.Scheduler.recall`), so it waits only for the run in a handler.
A lane ends (:class:`LaneEnded`) when its feed is empty, after a pause or a partial outcome,
when the poll thread cancelled it (a failed settlement rewinds the shard), or after
``max_continuous_s`` so other shards get their turn.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from queue import Empty, SimpleQueue
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rocketkafka.ordering.work.partition import Batch

log = logging.getLogger(__name__)

#: A partition whose lock must be renewed first is offered again this much later (ms), not in a busy loop.
LOCK_RECHECK_MS = 50
#: What a handler that raised is answered with: pause the shard this long, then offer the record again (ms).
HANDLER_FAILED_PAUSE_MS = 1000
#: A worker whose feed ran dry while its shard has batches waiting waits this long for the poll thread to
#: feed the next one, rather than ending the lane (s): twice the poll loop's wake-up while lanes are out.
LINGER_S = 0.01

_NO_TRIES: Mapping[int, tuple[int, str]] = {}


@dataclass(slots=True)
class Outcome:
    """What a handler did with a run.

    Attributes:
        handled: records from ``run.start`` that are through the handler.
        settled: a future that resolves when those are durable (``None``: already). Later records
            keep going meanwhile (pipelining), but the commit point passes a record only once its
            future and every earlier one resolved. A failed future rewinds the shard to its first
            unsettled record and suspends it.
        pause_ms: suspend the shard that long, then offer the next record again (an orderly failure,
            a record not yet due, a lock that must be renewed first).
    """

    handled: int = 0
    settled: Any = None
    pause_ms: int | None = None

    @classmethod
    def not_ours(cls, handled: int, settled: Any = None) -> Outcome:
        """The lock's validity passed before the next record: stop and look again once it was renewed."""
        return cls(handled, settled, LOCK_RECHECK_MS)


class Run:
    """One batch as a handler sees it: hand ``records[start:stop]`` front to back.

    Attributes:
        records, start, stop: the batch's records and the part to hand.
        work: the partition (read only: ``topic``, ``tp``).
        exact: no earlier record of the shard awaits a future, so the handler may report progress
            record by record in ``done`` while it has returned no future (the commit point then
            follows a slow handler message by message instead of batch by batch).
        done: records from the batch's front that are finished (the handler's to move).
        failure: ``(offset, tries, reason)``: an in-place retry the handler counted (the poll thread
            records it).
        valid_until: the lock's validity when the run began (monotonic s); see :meth:`still_ours`.
    """

    __slots__ = ("batch", "records", "start", "stop", "work", "exact", "done", "failure", "valid_until",
                 "lane", "_tries")

    def __init__(self, batch: Batch, stop: int, tries: Mapping[int, tuple[int, str]],
                 lane: Lane | None = None) -> None:
        self.batch, self.records, self.work, self.lane = batch, batch.records, batch.work, lane
        self.start, self.stop = batch.index, stop
        self.exact = False
        self.done = batch.done
        self.failure: tuple[int, int, str] | None = None
        self.valid_until = 0.0
        self._tries = tries

    def tries(self, offset: int) -> tuple[int, str]:
        """``(failed tries, last reason)`` of the record at ``offset`` so far (in-place retries)."""
        return self._tries.get(offset, (0, ""))

    @property
    def retried(self) -> bool:
        """Whether any record of the partition has a failed try counted (rare: the hot loop asks once)."""
        return bool(self._tries)

    def still_ours(self) -> bool:
        """Whether the partition's lock is still valid: a process that stalled past it must stop.

        Reads the cached validity first (a float compare), and the lock table's only when it passed.
        """
        if time.monotonic() < self.valid_until:
            return True
        self.valid_until = self.work.valid_until()
        return time.monotonic() < self.valid_until and not self.work.revoked

    def __repr__(self) -> str:
        return f"Run({self.batch!r}, [{self.start}, {self.stop}))"


class BatchHandler(Protocol):
    """Hands one run's records on, on a worker thread (or the poll thread, for fast handlers).

    A handler may also have ``lane_ended() -> pause_ms | None``: the lane calls it on the same thread
    when it stops handing runs (what spans a lane's runs ends there:
    :mod:`~rocketkafka.ordering.consumers.transactional_runs`); a pause holds the shard's next lane back. Such a
    handler never runs on the poll thread.
    So does one whose ``off_poll_thread`` is true (it waits for coroutines:
    :mod:`~rocketkafka.ordering.consumers.async_listening`).
    """

    def handle(self, run: Run) -> Outcome:
        """Hand ``run.records[run.start:run.stop]`` on, front to back; stop where the outcome says.

        Before each record, check the lock (``run.still_ours()``, or its cached ``valid_until``
        first on a hot path): once it passed, return :meth:`Outcome.not_ours`. Write nothing but
        ``run.done`` and ``run.failure``.
        """


# -- the mailbox's messages (workers and future callbacks post them; the poll thread applies them) --------
@dataclass(frozen=True, slots=True)
class Handled:
    """A run's outcome; ``at``: when it was posted (monotonic s), so a pause counts from the handler's end."""

    lane: Lane
    run: Run
    outcome: Outcome
    seconds: float
    at: float


@dataclass(frozen=True, slots=True)
class LaneEnded:
    """The lane's worker stopped reading its feed; what is left in it goes back to the shard. ``pause_ms``: how
    long the shard waits before its next lane (the handler's ``lane_ended`` failed to end something)."""

    lane: Lane
    pause_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Settled:
    """A future of the shard resolved (on whatever thread resolved it)."""

    shard: Any


Post = Callable[[Any], None]


class Lane:
    """One shard's turn on a worker: the runs the poll thread feeds it, in order.

    ``epoch`` is the shard's when the lane began; a rewind raises the shard's and sets
    ``cancelled``. ``more`` says that the shard has batches waiting beyond the feed, so a worker
    whose feed ran dry waits a moment for the next. Both are one-way signals: all the poll thread
    tells a running lane.
    """

    __slots__ = ("shard", "epoch", "feed", "cancelled", "exact", "more")

    def __init__(self, shard: Any, epoch: int, exact: bool) -> None:  # shard: the scheduler's (poll side)
        self.shard, self.epoch, self.exact = shard, epoch, exact
        self.feed: SimpleQueue[Run] = SimpleQueue()
        self.cancelled = False
        self.more = False

    def run(self, handler: BatchHandler, post: Post, max_continuous_s: float,
            deadline: float | None = None) -> None:
        """Run the fed batches until the feed is empty, a pause, a partial outcome, a cancel, or out of time.

        ``deadline`` (monotonic s): this lane runs on the poll thread and must stop by then.
        """
        started = time.monotonic()
        exact = self.exact
        try:
            while not self.cancelled:
                try:
                    run = self.feed.get_nowait()
                except Empty:
                    if deadline is not None or not self.more:  # the poll thread never waits for its own feed
                        return
                    try:
                        run = self.feed.get(timeout=LINGER_S)
                    except Empty:
                        return
                began = time.perf_counter()
                try:
                    run.exact = exact
                    run.valid_until = run.work.valid_until()
                    outcome = Outcome(0) if run.work.revoked else handler.handle(run)
                except BaseException:  # a handler must not kill a worker: pause the shard, log loudly
                    log.exception("batch handler failed on %r; the shard pauses and retries it", run)
                    outcome = Outcome(0, None, HANDLER_FAILED_PAUSE_MS)
                now = time.monotonic()
                post(Handled(self, run, outcome, time.perf_counter() - began, now))
                if outcome.settled is not None:
                    exact = False  # later runs of this lane are behind a future
                if outcome.pause_ms is not None or run.start + outcome.handled < run.stop:
                    return
                if now - started > max_continuous_s or (deadline is not None and now >= deadline):
                    return
        finally:
            pause_ms = None
            ended = getattr(handler, "lane_ended", None)  # a handler that spans runs (transactions) ends here
            if ended is not None:
                try:
                    pause_ms = ended()
                except Exception:  # noqa: BLE001 - its runs' futures say what failed; the lane must end
                    log.exception("batch handler failed to end its lane")
                    pause_ms = HANDLER_FAILED_PAUSE_MS
            post(LaneEnded(self, pause_ms))
