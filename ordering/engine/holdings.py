"""How a lock's partitions come into the engine and leave it again (poll thread).

Taken: their committed offsets are read, the step makes a claim, the client is assigned
them. Released: fetching stops, the claim drains (finishes what it handed out), its
positions are committed, and only then is the lock given back: the next owner starts
where this one stopped, and a graceful change re-delivers nothing. Revoked (the lock was
lost): the claim stops at once and nothing is committed, as the next owner may have moved
on and our commit would rewind it.

Apart from the engine (:mod:`~rocketkafka.ordering.engine.engine`), which decides what to hold
and when; it is seen through :class:`Holder`, as importing it here would be an import cycle.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import Protocol

from confluent_kafka import Consumer, KafkaException, TopicPartition

from rocketkafka.errors import RedisAuthError
from rocketkafka.ordering.locks import LockTable
from rocketkafka.ordering.engine.metrics import ConsumerMetrics
from rocketkafka.ordering.engine.owned import OwnedLock, shared_numbers
from rocketkafka.ordering.engine.resets import OffsetResets, commit_reset
from rocketkafka.ordering.work.step import ClaimContext, Step
from rocketkafka.refusals import REFUSALS
from rocketkafka.topic_partition import TP

log = logging.getLogger(__name__)

#: Seconds between tries of a leaving lock's last commit while the broker refuses it.
LAST_COMMIT_RETRY_S = 0.5


class Holder(Protocol):
    """The engine as taking and letting go see it: its partition table, lock table and client."""

    name: str
    step: Step
    metrics: ConsumerMetrics | None
    on_assigned: Callable[[list[TP]], None] | None
    _owned: dict[TP, OwnedLock]  # lock -> owned
    _by_tp: dict[TP, OwnedLock]  # every covered partition -> owned
    _ambiguous: set[int]
    _leaving: dict[TP, OwnedLock]  # lock -> owned, draining
    _locks: LockTable | None
    _resets: OffsetResets | None
    _rebalance_now: threading.Event

    @property
    def kafka(self) -> Consumer: ...

    def commit(self, owned: Iterable[OwnedLock], asynchronous: bool) -> bool: ...

    def _commit_soon(self) -> None: ...


def lock(engine: Holder, wanted: set[TP]) -> dict[TP, int | None] | None:
    """Lock ``wanted`` (all of them, without a lock table): the fencing token of each won; ``None`` when Redis
    refused our user (the lock table's keys, NOPERM; or its password, rotated while we run): told once a minute
    and in the health, not raised -- the poll thread waits for the grant, as for Kafka's."""
    if engine._locks is None:
        return {tp: None for tp in wanted}
    try:
        return {tp: held.fencing_token for tp, held in engine._locks.lock_batch(wanted).items()}
    except RedisAuthError as exc:
        REFUSALS.note(exc, f"{engine.name}: locking")
        return None


def take(engine: Holder, won: dict[TP, int | None]) -> None:
    """Start a claim on every lock ``won`` (with its fencing token) and assign its partitions.

    Raises:
        KafkaException: the broker cannot name the committed offsets now; nothing changed.
    """
    covered = {lock: engine.step.partitions_of(lock) for lock in sorted(won)}
    every = [tp for partitions in covered.values() for tp in partitions]
    engine.step.fence(sorted(won))  # first: a previous owner's transaction must not commit after the read
    answer = engine.kafka.committed([TopicPartition(*tp) for tp in every], timeout=10)
    failed = [tp.error for tp in answer if tp.error is not None]  # an error per partition, not per request
    if failed:
        raise KafkaException(failed[0])
    committed = {(tp.topic, tp.partition): tp.offset for tp in answer}
    starts = _starts(engine, every, committed)
    assignment = []  # nothing changes above this line: a broker error leaves the engine as it was
    for lock, partitions in covered.items():
        offsets = {tp: starts[tp] for tp in partitions}
        context = ClaimContext(lock, partitions, won[lock], offsets, _validity(engine._locks, lock),
                               partial(_seek, engine), engine._commit_soon)
        owned = OwnedLock(lock, engine.step.claim(context), partitions, won[lock],
                          committed={tp: committed[tp] for tp in partitions if committed[tp] >= 0},
                          fetch_from=dict(offsets))
        engine._owned[lock] = owned
        for tp in partitions:
            engine._by_tp[tp] = owned
            assignment.append(TopicPartition(*tp, offsets[tp]))
    engine._ambiguous = shared_numbers(engine._by_tp)
    engine.kafka.incremental_assign(assignment)
    log.info("%s took %s", engine.name, sorted(won))
    if engine.on_assigned is not None:
        engine.on_assigned(sorted(won))


def _starts(engine: Holder, every: list[TP], committed: dict[TP, int]) -> dict[TP, int]:
    """Where each partition starts: its committed offset, else the step's initial offset -- asked for all of
    them at once when the step can (``initial_offsets``: one request, where a round trip each made 2,048
    partitions take 2 s)."""
    starts = {tp: committed[tp] for tp in every if committed[tp] >= 0}
    fresh, step = [tp for tp in every if committed[tp] < 0], engine.step
    batched = getattr(step, "initial_offsets", None)
    if batched is not None and len(fresh) > 1:
        return {**starts, **batched(fresh, engine.kafka)}
    return {**starts, **{tp: step.initial_offset(tp, engine.kafka) for tp in fresh}}


def _validity(locks: LockTable | None, lock: TP) -> Callable[[], float]:
    if locks is None:
        return lambda: float("inf")
    return lambda: locks.valid_until(lock)


def _seek(engine: Holder, tp: TP, offset: int) -> None:
    engine.kafka.seek(TopicPartition(*tp, offset))
    owned = engine._by_tp.get(tp)
    if owned is not None:
        owned.fetch_from[tp] = offset


def release(engine: Holder, locks: Iterable[TP]) -> None:
    """Stop fetching ``locks``' partitions; commit and unlock each once it drained (:func:`finish_releases`).

    Each lock is among the leaving before its claim hears of it (a drop-in's ``on_revoke`` may raise), and the
    ones begun are unassigned whatever happens: none is unlocked while still fetched, none forgotten.
    """
    leaving: list[OwnedLock] = []
    try:
        for lock in locks:
            owned = engine._owned.pop(lock)
            leaving.append(owned)
            if engine._locks is not None and not engine._locks.is_held(lock):
                _mark_revoked(engine, owned)  # expired while we stalled: the next owner may have moved on
                continue
            owned.leaving = True
            engine._leaving[lock] = owned
            owned.claim.leave()
    finally:
        _unassign(engine, leaving)


def finish_releases(engine: Holder) -> None:
    """Commit and unlock every leaving lock whose claim drained (a revoked one: neither), and forget it.

    The drained locks are committed in one request and unlocked in one round (a join that moves 1,024
    partitions made 1,024 of each, one a poll pass); a commit that fails is tried again lock by lock.
    """
    now, done, committing = time.monotonic(), [], []
    for lock, owned in list(engine._leaving.items()):
        if not owned.claim.drained():
            continue
        if owned.reset_to is not None and not owned.revoked:
            assert engine._resets is not None
            if commit_reset(engine.kafka, owned, engine._resets, engine._locks, engine.name):
                engine._rebalance_now.set()  # take it back now, from the new committed offset
            done.append(owned)
        elif owned.revoked:
            engine._rebalance_now.set()  # lost, not given away: ask for it again now, not at the next rebalance
            done.append(owned)
        elif now >= owned.commit_again_at:
            committing.append(owned)
    if committing and not engine.commit(committing, asynchronous=False):
        # unlocked now, the next owner would start before what was handled here: the lock stays held (and
        # renewed) until its commit lands, or is lost (then nothing is committed)
        failed = committing if len(committing) == 1 else \
            [owned for owned in committing if not engine.commit([owned], asynchronous=False)]
        for owned in failed:
            owned.commit_again_at = now + LAST_COMMIT_RETRY_S
        committing = [owned for owned in committing if owned not in failed]
    if committing and engine._locks is not None:
        engine._locks.unlock_batch([owned.lock for owned in committing])
    for owned in done + committing:
        del engine._leaving[owned.lock]
        if engine.metrics is not None:
            engine.metrics.retire(owned.lock, owned.claim.finished())
    if done or committing:
        log.info("%s released %s", engine.name, sorted(owned.lock for owned in done + committing))


def lose(engine: Holder, lost: set[TP]) -> None:
    """Locks the keeper reported lost: their claims stop at once and are never committed."""
    for lock in lost:
        log.warning("%s lost the lock of %s; stops consuming it", engine.name, lock)
        if lock in engine._owned:
            _revoke(engine, engine._owned.pop(lock))
            engine._rebalance_now.set()
        elif lock in engine._leaving:  # lost while draining: stop, and never commit
            owned = engine._leaving[lock]
            owned.revoked = True
            owned.claim.revoke()


def _revoke(engine: Holder, owned: OwnedLock) -> None:
    try:
        _mark_revoked(engine, owned)
    finally:
        _unassign(engine, [owned])


def _mark_revoked(engine: Holder, owned: OwnedLock) -> None:
    owned.revoked = True
    engine._leaving[owned.lock] = owned
    owned.claim.revoke()


def _unassign(engine: Holder, leaving: list[OwnedLock]) -> None:
    """Stop fetching the partitions of ``leaving``: one call to the client for all of them."""
    if not leaving:
        return
    for owned in leaving:
        for tp in owned.partitions:
            engine._by_tp.pop(tp, None)
    engine._ambiguous = shared_numbers(engine._by_tp)
    # librdkafka keeps a pause through unassign and assign: the next claim would never fetch. Only the
    # engine's own flow-control pauses are in ``paused`` (the drop-in's claims report no backlog: a user's
    # pause stays).
    paused = [TopicPartition(*tp) for owned in leaving for tp in owned.paused]
    if paused:
        engine.kafka.resume(paused)
        for owned in leaving:
            owned.paused.clear()
    engine.kafka.incremental_unassign([TopicPartition(*tp) for owned in leaving for tp in owned.partitions])


def release_all(engine: Holder, timeout: float) -> None:
    """Leave every partition gracefully and wait (up to ``timeout`` s) until all are drained and unlocked."""
    release(engine, list(engine._owned))
    deadline = time.monotonic() + timeout
    while engine._leaving and time.monotonic() < deadline:
        engine.step.tick()
        finish_releases(engine)
        time.sleep(0.005)
    if engine._leaving:
        log.warning("%s: %d partition(s) did not drain within %g s; left to expire with their lease",
                    engine.name, len(engine._leaving), timeout)


def progress(engine: Holder) -> dict[TP, tuple[int, int]]:
    """Transition state of every held lock, for its lock entry (keeper thread: reads only)."""
    out = {}
    for lock, owned in [*list(engine._owned.items()), *list(engine._leaving.items())]:
        held = owned.claim.progress()
        if held is not None:
            out[lock] = held
    return out
