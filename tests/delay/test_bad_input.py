"""Bad delays raise DelayError at the call, through both doors, and nothing is written anywhere;
malformed records on the delay and retry topics go to a dead-letter topic with the reason, and the
forwarder and consumer keep going."""

from __future__ import annotations

import math
import time
from datetime import datetime, timedelta, timezone

import pytest
from confluent_kafka import Producer as RawProducer

from rocketkafka.schedule.tiers import Tiers
from rocketkafka import ConsumeStatus, DelayError, Message, MessageError, Producer, PushConsumer
from rocketkafka.admin import TopicAdmin
from rocketkafka.kafka import Producer as KafkaProducer
from rocketkafka.names import Header
from rocketkafka.testing.reading import read_all
from tests.delay.conftest import FAST, wait_until

pytestmark = pytest.mark.integration

BAD = [
    (dict(delay_time_level=6), "unknown delay level 6"),
    (dict(delay_time_level=99), "unknown delay level 99"),
    (dict(delay=-1), "must not be negative"),
    (dict(delay=timedelta(seconds=-0.5)), "must not be negative"),
    (dict(delay=timedelta(days=91)), "over the maximum"),
    (dict(delay=math.inf), "finite"),
    (dict(delay="5s"), "timedelta or seconds"),
    (dict(deliver_at=datetime.now(timezone.utc) + timedelta(days=365)), "over the maximum"),
    (dict(deliver_at=datetime(2030, 1, 1)), "timezone-aware"),
    (dict(deliver_at="tomorrow"), "datetime or epoch seconds"),
    (dict(delay_time_level=2, delay=1.0), "only one of"),
    (dict(delay=1.0, deliver_at=time.time() + 5), "only one of"),
]


def test_bad_delays_raise_at_send_and_write_nothing(rk_settings, rk_topic, delay_config):
    topic = rk_topic(partitions=2)
    drop_in = KafkaProducer({"bootstrap.servers": rk_settings.bootstrap_servers,
                             "rocketkafka.topic.prefix": rk_settings.topic_prefix,
                             "rocketkafka.delay.levels": rk_settings.delay.describe()})
    with Producer("bad", settings=rk_settings) as producer:
        for kwargs, message in BAD:
            for send in (producer.send_sync, lambda m: producer.send_async(m, lambda r: None), producer.send_oneway):
                with pytest.raises(DelayError, match=message):
                    send(Message(topic, body=b"x", **kwargs))
            with pytest.raises(DelayError, match=message):
                drop_in.produce(topic, b"x", key="k", delay_level=kwargs.get("delay_time_level", 0),
                                delay=kwargs.get("delay"), deliver_at=kwargs.get("deliver_at"))
    assert drop_in.flush(10) == 0
    assert read_all(rk_settings.bootstrap_servers, topic) == []
    admin = TopicAdmin(rk_settings)
    for delay_topic in Tiers(rk_settings.topics, delay_config).topics():
        assert not admin.exists(delay_topic) or read_all(rk_settings.bootstrap_servers, delay_topic) == []


def test_negative_level_and_partition_errors_are_message_errors(rk_settings, rk_topic, delay_config):
    topic = rk_topic(partitions=2)
    with Producer("bad", settings=rk_settings) as producer:
        with pytest.raises(MessageError, match="delay_time_level"):
            producer.send_sync(Message(topic, body=b"x", delay_time_level=-1))
    drop_in = KafkaProducer({"bootstrap.servers": rk_settings.bootstrap_servers})
    with pytest.raises(MessageError, match="partition 5 does not exist"):
        drop_in.produce(topic, b"x", partition=5, delay_level=1)
    assert read_all(rk_settings.bootstrap_servers, topic) == []


def test_zero_delay_and_past_deliver_at_are_sent_at_once(rk_settings, rk_topic, delay_config):
    topic = rk_topic(partitions=2)
    with Producer("now", settings=rk_settings) as producer:
        results = [producer.send_sync(Message(topic, body=b"a", delay=0)),
                   producer.send_sync(Message(topic, body=b"b", deliver_at=time.time() - 60)),
                   producer.send_sync(Message(topic, body=b"c", delay_time_level=0))]
    assert {r.topic for r in results} == {topic}
    assert {Header.DELIVER_AT} & {k for r in read_all(rk_settings.bootstrap_servers, topic) for k, _ in r.headers()} == set()


def test_drop_in_delayed_produce_keeps_the_given_partition(rk_settings, rk_topic, delay_config, forwarder, receiver):
    topic = rk_topic(partitions=4)
    forwarder()
    seen = receiver({topic: 4})
    drop_in = KafkaProducer({"bootstrap.servers": rk_settings.bootstrap_servers,
                             "rocketkafka.topic.prefix": rk_settings.topic_prefix,
                             "rocketkafka.delay.levels": rk_settings.delay.describe()})
    for partition in range(4):
        for i in range(5):
            drop_in.produce(topic, f"{partition}-{i}".encode(), key=b"same-key", partition=partition, delay=0.2)
    drop_in.flush(10)
    assert wait_until(lambda: len(seen.arrivals) >= 20, 30)
    for a in seen.arrivals:
        assert a.record.partition() == int(a.record.value().split(b"-")[0]) and a.record.key() == b"same-key"


