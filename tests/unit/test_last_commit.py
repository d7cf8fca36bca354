"""A leaving lock is unlocked only after its last commit landed: the next owner starts after what was handled.

CI on Apache Kafka: a commit refused while the group coordinator moved (NOT_COORDINATOR) was logged
as "retrying", yet the lock was given back at once; the next owner re-read 128 handled messages.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, TopicPartition

from rocketkafka.ordering.engine import holdings
from rocketkafka.ordering.engine.commits import commit_offsets, forget
from rocketkafka.ordering.engine.owned import OwnedLock

TP0 = ("t", 0)


class DrainedClaim:
    def __init__(self, position: int) -> None:
        self.position = position

    def drained(self) -> bool:
        return True

    def positions(self):
        return {TP0: self.position}

    def finished(self) -> int:
        return 0


class Locks:
    def __init__(self) -> None:
        self.unlocked: list = []

    def unlock_batch(self, locks) -> None:
        self.unlocked.extend(locks)

    def is_held(self, lock) -> bool:
        return True


class Engine(SimpleNamespace):
    """The engine as finish_releases sees it; its commit fails ``refusals`` times, then lands."""

    def commit(self, owned, asynchronous):
        assert not asynchronous
        self.tries += 1
        return self.tries > self.refusals


def leaving_engine(refusals: int) -> tuple[Engine, OwnedLock]:
    owned = OwnedLock(TP0, DrainedClaim(42), (TP0,), 7, leaving=True)  # type: ignore[arg-type]
    engine = Engine(name="e", _leaving={TP0: owned}, _locks=Locks(), _resets=None, metrics=None,
                    _rebalance_now=threading.Event(), tries=0, refusals=refusals)
    return engine, owned


def test_a_refused_last_commit_keeps_the_lock_until_it_lands():
    engine, owned = leaving_engine(refusals=1)
    holdings.finish_releases(engine)  # type: ignore[arg-type]
    assert engine._leaving == {TP0: owned} and engine._locks.unlocked == []
    holdings.finish_releases(engine)  # type: ignore[arg-type]
    assert engine.tries == 1, "tried again only after a pause"
    owned.commit_again_at = 0.0
    holdings.finish_releases(engine)  # type: ignore[arg-type]
    assert engine.tries == 2 and engine._leaving == {} and engine._locks.unlocked == [TP0]


def test_a_lock_lost_while_its_last_commit_is_refused_is_forgotten_without_commit_or_unlock():
    engine, owned = leaving_engine(refusals=5)
    holdings.finish_releases(engine)  # type: ignore[arg-type]
    owned.revoked = True  # the lease ran out meanwhile: the next owner decides
    holdings.finish_releases(engine)  # type: ignore[arg-type]
    assert engine.tries == 1 and engine._leaving == {} and engine._locks.unlocked == []


def test_a_failed_commit_of_a_leaving_lock_is_forgotten_so_its_last_commit_sends_it_again():
    owned = OwnedLock(TP0, DrainedClaim(42), (TP0,), 7, committed={TP0: 42}, leaving=True)  # type: ignore[arg-type]
    forget([owned], [TopicPartition("t", 0, 42)])
    assert owned.committed == {}


class Kafka:
    def __init__(self, answer) -> None:
        self.answer = answer

    def commit(self, offsets, asynchronous):
        return self.answer


def test_a_synchronous_commit_returns_the_partitions_it_was_refused_for():
    landed = SimpleNamespace(topic="t", partition=0, offset=3, error=None)
    refused = SimpleNamespace(topic="t", partition=1, offset=5, error=KafkaError(KafkaError.NOT_COORDINATOR))
    offsets = [TopicPartition("t", 0, 3), TopicPartition("t", 1, 5)]
    assert commit_offsets(Kafka([landed, refused]), offsets, asynchronous=False) == [refused]
    assert commit_offsets(Kafka(None), offsets, asynchronous=True) == []  # its answer goes to on_commit


class PerLockEngine(Engine):
    """Commits of several locks at once are refused; one lock at a time, ``refusing`` is refused."""

    def commit(self, owned, asynchronous):
        self.calls.append(sorted(o.lock for o in owned))
        return len(owned) == 1 and owned[0].lock not in self.refusing


def test_drained_locks_leave_in_one_commit_and_one_unlock_round_and_a_refused_batch_is_tried_lock_by_lock():
    tps = [("t", p) for p in range(3)]
    leaving = {tp: OwnedLock(tp, DrainedClaim(42), (tp,), 7, leaving=True) for tp in tps}  # type: ignore[arg-type]
    engine = Engine(name="e", _leaving=dict(leaving), _locks=Locks(), _resets=None, metrics=None,
                    _rebalance_now=threading.Event(), tries=0, refusals=0)
    holdings.finish_releases(engine)  # type: ignore[arg-type]
    assert engine.tries == 1 and engine._locks.unlocked == tps and engine._leaving == {}  # one of each for all three

    engine = PerLockEngine(name="e", _leaving=dict(leaving), _locks=Locks(), _resets=None, metrics=None,
                           _rebalance_now=threading.Event(), calls=[], refusing={("t", 1)})
    holdings.finish_releases(engine)  # type: ignore[arg-type]
    assert engine.calls == [tps, [tps[0]], [tps[1]], [tps[2]]]
    assert engine._locks.unlocked == [tps[0], tps[2]] and list(engine._leaving) == [tps[1]]  # kept until it lands


class LeavingClaim(DrainedClaim):
    """A claim whose leave() raises for one lock, as a drop-in's on_revoke may."""

    def __init__(self, raises: bool) -> None:
        super().__init__(42)
        self.raises = raises

    def leave(self) -> None:
        if self.raises:
            raise RuntimeError("on_revoke failed")


class Client:
    def __init__(self) -> None:
        self.unassigned: list = []

    def incremental_unassign(self, tps) -> None:
        self.unassigned += [(tp.topic, tp.partition) for tp in tps]

    def resume(self, tps) -> None:
        pass


def test_a_release_that_fails_part_way_unassigns_what_it_began_and_keeps_the_rest_owned():
    tps = [("t", p) for p in range(3)]
    owned = {tp: OwnedLock(tp, LeavingClaim(raises=tp == tps[1]), (tp,), 7) for tp in tps}  # type: ignore[arg-type]
    engine = Engine(name="e", _owned=dict(owned), _leaving={}, _by_tp=dict(owned), _ambiguous=set(),
                    _locks=Locks(), kafka=Client())
    with pytest.raises(RuntimeError, match="on_revoke failed"):
        holdings.release(engine, tps)  # type: ignore[arg-type]
    # the first two are leaving and no longer fetched (never unlocked while fetched); the third is still owned
    assert list(engine._leaving) == tps[:2] and engine.kafka.unassigned == tps[:2]
    assert list(engine._owned) == [tps[2]] and list(engine._by_tp) == [tps[2]]
