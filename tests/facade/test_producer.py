"""Producer guarantees against a real broker: round trip, partitioning, bad input sends nothing."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer as RawProducer

from rocketkafka import (
    Message,
    MessageError,
    MessageTooLargeError,
    Producer,
    SelectorError,
    TopicNotFoundError,
)
from rocketkafka.message import MessageExt
from rocketkafka.kafka import Producer as DropInProducer
from rocketkafka.testing.reading import read_all

pytestmark = pytest.mark.integration


def test_send_sync_round_trip_keeps_everything(rk_settings, rk_topic):
    topic = rk_topic(partitions=4)
    with Producer("pg", settings=rk_settings) as producer:
        msg = Message(topic, body=b"\x00payload\xff", tags="TagA", keys=["order-7", "user-3"], properties={"region": "eu"})
        result = producer.send_sync(msg)
    [record] = read_all(rk_settings.bootstrap_servers, topic)
    got = MessageExt.of(record).decode()
    assert (got.id, got.body, got.tags, got.keys, got.properties) == (
        result.msg_id, b"\x00payload\xff", "TagA", "order-7 user-3", {"region": "eu"})
    assert (result.topic, result.queue_id, result.offset) == (topic, record.partition(), record.offset())
    assert got.key == b"order-7"
    assert msg.id == result.msg_id


def test_hash_selector_keeps_an_order_id_on_the_partition_kafka_would_choose(rk_settings, rk_topic):
    topic = rk_topic(partitions=8)
    with Producer("pg", settings=rk_settings) as producer:
        ours = {f"order-{i}": {producer.send_orderly(Message(topic, body=b"x"), f"order-{i}").queue_id for _ in range(5)}
                for i in range(40)}
    assert all(len(parts) == 1 for parts in ours.values())
    # the Java client's default partitioner (murmur2) picks the same partition for the same key
    raw = RawProducer({"bootstrap.servers": rk_settings.bootstrap_servers, "partitioner": "murmur2_random"})
    placed = {}
    for key in ours:
        raw.produce(topic, b"raw", key=key.encode(), on_delivery=lambda e, m: placed.__setitem__(m.key().decode(), m.partition()))
    raw.flush(10)
    assert placed == {k: next(iter(v)) for k, v in ours.items()}
    assert len(set(placed.values())) > 4  # keys really spread over partitions


def test_async_and_oneway_sends_arrive(rk_settings, rk_topic):
    topic = rk_topic(partitions=2)
    results = []
    with Producer("pg", settings=rk_settings) as producer:
        for i in range(20):
            producer.send_async(Message(topic, body=b"a"), results.append)
        producer.send_oneway(Message(topic, body=b"o"))
        producer.flush()
    assert len(results) == 20 and len({r.msg_id for r in results}) == 20
    assert len(read_all(rk_settings.bootstrap_servers, topic)) == 21


def test_drop_in_producer_takes_confluent_calls_and_extras(rk_settings, rk_topic):
    topic = rk_topic(partitions=3)
    reports = []
    producer = DropInProducer({"bootstrap.servers": rk_settings.bootstrap_servers, "linger.ms": 1})
    producer.produce(topic, b"v1", key=b"k", on_delivery=lambda e, m: reports.append((e, m.partition())), tags="TagB",
                     keys="biz-1", headers={"trace": b"abc"})
    producer.produce(topic, value=b"v2", partition=2)
    assert producer.flush(10) == 0
    records = {r.value(): MessageExt.of(r).decode() for r in read_all(rk_settings.bootstrap_servers, topic)}
    assert records[b"v1"].tags == "TagB" and records[b"v1"].keys == "biz-1" and records[b"v1"].key == b"k"
    assert records[b"v1"].properties == {"trace": "abc"}
    assert records[b"v2"].queue_id == 2
    assert reports and reports[0][0] is None


def test_bad_input_raises_at_the_call_and_sends_nothing(rk_settings, rk_topic):
    topic = rk_topic(partitions=2)
    with Producer("pg", settings=rk_settings) as producer:
        with pytest.raises(TopicNotFoundError, match="does not exist"):
            producer.send_sync(Message("no-such-topic-xyz", body=b"x"))
        with pytest.raises(MessageError, match="body must be bytes"):
            producer.send_sync(Message(topic, body=12345))
        with pytest.raises(MessageTooLargeError, match="over the limit"):
            producer.send_sync(Message(topic, body=b"x" * 1_100_000))
        with pytest.raises(SelectorError, match="returned 5"):
            producer.send_sync(Message(topic, body=b"x"), selector=lambda n, m, a: 5)
        with pytest.raises(SelectorError, match="sharding key"):
            producer.send_orderly(Message(topic, body=b"x"), sharding_key=3.5)
        with pytest.raises(MessageError, match="tag"):
            producer.send_oneway(Message(topic, body=b"x", tags=""))
        producer.flush()
    drop_in = DropInProducer({"bootstrap.servers": rk_settings.bootstrap_servers})
    with pytest.raises(TopicNotFoundError):
        drop_in.produce("no-such-topic-xyz", b"x")
    with pytest.raises(MessageError, match="partition 9"):
        drop_in.produce(topic, b"x", partition=9, tags="T")  # a plain produce fails as confluent-kafka's does
    drop_in.flush(5)
    assert read_all(rk_settings.bootstrap_servers, topic) == []
    from confluent_kafka.admin import AdminClient

    assert "no-such-topic-xyz" not in AdminClient({"bootstrap.servers": rk_settings.bootstrap_servers}).list_topics(timeout=5).topics
