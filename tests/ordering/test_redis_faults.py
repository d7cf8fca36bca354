"""Orderly consumption when Redis nodes of the lock table fail: one down changes nothing, two down pause it."""

from __future__ import annotations

import time

import pytest

from rocketkafka import PushConsumer
from rocketkafka.testing.history import History, check
from tests.ordering.conftest import FAST, wait_until
from tests.ordering.fleet import PacedProducer

pytestmark = [pytest.mark.integration, pytest.mark.rk_needs("stop-redis")]


def _consumers(rk_settings, rk_group, topic, history, names=("r1", "r2")):
    consumers = []
    for name in names:
        c = PushConsumer(rk_group, settings=rk_settings, orderly=True, **FAST)
        c.subscribe(topic, lambda m, n=name: _record(history, n, m))
        c.start()
        consumers.append(c)
    return consumers


def _record(history, name, msg):
    with history.handler_call(name, msg):
        time.sleep(0.0005)


def _order(i: int) -> str:
    return f"order-{i % 50}"


def test_one_of_three_redis_nodes_down_consumption_continues(rk_backend, rk_settings, rk_topic, rk_group):
    topic = rk_topic(partitions=4)
    history = History()
    consumers = _consumers(rk_settings, rk_group, topic, history)
    try:
        assert wait_until(lambda: [len(c.assignment()) for c in consumers] == [2, 2])
        owned = [c.assignment() for c in consumers]
        rk_backend.stop_redis(2)
        ids = PacedProducer(rk_settings, topic, 3000, 3.0, _order).start().join()
        assert wait_until(lambda: len({c.msg_id for c in history.calls}) >= 3000, timeout=30)
        time.sleep(2 * FAST["lock_renew_interval_ms"] / 1000)
        assert [c.assignment() for c in consumers] == owned, "no lock was lost: 2 of 3 nodes are a quorum"
    finally:
        rk_backend.start_redis(2)
        for c in consumers:
            c.shutdown()
    report = check(history.calls, ids)
    assert report.lost_count == 0 and report.duplicate_count == 0
    assert report.reorders == [] and report.overlaps == []


def test_two_of_three_redis_nodes_down_orderly_pauses_then_resumes(rk_backend, rk_settings, rk_topic, rk_group):
    topic = rk_topic(partitions=4)
    history = History()
    consumers = _consumers(rk_settings, rk_group, topic, history)
    restarted = []
    try:
        assert wait_until(lambda: [len(c.assignment()) for c in consumers] == [2, 2])
        producer = PacedProducer(rk_settings, topic, 4000, 8.0, _order).start()
        assert wait_until(lambda: len(history.calls) >= 300, timeout=30)
        rk_backend.stop_redis(0)
        rk_backend.stop_redis(1)
        down_at = time.time()
        # every lock is lost within the client expiry after its last renewal
        expiry = (FAST["lock_client_expiry_ms"] + FAST["lock_renew_interval_ms"]) / 1000
        time.sleep(expiry + 2.0)
        quiet_from, quiet_to = down_at + expiry, time.time()
        rk_backend.start_redis(0)
        restarted.append(0)
        resumed_at = time.time()
        ids = producer.join()
        assert wait_until(lambda: len({c.msg_id for c in history.calls}) >= len(ids), timeout=60)
    finally:
        for i in (0, 1):
            if i not in restarted:
                rk_backend.start_redis(i)
        for c in consumers:
            c.shutdown()
    during = [c for c in history.calls if quiet_from <= c.enter <= quiet_to]
    after = [c for c in history.calls if c.enter > resumed_at]
    print(f"calls while 2 nodes were down (after the expiry): {len(during)}, after one returned: {len(after)}")
    assert during == [], "no quorum, no lock: orderly consumption must pause"
    assert after, "consumption resumes once a quorum is back"
    report = check(history.calls, ids)
    print(report.summary())
    assert report.lost_count == 0, report.lost
    assert report.reorders == [] and report.overlaps == [], (report.reorders, report.overlaps)


def test_locks_lost_with_the_quorum_are_taken_back_at_once_not_at_the_safety_rebalance(
        rk_backend, rk_settings, rk_topic, rk_group):
    """A consumer that lost its locks (quorum gone, or a stall past the lease) asks again as soon as the lost
    claims drained: the safety rebalance (here 60 s, RocketMQ's default 20 s) is not what brings them back."""
    topic = rk_topic(partitions=2)
    consumer = PushConsumer(rk_group, settings=rk_settings, orderly=True, **{**FAST, "rebalance_interval_ms": 60_000})
    consumer.subscribe(topic, lambda m: None)
    consumer.start()
    restarted = []
    try:
        assert wait_until(lambda: len(consumer.assignment()) == 2)
        rk_backend.stop_redis(0)
        rk_backend.stop_redis(1)
        expiry = (FAST["lock_client_expiry_ms"] + FAST["lock_renew_interval_ms"]) / 1000
        assert wait_until(lambda: consumer.assignment() == set(), timeout=expiry + 5), "no quorum: locks are lost"
        rk_backend.start_redis(0)
        restarted.append(0)
        back = time.monotonic()
        assert wait_until(lambda: len(consumer.assignment()) == 2, timeout=20)
        took = time.monotonic() - back
        print(f"partitions taken back {took:.1f} s after the quorum returned")
        assert took < 10, f"took {took:.1f} s: lost locks waited for the safety rebalance"
    finally:
        for i in (0, 1):
            if i not in restarted:
                rk_backend.start_redis(i)
        consumer.shutdown()
