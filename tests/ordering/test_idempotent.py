"""The idempotent-consume helper: a re-delivered message reaches the listener once."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, TopicPartition

from rocketkafka import ConfigError, IdempotentConsumer, PushConsumer
from rocketkafka.ordering.consumers.idempotent import MarkState
from tests.ordering.conftest import FAST, wait_until

pytestmark = pytest.mark.integration


def _rewind(settings, group: str, topic: str, partitions: int) -> None:
    """Commit offset 0 for the group: the next owner re-delivers everything (a crash, staged)."""
    c = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, 0) for p in range(partitions)], asynchronous=False)
    finally:
        c.close()


def _run(settings, group, topic, listener, orderly, until):
    """Consume with the helper around ``listener`` until ``until(helper)``; returns the helper."""
    consumer = PushConsumer(group, settings=settings, orderly=orderly, **FAST)
    helper = IdempotentConsumer(consumer, listener)
    consumer.subscribe(topic, helper)
    consumer.start()
    try:
        assert wait_until(lambda: until(helper), timeout=30)
        time.sleep(0.5)
    finally:
        consumer.shutdown()
    return helper


@pytest.mark.parametrize("orderly", [True, False], ids=["orderly", "concurrent"])
def test_redelivered_messages_reach_the_listener_once(rk_settings, rk_topic, rk_group, produce, orderly):
    topic = rk_topic(partitions=2)
    ids = produce(topic, 200)
    runs = Counter()
    first = _run(rk_settings, rk_group, topic, lambda m: runs.update([m.id]), orderly, lambda h: len(runs) == 200)
    assert first.state(ids[0]) is MarkState.CONSUMED
    _rewind(rk_settings, rk_group, topic, 2)
    second = _run(rk_settings, rk_group, topic, lambda m: runs.update([m.id]), orderly, lambda h: h.skipped == 200)
    assert set(runs) == set(ids) and max(runs.values()) == 1
    assert second.skipped == 200


def test_a_crashed_handlers_mark_expires_then_the_message_runs(rk_settings, rk_topic, rk_group, produce, rk_redis):
    topic = rk_topic(partitions=1)
    ids = produce(topic, 5)
    ttl_ms = 1500
    for client in rk_redis:  # a handler of ids[2] marked it on every node, then died
        client.set(rk_settings.keys.consumed(rk_group, ids[2]), "consuming:dead", px=ttl_ms)
    marked_at = time.monotonic()
    runs = []
    consumer = PushConsumer(rk_group, settings=rk_settings, orderly=True, **FAST)
    consumer.subscribe(topic, IdempotentConsumer(consumer, lambda m: runs.append((m.id, time.monotonic()))))
    consumer.start()
    try:
        assert wait_until(lambda: len(runs) == 5, timeout=30)
    finally:
        consumer.shutdown()
    assert [i for i, _ in runs] == ids, "the partition waited for the marked message, in order"
    assert runs[2][1] - marked_at >= ttl_ms / 1000 * 0.9, "re-run only after the consuming mark expired"


@pytest.mark.rk_needs("stop-redis")
def test_marks_survive_one_node_losing_its_data(rk_backend, rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=2)
    ids = produce(topic, 100)
    runs = Counter()
    _run(rk_settings, rk_group, topic, lambda m: runs.update([m.id]), True, lambda h: len(runs) == 100)
    rk_backend.stop_redis(0)
    rk_backend.start_redis(0)  # empty: the marks live on a quorum of the other two
    _rewind(rk_settings, rk_group, topic, 2)
    helper = _run(rk_settings, rk_group, topic, lambda m: runs.update([m.id]), True,
                  lambda h: h.skipped + sum(runs.values()) >= 200)
    assert sum(runs.values()) == 100 and set(runs) == set(ids)
    assert helper.skipped == 100


def test_ttls_are_checked_at_construction(rk_settings, rk_group):
    consumer = PushConsumer(rk_group, settings=rk_settings, orderly=True, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    with pytest.raises(ConfigError, match="consuming_ttl_ms"):
        IdempotentConsumer(consumer, print, consuming_ttl_ms=0)
    with pytest.raises(TypeError):
        IdempotentConsumer(consumer, "not callable")
