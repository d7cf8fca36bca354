"""Opt-in consumer metrics against a real broker and 3 Redis nodes: lag, locks, retries and dead letters."""

from __future__ import annotations

import threading
import time

import pytest

from rocketkafka import PushConsumer
from rocketkafka.errors import ConfigError
from rocketkafka.ordering.locks import LockSettings, LockTable
from tests.conftest import per_partition, scrape
from tests.ordering.conftest import FAST, wait_until

pytestmark = pytest.mark.integration


def test_lag_counts_unhandled_records_and_drops_to_zero_once_consumed(rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=2)
    # keyed over both partitions: un-keyed, librdkafka's sticky partitioner may leave one empty (never fetched)
    produce(topic, 300, key_of=lambda i: f"k{i % 8}")
    gate = threading.Event()
    consumer = PushConsumer(rk_group, settings=rk_settings, metrics_port=0, **FAST)
    consumer.subscribe(topic, lambda m: gate.wait(30))
    consumer.start()
    try:
        port = consumer.metrics.port
        # handlers are blocked: every record fetched is lag, and in flight
        assert wait_until(lambda: sum(per_partition(scrape(port), "rocketkafka_consumer_lag", rk_group).values()) == 300, 20)
        samples = scrape(port)
        assert sorted(per_partition(samples, "rocketkafka_consumer_lag", rk_group)) == [0, 1]
        assert sum(per_partition(samples, "rocketkafka_consumer_inflight", rk_group).values()) > 0
        gate.set()
        assert wait_until(lambda: per_partition(scrape(port), "rocketkafka_consumer_lag", rk_group) == {0: 0, 1: 0}, 20)
        assert wait_until(lambda: sum(per_partition(scrape(port), "rocketkafka_consumer_consumed_total",
                                                    rk_group).values()) == 300, 10)
        assert sum(per_partition(scrape(port), "rocketkafka_consumer_inflight", rk_group).values()) == 0
    finally:
        gate.set()
        consumer.shutdown()
    # the totals outlive the partitions' ownership
    consumed = consumer.metrics.registry.get_sample_value
    assert sum(consumed("rocketkafka_consumer_consumed_total", {"group": rk_group, "topic": topic, "partition": str(p)})
               for p in (0, 1)) == 300


def test_lock_owned_shows_each_members_partitions_in_orderly_mode(rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=4)
    produce(topic, 40)
    a = PushConsumer(rk_group, settings=rk_settings, orderly=True, metrics=True, **FAST)
    b = PushConsumer(rk_group, settings=rk_settings, orderly=True, metrics=True, **FAST)
    for c in (a, b):
        c.subscribe(topic, lambda m: None)
    a.start()
    try:
        def owned(c: PushConsumer) -> dict[int, float]:
            return {p: c.metrics.registry.get_sample_value(
                "rocketkafka_consumer_lock_owned", {"group": rk_group, "topic": topic, "partition": str(p)})
                for p in range(4)}

        assert wait_until(lambda: owned(a) == {0: 1, 1: 1, 2: 1, 3: 1}, 20)
        b.start()  # two consumers in one process: separate registries, no clash
        assert wait_until(lambda: len(a.assignment()) == len(b.assignment()) == 2, 20)

        def mine(c: PushConsumer) -> set[int]:
            return {p for p, v in owned(c).items() if v == 1}

        # each member shows exactly the partitions it owns (a's released ones disappear from its series)
        assert wait_until(lambda: all(mine(c) == {p for _, p in c.assignment()} for c in (a, b)), 10)
        assert sorted(mine(a) | mine(b)) == [0, 1, 2, 3] and not mine(a) & mine(b)
        for c in (a, b):
            assert c.metrics.registry.get_sample_value("rocketkafka_consumer_lock_renew_failures_total",
                                                       {"group": rk_group}) == 0
    finally:
        b.shutdown()
        a.shutdown()


def test_retried_and_dead_lettered_count_a_message_failing_max_reconsume_times(rk_settings, rk_topic, rk_group,
                                                                               produce):
    topic = rk_topic(partitions=1)
    [bad] = produce(topic, 1)
    produce(topic, 9)
    tries = []

    def handle(msg):
        if msg.id == bad:
            tries.append(msg.reconsume_times)
            raise RuntimeError("always fails")

    consumer = PushConsumer(rk_group, settings=rk_settings, metrics=True, max_reconsume_times=2, retry_backoff=False,
                            **FAST)
    consumer.subscribe(topic, handle)
    consumer.start()
    value = consumer.metrics.registry.get_sample_value
    try:
        assert wait_until(lambda: value("rocketkafka_consumer_dead_lettered_total", {"group": rk_group, "topic": topic}), 30)
        time.sleep(0.5)  # nothing more may come
    finally:
        consumer.shutdown()
    assert tries == [0, 1, 2]
    assert value("rocketkafka_consumer_retried_total", {"group": rk_group, "topic": topic}) == 2
    assert value("rocketkafka_consumer_dead_lettered_total", {"group": rk_group, "topic": topic}) == 1


def test_metrics_are_off_unless_asked_for(rk_settings, rk_group):
    consumer = PushConsumer(rk_group, settings=rk_settings, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    assert consumer.metrics is None
    with pytest.raises(ConfigError):
        consumer.serve_metrics(0)


def test_lock_table_counts_locks_lost_to_a_late_renewal(rk_settings, rk_group):
    settings = LockSettings(lease_ms=1000, renew_interval_ms=200, client_expiry_ms=600, socket_timeout_ms=50)
    with LockTable(rk_settings.redis_urls, rk_group, "me", rk_settings.keys, settings) as table:
        assert set(table.lock_batch([("t", 0), ("t", 1)])) == {("t", 0), ("t", 1)}
        assert table.renew_batch() == set() and table.lost_total == 0
        time.sleep(0.7)  # past the client expiry: the next renewal finds both lost
        assert table.renew_batch() == {("t", 0), ("t", 1)}
        assert table.lost_total == 2
