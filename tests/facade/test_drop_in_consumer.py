"""The Kafka-style drop-in consumer: confluent-kafka calls, our ownership, no loss or duplicates on leave."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from rocketkafka.message import MessageExt
from rocketkafka.errors import ConfigError
from rocketkafka.kafka import Consumer
from rocketkafka.testing.reading import committed_offsets, committed_to_end
from tests.ordering.conftest import FAST, wait_until

pytestmark = pytest.mark.integration


def _config(settings, group, **extra):
    return {"bootstrap.servers": settings.bootstrap_servers, "group.id": group,
            "rocketkafka.redis.urls": ",".join(settings.redis_urls), "rocketkafka.topic.prefix": settings.topic_prefix,
            "auto.offset.reset": "earliest", **extra}


def _drain(consumer, counter, until, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not until() and time.monotonic() < deadline:
        for m in consumer.consume(100, 0.1):
            counter[MessageExt.of(m).decode().id] += 1


def test_poll_returns_confluent_messages_filtered_by_tag_and_commits(rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=2)
    ids = produce(topic, 60, tags=lambda i: "A" if i % 2 else "B")
    c = Consumer(_config(rk_settings, rk_group), **FAST)
    c.subscribe([topic], tags="A")
    seen = Counter()
    try:
        _drain(c, seen, lambda: len(seen) >= 30)
        # an application keeps polling: filtered-out records at the partitions' ends are consumed (and commit) too
        assert wait_until(lambda: c.poll(0.05) is None and committed_to_end(rk_settings.bootstrap_servers, rk_group, topic))
    finally:
        c.close()
    assert set(seen) == {i for n, i in enumerate(ids) if n % 2} and max(seen.values()) == 1


def test_two_drop_in_consumers_split_then_one_leaves_without_duplicates(rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=4)
    ids = produce(topic, 400)
    a = Consumer(_config(rk_settings, rk_group), **FAST)
    b = Consumer(_config(rk_settings, rk_group), **FAST)
    a.subscribe([topic])
    b.subscribe([topic])
    seen = Counter()
    try:
        deadline = time.monotonic() + 30
        while len(seen) < 200 and time.monotonic() < deadline:
            for c in (a, b):
                for m in c.consume(20, 0.05):
                    seen[MessageExt.of(m).decode().id] += 1
        a.close()
        more = produce(topic, 200)
        _drain(b, seen, lambda: set(ids + more) <= set(seen))
        time.sleep(0.5)
        _drain(b, seen, lambda: False, timeout=0.5)
        assert len(b.assignment()) == 4
    finally:
        b.close()
    assert set(seen) == set(ids + more)
    assert max(seen.values()) == 1, [k for k, v in seen.items() if v > 1][:5]


def test_manual_commit_controls_what_is_redelivered(rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=1)
    produce(topic, 10)
    c = Consumer(_config(rk_settings, rk_group, **{"enable.auto.commit": False}), **FAST)
    c.subscribe([topic])
    got = []
    try:
        deadline = time.monotonic() + 20
        while len(got) < 10 and time.monotonic() < deadline:
            got.extend(c.consume(10, 0.2))
        c.commit(got[3], asynchronous=False)  # handled: offsets 0..3
    finally:
        c.close()
    assert committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 1)[0] == 4
    with pytest.raises(ConfigError, match="group.id"):
        Consumer({"bootstrap.servers": rk_settings.bootstrap_servers})
