"""RocketMQ's start point for a new group: CONSUME_FROM_LAST_OFFSET (what was sent before the group is not read)."""

from __future__ import annotations

import time

import pytest

from rocketkafka import ConsumeFromWhere, ConsumerOptions, Message, Producer, PushConsumer
from rocketkafka.testing.waiting import wait_for

pytestmark = pytest.mark.integration

TIMINGS = dict(heartbeat_interval_ms=200, member_timeout_ms=2000, rebalance_interval_ms=2000, commit_interval_ms=200)


def test_default_start_point_is_rocketmqs():
    assert ConsumerOptions().consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrent", "orderly"])
def test_a_new_group_skips_what_was_sent_before_it(rk_settings, rk_topic, rk_group, orderly):
    topic = rk_topic(partitions=2)
    got: list[bytes] = []
    with Producer("pg", settings=rk_settings) as producer:
        for i in range(4):
            producer.send_sync(Message(topic, body=f"old-{i}".encode()), selector=lambda n, m, a: a, arg=i % 2)
        consumer = PushConsumer(rk_group, settings=rk_settings, orderly=orderly, **TIMINGS)
        consumer.subscribe(topic, lambda m: got.append(m.body))
        consumer.start()
        try:
            assert wait_for(lambda: len([tp for tp in consumer._engine.owned() if tp[0] == topic]) == 2, 30)
            time.sleep(0.5)  # start points resolved when the partitions were taken
            for part in range(2):
                producer.send_sync(Message(topic, body=f"new-{part}".encode()), selector=lambda n, m, a: a, arg=part)
            assert wait_for(lambda: len(got) >= 2, 20)
            time.sleep(0.3)
        finally:
            consumer.shutdown()
    assert sorted(got) == [b"new-0", b"new-1"]
