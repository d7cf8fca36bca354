"""Applying the mailbox (poll thread): outcomes, settlements in order, rewinds, pauses.

Every write to a batch, a partition's in-place retry counts and a shard happens here or
in the scheduler, on the poll thread (:mod:`~rocketkafka.ordering.work.scheduler`). A handed
record is finished (``Batch.done``) once it is through the handler and, where a handler
returned a future, that future and every earlier one of its shard resolved. A failed
future rewinds the shard: everything unsettled is handed again from the first unsettled
record after the rewind pause, and what the shard's running lane still reports is void
(its epoch is over).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Hashable
from concurrent.futures import CancelledError, Future
from queue import Empty
from typing import Any

from rocketkafka.errors import AuthorizationError
from rocketkafka.ordering.work.lanes import Handled, Lane, Post, Settled
from rocketkafka.ordering.work.partition import Batch, PartitionWork
from rocketkafka.refusals import REFUSALS

log = logging.getLogger(__name__)

#: The longest pause between two tries of a write no ACL allows (s): the pause doubles from the rewind pause
#: while the refusal lasts, and the partition goes on by itself within this long once the grant is back.
REFUSED_PAUSE_MAX_S = 5.0


class _Settlement:
    """Records of one batch handed out and not yet durable: they settle when ``future`` resolves."""

    __slots__ = ("batch", "upto", "future")

    def __init__(self, batch: Batch, upto: int, future: Any) -> None:
        self.batch, self.upto, self.future = batch, upto, future


class Shard:
    """Batches that run one after another on one lane at a time (poll thread)."""

    __slots__ = ("key", "batches", "lane", "fed", "due", "unsettled", "epoch")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.batches: deque[Batch] = deque()  # unfinished, in order; the first ``fed`` are in the lane
        self.lane: Lane | None = None
        self.fed = 0
        self.due = 0.0  # suspended until (monotonic s)
        self.unsettled: deque[_Settlement] = deque()
        self.epoch = 0  # raised by a rewind: what a lane begun before it reports is void


def handled(shard: Shard, lane: Lane, message: Handled, post: Post) -> bool:
    """A run's outcome: move the batch's ``index`` (and ``done``, when nothing awaits a future), suspend on
    a pause. True when it now awaits the outcome's future, which posts one :class:`Settled` when done."""
    run, outcome = message.run, message.outcome
    batch = run.batch
    returned(batch, run)
    if lane.epoch != shard.epoch:
        return False  # a rewind came after this run began: its records are handed again
    work = batch.work
    if run.failure is not None:
        offset, tries, reason = run.failure
        work.failures[offset] = (tries, reason)
    if run.exact and run.done > batch.done:
        _finish(batch, run.done)  # what the handler reported record by record before any future
    awaits = False
    if outcome.handled:
        batch.index = run.start + outcome.handled
        if outcome.settled is None and not shard.unsettled:
            _finish(batch, batch.index)
        else:
            settlement = _Settlement(batch, batch.index, outcome.settled)
            shard.unsettled.append(settlement)
            if outcome.settled is not None:
                awaits = True
                try:
                    outcome.settled.add_done_callback(lambda _f, shard=shard: post(Settled(shard)))
                except Exception as exc:  # a listener's odd future: its records are handed again
                    settlement.future = _failed(exc)
                    post(Settled(shard))
    # all of it handed, or all up to a leaving partition's cut (nothing after that ever starts): it leaves the
    # shard's queue, and waits for its futures, if any, in ``unsettled``
    if batch.index >= len(batch.records) or (run.stop < len(batch.records) and batch.index >= run.stop):
        if shard.batches and shard.batches[0] is batch:
            shard.batches.popleft()
            shard.fed -= 1
        elif batch in shard.batches:  # not at the front: no run of this epoch got here before it
            place = shard.batches.index(batch)
            del shard.batches[place]
            if place < shard.fed:
                shard.fed -= 1
    if outcome.pause_ms is not None:
        shard.due = message.at + outcome.pause_ms / 1000
    return awaits


