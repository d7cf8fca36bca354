"""Orderly consumption through faults of the cluster and of time: a paused broker, a Redis majority paused,
a handler slower than the lock lease, a consumer whose wall clock jumps, partitions added while consuming.

Each test needs what it declares with ``rk_needs``; a backend that cannot do it (an external cluster
cannot SIGSTOP its broker; Tansu cannot add partitions) skips the test and says why.
"""

from __future__ import annotations

import time

import pytest

from rocketkafka import PushConsumer
from rocketkafka.testing.capabilities import add_partitions
from rocketkafka.testing.clock import CLOCK_FILE_ENV, jump
from rocketkafka.testing.history import History, check
from tests.ordering.conftest import FAST, wait_until
from tests.ordering.fleet import PacedProducer, Runner, all_calls, cleanup, seen_ids, start_all, wait_for

pytestmark = pytest.mark.integration

#: What a lock is given before a stalled owner counts as gone (renewal interval + client expiry).
EXPIRY_S = (FAST["lock_client_expiry_ms"] + FAST["lock_renew_interval_ms"]) / 1000


def _order(i: int) -> str:
    return f"order-{i % 50}"


def _consumers(rk_settings, rk_group, topic, history, names=("c1", "c2"), handler=None, **options):
    consumers = []
    for name in names:
        c = PushConsumer(rk_group, settings=rk_settings, orderly=True, **{**FAST, **options})
        c.subscribe(topic, handler(name) if handler else (lambda m, n=name: _record(history, n, m)))
        c.start()
        consumers.append(c)
    return consumers


def _record(history, name, msg, seconds: float = 0.0005):
    with history.handler_call(name, msg):
        time.sleep(seconds)


def _assert_exact(history: History, ids: list[str]) -> None:
    report = check(history.calls, ids)
    print(report.summary())
    assert report.lost_count == 0, report.lost
    assert report.reorders == [] and report.overlaps == [], (report.reorders, report.overlaps)
    assert report.duplicate_count == 0, "no consumer crashed: nothing may be handled twice"


@pytest.mark.rk_needs("pause-broker")
def test_broker_paused_ten_seconds_then_consumption_goes_on_exactly(rk_backend, rk_settings, rk_topic, rk_group):
    """SIGSTOP of the broker: fetches, commits and sends hang; locks are kept (Redis is fine). After SIGCONT
    every message arrives once, in order, and no handler ran twice (nothing was re-delivered)."""
    topic = rk_topic(partitions=4)
    history = History()
    # Locks outlive a 4 s stall of the keeper thread (FAST allows 1 s, and a CI machine running four workers on
    # two cores once stalled it longer) and still expire well within the 10 s pause: a lock that depended on the
    # broker would be lost.
    consumers = _consumers(rk_settings, rk_group, topic, history, lock_lease_ms=7000, lock_client_expiry_ms=5000)
    try:
        assert wait_until(lambda: [len(c.assignment()) for c in consumers] == [2, 2])
        producer = PacedProducer(rk_settings, topic, 3000, 6.0, _order).start()
        assert wait_until(lambda: len(history.calls) >= 200, timeout=30)
        owned = [c.assignment() for c in consumers]
        rk_backend.pause_broker()
        try:
            time.sleep(10.0)
        finally:
            rk_backend.resume_broker()
        ids = producer.join(timeout=90)
        assert wait_until(lambda: len({c.msg_id for c in history.calls}) >= len(ids), timeout=60)
        assert [c.assignment() for c in consumers] == owned, "a paused broker costs no lock"
        assert sum(c.engine.locks_lost for c in consumers) == 0
    finally:
        for c in consumers:
            c.shutdown()
    _assert_exact(history, ids)


@pytest.mark.rk_needs("pause-redis")
def test_redis_majority_paused_orderly_stops_then_resumes_in_order(rk_backend, rk_settings, rk_topic, rk_group):
    """SIGSTOP of 2 of 3 Redis nodes (they keep their data and connections, and answer nothing): no quorum,
    so every lock is lost within the client expiry and no handler runs; after SIGCONT the partitions are
    taken again and consumption resumes where it stopped, nothing lost, nothing out of order."""
    topic = rk_topic(partitions=4)
    history = History()
    consumers = _consumers(rk_settings, rk_group, topic, history)
    paused: list[int] = []
    try:
        assert wait_until(lambda: [len(c.assignment()) for c in consumers] == [2, 2])
        producer = PacedProducer(rk_settings, topic, 4000, 8.0, _order).start()
        assert wait_until(lambda: len(history.calls) >= 300, timeout=30)
        for index in (0, 1):
            rk_backend.pause_redis(index)
            paused.append(index)
        stopped_at = time.time()
        time.sleep(EXPIRY_S + 2.5)
        quiet_from, quiet_to = stopped_at + EXPIRY_S, time.time()
        for index in list(paused):
            rk_backend.resume_redis(index)
            paused.remove(index)
        resumed_at = time.time()
        ids = producer.join()
        assert wait_until(lambda: len({c.msg_id for c in history.calls}) >= len(ids), timeout=60)
    finally:
        for index in paused:
            rk_backend.resume_redis(index)
        for c in consumers:
            c.shutdown()
    during = [c for c in history.calls if quiet_from <= c.enter <= quiet_to]
    after = [c for c in history.calls if c.enter > resumed_at]
    print(f"calls while the majority was paused (after the expiry): {len(during)}, after: {len(after)}")
    assert during == [], "no quorum, no lock: orderly consumption must stop"
    assert after, "consumption resumes once the quorum is back"
    report = check(history.calls, ids)
    print(report.summary())
    assert report.lost_count == 0, report.lost
    assert report.reorders == [] and report.overlaps == [], (report.reorders, report.overlaps)