def test_malformed_delay_records_are_dead_lettered_and_the_forwarder_keeps_going(rk_settings, rk_topic, delay_config,
                                                                                  forwarder, receiver):
    topic = rk_topic(partitions=2)
    fwd = forwarder()
    seen = receiver({topic: 2})
    level1 = rk_settings.topics.delay_level(1)
    past = str(int(time.time() * 1000) - 10).encode()
    good = [(Header.REAL_TOPIC, topic.encode()), (Header.REAL_QUEUE_ID, b"0")]
    garbage = {
        "no headers": [],
        "missing DELIVER_AT": good,
        "garbled DELIVER_AT": [(Header.DELIVER_AT, b"soon"), *good],
        "unknown real topic": [(Header.DELIVER_AT, past), (Header.REAL_TOPIC, b"no-such-topic-xyz"),
                               (Header.REAL_QUEUE_ID, b"0")],
        "no such partition": [(Header.DELIVER_AT, past), (Header.REAL_TOPIC, topic.encode()),
                              (Header.REAL_QUEUE_ID, b"7")],
        "not UTF-8": [(Header.DELIVER_AT, past), (Header.REAL_TOPIC, b"\xff\xfe"), (Header.REAL_QUEUE_ID, b"0")],
    }
    raw = RawProducer({"bootstrap.servers": rk_settings.bootstrap_servers})
    for name, headers in garbage.items():
        raw.produce(level1, name.encode(), partition=0, headers=headers)
    raw.flush(10)
    with Producer("after", settings=rk_settings) as producer:  # a good one behind the garbage, same partition
        after = Message(topic, body=b"still delivered", delay_time_level=1)
        producer.send_sync(after, selector=lambda n, m, a: 0)
    assert seen.wait_for({after.id}, 30)
    dlq = fwd.dead_letter_topic
    assert wait_until(lambda: len(read_all(rk_settings.bootstrap_servers, dlq)) >= len(garbage), 30)
    dead = {r.value().decode(): dict(r.headers())[Header.DLQ_REASON].decode() for r in
            read_all(rk_settings.bootstrap_servers, dlq)}
    print("\n" + "\n".join(f"  {k}: {v}" for k, v in dead.items()))
    assert set(dead) == set(garbage)
    assert "missing header" in dead["no headers"] and "missing header" in dead["missing DELIVER_AT"]
    assert "garbled" in dead["garbled DELIVER_AT"] and "unknown real topic" in dead["unknown real topic"]
    assert "does not exist" in dead["no such partition"] and "garbled" in dead["not UTF-8"]
    assert not TopicAdmin(rk_settings).exists("no-such-topic-xyz"), "the forwarder must never auto-create a topic"
    assert fwd.metrics.summary()["dead_lettered"] == len(garbage)


def test_malformed_records_on_a_retry_topic_are_dead_lettered(rk_settings, rk_topic, rk_group, delay_config):
    topic = rk_topic(partitions=1)
    seen = []
    consumer = PushConsumer(rk_group, settings=rk_settings, **FAST)
    consumer.subscribe(topic, lambda m: seen.append(m.id) or ConsumeStatus.CONSUME_SUCCESS)
    consumer.start()
    try:
        raw = RawProducer({"bootstrap.servers": rk_settings.bootstrap_servers})
        retry = rk_settings.topics.retry(rk_group)
        raw.produce(retry, b"orphan", headers=[])  # a retry copy without its origin
        raw.produce(retry, b"foreign", headers=[(Header.ORIGIN_TOPIC, b"not-subscribed")])
        raw.produce(retry, b"garbled", headers=[(Header.ORIGIN_TOPIC, topic.encode()), (Header.RECONSUME_TIMES, b"x")])
        raw.flush(10)
        with Producer("after", settings=rk_settings) as producer:
            ok = producer.send_sync(Message(topic, body=b"fine"))
        dlq = rk_settings.topics.dead_letter(rk_group)
        assert wait_until(lambda: len(read_all(rk_settings.bootstrap_servers, dlq)) >= 3 and ok.msg_id in seen, 30)
    finally:
        consumer.shutdown()
    reasons = {r.value(): dict(r.headers())[Header.DLQ_REASON].decode() for r in read_all(rk_settings.bootstrap_servers, dlq)}
    assert set(reasons) == {b"orphan", b"foreign", b"garbled"}
    assert "does not subscribe" in reasons[b"orphan"] and "malformed" in reasons[b"garbled"]