def lane_ended(shard: Shard, lane: Lane, pause_ms: int | None = None) -> None:
    """The lane's worker stopped: the runs it never took go back to the shard (its next lane takes them
    again, after ``pause_ms`` when the lane asked for one: a failed commit's rewind comes first)."""
    if pause_ms is not None:
        shard.due = max(shard.due, time.monotonic() + pause_ms / 1000)
    while True:
        try:
            run = lane.feed.get_nowait()
        except Empty:
            break
        returned(run.batch, run)
    if shard.lane is lane:
        shard.lane = None
        shard.fed = 0


def settle(shard: Shard, rewind_pause_s: float) -> bool:
    """Finish handed records, in order, as far as their futures resolved; True when the shard must be
    scheduled."""
    while shard.unsettled:
        head = shard.unsettled[0]
        future = head.future
        if future is not None:
            try:
                if not future.done():
                    return False
            except Exception as exc:  # a listener's odd future: its records are handed again
                future = head.future = _failed(exc)
            error = _failure_of(future)
            if error is not None:
                _rewind(shard, head, error, rewind_pause_s)
                return True
        shard.unsettled.popleft()
        _finish(head.batch, head.upto)
    return not shard.batches and shard.lane is None  # nothing left: the scheduler forgets it


def _failure_of(future: Any) -> BaseException | None:
    """Why a done future failed (cancelled counts), or ``None``; a future that cannot say counts as failed
    rather than taking the poll thread down."""
    try:
        cancelled = getattr(future, "cancelled", None)  # our delivery acks are never cancelled: they have none
        return CancelledError() if cancelled is not None and cancelled() else future.exception()
    except BaseException as exc:  # a listener's odd future: its records are handed again
        return exc


def _failed(error: BaseException) -> Future[None]:
    """A failed future in place of a listener's future that did not behave as one."""
    log.error("a listener returned a future that does not behave as one (%s); its records are handed again",
              error)
    failed: Future[None] = Future()
    failed.set_exception(error)
    return failed


def returned(batch: Batch, run: Any) -> None:
    """``run`` of ``batch`` is back from its lane (handled, or never taken)."""
    if batch.run is run:
        batch.run = None
        batch.work.out -= 1


def _finish(batch: Batch, upto: int) -> None:
    """The first ``upto`` records of ``batch`` are finished; their in-place retry counts are done with."""
    if upto <= batch.done:
        return
    work: PartitionWork = batch.work
    if work.failures:
        for record in batch.records[batch.done:upto]:
            work.failures.pop(record.offset(), None)
    batch.done = upto
    if batch.finished and work.batches and work.batches[0] is batch:
        work.drop_finished()


def _rewind(shard: Shard, failed: _Settlement, error: BaseException, pause_s: float) -> None:
    """A future failed: hand everything unsettled again, after the pause; the running lane's reports are
    void. A future that says which of its records were written before the first failure
    (:attr:`BatchAck.failed_from <rocketkafka.deliveries.BatchAck.failed_from>`) finishes those first: they
    are not handed, nor written, again."""
    batch = failed.batch
    work = batch.work
    written = getattr(failed.future, "failed_from", None)
    if type(written) is int and batch.done < written <= failed.upto:
        _finish(batch, written)
    first = batch.records[batch.done].offset() if batch.done < len(batch.records) else batch.end
    tries, _ = work.failures.get(first, (0, ""))
    work.failures[first] = (tries + 1, f"{type(error).__name__}: {error}")
    if isinstance(error, AuthorizationError):  # waits there, said once a minute, not at every try
        REFUSALS.note(error, f"delivery of {work.tp}@{first}")
        pause_s = max(pause_s, min(REFUSED_PAUSE_MAX_S, pause_s * 2 ** min(tries, 8)))
    else:
        log.warning("delivery of %s@%d failed (%s); the partition rewinds there and retries", work.tp, first,
                    error)
    rewound: list[Batch] = []
    for settlement in shard.unsettled:
        if settlement.batch not in rewound:
            rewound.append(settlement.batch)
            settlement.batch.index = settlement.batch.done
    shard.unsettled.clear()
    shard.epoch += 1
    if shard.lane is not None:
        shard.lane.cancelled = True
    for each in reversed(rewound):
        if each not in shard.batches:
            shard.batches.appendleft(each)
    shard.due = time.monotonic() + pause_s