def test_a_handler_slower_than_the_lease_keeps_its_partition_alone(rk_settings, rk_topic, rk_group):
    """One handler call takes the lease (3 s) plus a second: the lock is renewed in the background, so the
    partition is never handed to the other consumer meanwhile -- no two handlers of it overlap, nothing
    runs twice, and the partition's later messages wait for the slow one, in order."""
    topic = rk_topic(partitions=2)
    history = History()
    slow_id: list[str] = []
    slow_s = FAST["lock_lease_ms"] / 1000 + 1.0

    def handler(name):
        def handle(msg):
            with history.handler_call(name, msg):
                if not slow_id and msg.queue_offset == 100:
                    slow_id.append(msg.id)
                    time.sleep(slow_s)
        return handle

    consumers = _consumers(rk_settings, rk_group, topic, history, handler=handler)
    try:
        assert wait_until(lambda: [len(c.assignment()) for c in consumers] == [1, 1])
        ids = PacedProducer(rk_settings, topic, 1000, 2.0, _order).start().join()
        assert wait_until(lambda: len({c.msg_id for c in history.calls}) >= len(ids), timeout=60)
        assert sum(c.engine.locks_lost for c in consumers) == 0, "a slow handler must not cost the lock"
    finally:
        for c in consumers:
            c.shutdown()
    assert slow_id, "the slow handler ran"
    slow = next(c for c in history.calls if c.msg_id == slow_id[0])
    assert slow.exit - slow.enter >= slow_s * 0.95
    after = [c for c in history.calls if c.partition == slow.partition and c.offset > slow.offset]
    assert after and min(c.enter for c in after) >= slow.exit, "the partition's next messages waited for it"
    _assert_exact(history, ids)


def test_a_consumer_whose_wall_clock_jumps_keeps_order_and_its_locks(tmp_path, monkeypatch, rk_settings, rk_topic,
                                                                     rk_group):
    """The wall clock of one consumer process jumps an hour ahead, then an hour behind, then back, while it
    consumes beside another. Leases live in Redis (server clock) and each owner measures its own with the
    monotonic clock, so nothing changes: no lock lost, nothing lost, duplicated or out of order."""
    topic = rk_topic(partitions=4)
    clock = tmp_path / "jumper.clock"
    clock.write_text("0\n")
    monkeypatch.setenv(CLOCK_FILE_ENV, str(clock))
    jumper = Runner(tmp_path, "jumper", rk_settings, rk_group, topic, options=FAST, handler_ms=0.2)
    monkeypatch.delenv(CLOCK_FILE_ENV)
    steady = Runner(tmp_path, "steady", rk_settings, rk_group, topic, options=FAST, handler_ms=0.2)
    runners = start_all([jumper, steady])
    try:
        time.sleep(3.0)  # both own their half
        producer = PacedProducer(rk_settings, topic, 4000, 12.0, _order).start()
        for offset in (3600.0, -3600.0, 0.0):
            time.sleep(3.0)
            jump(jumper.proc.pid, clock, offset)
        ids = producer.join()
        assert wait_for(lambda: len(seen_ids(runners)) >= len(ids), timeout=60)
    finally:
        cleanup(runners)
    log = jumper.log.read_text()
    assert "wall clock offset is now +3600 s" in log and "wall clock offset is now -3600 s" in log, log[-2000:]
    assert "lost the lock" not in log, "a jumped wall clock must not cost a lock"
    calls = all_calls(runners)
    assert {c.consumer for c in calls} == {"jumper", "steady"}
    report = check(calls, ids)
    print(report.summary())
    assert report.lost_count == 0 and report.duplicate_count == 0, report.summary()
    assert report.reorders == [] and report.overlaps == [], (report.reorders, report.overlaps)


@pytest.mark.rk_needs("add-partitions")
def test_partitions_added_while_consuming_are_taken_and_consumed(rk_settings, rk_topic, rk_group):
    """A topic grows from 2 to 4 partitions under two orderly consumers: the new partitions are allocated
    (at the next rebalance after the metadata refresh), locked and consumed from their first offset."""
    topic = rk_topic(partitions=2)
    history = History()
    consumers = _consumers(rk_settings, rk_group, topic, history, rebalance_interval_ms=1000)
    try:
        assert wait_until(lambda: sum(len(c.assignment()) for c in consumers) == 2)
        first = PacedProducer(rk_settings, topic, 500, 1.0, _order).start().join()
        add_partitions(rk_settings, topic, 4)
        more = PacedProducer(rk_settings, topic, 1000, 2.0, _order).start().join()
        assert wait_until(lambda: len({c.msg_id for c in history.calls}) >= len(first) + len(more), timeout=90)
        # ownership settles (a partition may be between owners at one instant)
        assert wait_until(lambda: sum(len(c.assignment()) for c in consumers) == 4, timeout=15)
    finally:
        for c in consumers:
            c.shutdown()
    assert {c.partition for c in history.calls} == {0, 1, 2, 3}
    report = check(history.calls, first + more)
    assert report.lost_count == 0 and report.reorders == [] and report.overlaps == [], report.summary()


def test_a_fault_hook_backend_lacks_is_a_skip_with_the_reason_not_an_error(rk_backend):
    """What rk_needs relies on: an unknown capability is refused by name; a known one is either there or
    comes with a reason naming the backend."""
    from rocketkafka.testing.capabilities import Capability, parse_capability

    with pytest.raises(ValueError, match="unknown backend capability 'teleport'.*pause-broker"):
        parse_capability("teleport")
    for capability in Capability:
        reason = rk_backend.missing(capability)
        assert reason is None or rk_backend.name in reason or "broker" in reason, reason
