"""The trace topic reads as a Spark table: one row per event of a traced message."""

from __future__ import annotations

import pytest

from rocketkafka import Message, Producer, PushConsumer
from rocketkafka.spark import read_messages, trace_view
from rocketkafka.testing.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("engine")]  # each test on both reader engines

FAST = dict(heartbeat_interval_ms=200, member_timeout_ms=2000, lock_lease_ms=3000, lock_renew_interval_ms=1000,
            lock_client_expiry_ms=2000, rebalance_interval_ms=2000, commit_interval_ms=200,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET")


def test_trace_events_read_as_a_table(spark, rk_settings, rk_topic, rk_group, source):
    topic = rk_topic(partitions=1)
    with Producer("spark-traced", settings=rk_settings, trace=True) as producer:
        msg = Message(topic, body=b"x", tags="T")
        producer.send_sync(msg)
    seen = []
    consumer = PushConsumer(rk_group, settings=rk_settings, trace=True, **FAST)
    consumer.subscribe(topic, seen.append)
    consumer.start()
    try:
        assert wait_for(lambda: seen, 30)
    finally:
        consumer.shutdown()
    events = trace_view(read_messages(spark, source(rk_settings.topics.trace())))
    rows = events.where(events.msg_id == msg.id).orderBy("ts").select(
        "event", "topic", "partition", "offset", "tags", "group", "member", "status", "event_time").collect()
    assert [r.event for r in rows] == ["SENT", "DELIVERED", "CONSUMED"]
    assert (rows[0].topic, rows[0].partition, rows[0].offset, rows[0].tags) == (topic, 0, 0, "T")
    assert (rows[1].group, rows[1].member) == (rk_group, consumer.instance_name)
    assert rows[2].status == "SUCCESS" and rows[2].event_time is not None
