"""Retry back-off for the concurrent push consumer: try n waits delay level 3 + n - 1 in the delay topics, and a
message that keeps failing ends in the group's dead-letter topic with where it came from and the last error."""

from __future__ import annotations

import time

import pytest

from rocketkafka import ConsumeStatus, Message, Producer, PushConsumer
from rocketkafka.names import Header
from rocketkafka.testing.reading import read_all
from tests.delay.conftest import FAST, wait_until

pytestmark = pytest.mark.integration


def _consumer(rk_group, rk_settings, topic, listener, **options):
    consumer = PushConsumer(rk_group, {"fetch.wait.max.ms": 10}, settings=rk_settings, **{**FAST, **options})
    consumer.subscribe(topic, listener)
    consumer.start()
    return consumer


def test_failing_twice_then_succeeding_is_seen_three_times_with_the_back_off(rk_settings, rk_topic, rk_group,
                                                                              delay_config, forwarder):
    topic = rk_topic(partitions=1)
    forwarder()
    with Producer("retry", settings=rk_settings) as producer:
        msg = Message(topic, body=b"flaky", tags="T", keys=["order-7"], properties={"app": "retry"})
        producer.send_sync(msg)
    attempts: list[tuple[float, int, str, str | None]] = []

    def flaky(m):
        attempts.append((time.time(), m.reconsume_times, m.topic, m.get_property("app")))
        if len(attempts) == 1:
            raise RuntimeError("first try fails")
        return ConsumeStatus.RECONSUME_LATER if len(attempts) == 2 else ConsumeStatus.CONSUME_SUCCESS

    consumer = _consumer(rk_group, rk_settings, topic, flaky)
    try:
        assert wait_until(lambda: len(attempts) >= 3, 30)
        time.sleep(1.0)  # no fourth try
    finally:
        consumer.shutdown()
    assert [(n, t, app) for _, n, t, app in attempts] == [(0, topic, "retry"), (1, topic, "retry"), (2, topic, "retry")]
    gaps = [attempts[i + 1][0] - attempts[i][0] for i in range(2)]
    level3, level4 = delay_config.level_ms(3) / 1000, delay_config.level_ms(4) / 1000
    print(f"\nretry gaps {gaps[0]:.3f} s (level 3 = {level3} s), {gaps[1]:.3f} s (level 4 = {level4} s)")
    assert level3 <= gaps[0] < level3 + 1.0 and level4 <= gaps[1] < level4 + 1.0
    # the copies waited on the level topics, and reached the retry topic only when due
    level_records = {n: read_all(rk_settings.bootstrap_servers, rk_settings.topics.delay_level(n)) for n in (3, 4)}
    assert [len(level_records[3]), len(level_records[4])] == [1, 1]
    retried = read_all(rk_settings.bootstrap_servers, rk_settings.topics.retry(rk_group))
    assert len(retried) == 2  # delivered by the forwarder: the routing headers are gone, the provenance stays
    assert all(Header.REAL_TOPIC not in dict(r.headers()) and Header.DELIVER_AT in dict(r.headers()) for r in retried)


def test_failing_forever_ends_in_the_dead_letter_topic_after_max_reconsume_times(rk_settings, rk_topic, rk_group,
                                                                                 delay_config, forwarder):
    topic = rk_topic(partitions=2)
    forwarder()
    with Producer("retry", settings=rk_settings) as producer:
        msg = Message(topic, body=b"poison", keys=["p-1"], properties={"app": "retry"})
        sent = producer.send_sync(msg)
    attempts: list[tuple[float, int]] = []

    def always_fails(m):
        attempts.append((time.time(), m.reconsume_times))
        raise ValueError(f"cannot handle {m.id}")

    consumer = _consumer(rk_group, rk_settings, topic, always_fails, max_reconsume_times=3)
    dlq_topic = rk_settings.topics.dead_letter(rk_group)
    try:
        assert wait_until(lambda: read_all(rk_settings.bootstrap_servers, dlq_topic), 30)
        time.sleep(1.0)
    finally:
        consumer.shutdown()
    assert [n for _, n in attempts] == [0, 1, 2, 3]
    gaps = [round(attempts[i + 1][0] - attempts[i][0], 3) for i in range(3)]
    print(f"\nretry gaps {gaps} s; then the dead-letter topic")
    assert [g >= delay_config.level_ms(n) / 1000 for g, n in zip(gaps, (3, 4, 5))] == [True] * 3
    [dead] = read_all(rk_settings.bootstrap_servers, dlq_topic)
    headers = {k: v.decode() for k, v in dead.headers()}
    assert dead.value() == b"poison" and dead.key() == b"p-1" and headers["app"] == "retry"
    assert (headers[Header.ORIGIN_TOPIC], headers[Header.ORIGIN_QUEUE_ID], headers[Header.ORIGIN_OFFSET]) == (
        topic, str(sent.queue_id), str(sent.offset))
    assert headers[Header.ORIGIN_MSG_ID] == headers[Header.MSG_ID] == msg.id
    assert headers[Header.RECONSUME_TIMES] == "3" and f"cannot handle {msg.id}" in headers[Header.LAST_ERROR]
    assert "max reconsume times 3" in headers[Header.DLQ_REASON]
    assert not {Header.REAL_TOPIC, Header.REAL_QUEUE_ID, Header.ORIGIN_TIMESTAMP} & headers.keys()
    assert headers[Header.DELAY_LEVEL] == "5"  # provenance of the last back-off (level 3 + 3 - 1)
