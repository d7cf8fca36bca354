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
    starts = {tp: committed[tp] if committed[tp] >= 0 else engine.step.initial_offset(tp, engine.kafka)
              for tp in every}
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


def _validity(locks: LockTable | None, lock: TP) -> Callable[[], float]:
    if locks is None:
        return lambda: float("inf")
    return lambda: locks.valid_until(lock)


def _seek(engine: Holder, tp: TP, offset: int) -> None:
    engine.kafka.seek(TopicPartition(*tp, offset))
    owned = engine._by_tp.get(tp)
    if owned is not None:
        owned.fetch_from[tp] = offset


def release(engine: Holder, lock: TP) -> None:
    """Stop fetching ``lock``'s partitions; commit and unlock once it drained (:func:`finish_releases`)."""
    owned = engine._owned.pop(lock)
    if engine._locks is not None and not engine._locks.is_held(lock):
        _revoke(engine, owned)  # expired while we stalled: the next owner may have moved on
        return
    owned.leaving = True
    owned.claim.leave()
    _unassign(engine, owned)
    engine._leaving[lock] = owned


def finish_releases(engine: Holder) -> None:
    """Commit and unlock every leaving lock whose claim drained (a revoked one: neither), and forget it."""
    for lock, owned in list(engine._leaving.items()):
        if not owned.claim.drained():
            continue
        if owned.reset_to is not None and not owned.revoked:
            assert engine._resets is not None
            if commit_reset(engine.kafka, owned, engine._resets, engine._locks, engine.name):
                engine._rebalance_now.set()  # take it back now, from the new committed offset
        elif not owned.revoked:
            if time.monotonic() < owned.commit_again_at:
                continue
            if not engine.commit([owned], asynchronous=False):
                # unlocked now, the next owner would start before what was handled here: the lock stays
                # held (and renewed) until the commit lands, or is lost (then nothing is committed)
                owned.commit_again_at = time.monotonic() + LAST_COMMIT_RETRY_S
                continue
            if engine._locks is not None:
                engine._locks.unlock_batch([lock])
        del engine._leaving[lock]
        if owned.revoked:  # lost, not given away: ask for it again now, not at the next safety rebalance
            engine._rebalance_now.set()
        if engine.metrics is not None:
            engine.metrics.retire(lock, owned.claim.finished())
        log.info("%s released %s", engine.name, lock)


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
    owned.revoked = True
    owned.claim.revoke()
    _unassign(engine, owned)
    engine._leaving[owned.lock] = owned


def _unassign(engine: Holder, owned: OwnedLock) -> None:
    for tp in owned.partitions:
        engine._by_tp.pop(tp, None)
    engine._ambiguous = shared_numbers(engine._by_tp)
    # librdkafka keeps a pause through unassign and assign: the next claim would never fetch. Only the
    # engine's own flow-control pauses are in ``paused`` (the drop-in's claims report no backlog: a user's
    # pause stays).
    if owned.paused:
        engine.kafka.resume([TopicPartition(*tp) for tp in owned.paused])
        owned.paused.clear()
    engine.kafka.incremental_unassign([TopicPartition(*tp) for tp in owned.partitions])


def release_all(engine: Holder, timeout: float) -> None:
    """Leave every partition gracefully and wait (up to ``timeout`` s) until all are drained and unlocked."""
    for lock in list(engine._owned):
        release(engine, lock)
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
