"""Delay levels end to end: a `rocketkafka delay-forwarder` process moves every message to its real topic and
partition on time -- never early, lateness p99 under 50 ms -- with body, key and headers kept and the delay
headers gone; messages of one key with one delay keep their send order."""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

from rocketkafka import Message, Producer, hash_selector
from rocketkafka.kafka import Producer as KafkaProducer
from rocketkafka.names import Header
from tests.delay.conftest import (
    delay_records,
    due_of,
    lateness,
    wait_until,
    delivered_headers,
)

pytestmark = pytest.mark.integration


def _warm_up(producer, topic, receiver) -> None:
    """One delayed message through the forwarder, so the measured ones do not wait for it to start."""
    probe = Message(topic, body=b"probe", delay_time_level=1)
    producer.send_sync(probe)
    assert receiver.wait_for({probe.id}, timeout=30), "forwarder never delivered the warm-up message"


@pytest.mark.timing
def test_every_level_is_delivered_on_time_to_its_partition_intact(rk_settings, rk_topic, delay_config,
                                                                  forwarder_process, receiver, stall_probe):
    topic = rk_topic(partitions=4)
    forwarder_process("levels")
    seen = receiver({topic: 4})
    producer = Producer("delay-levels", settings=rk_settings)
    producer.start()
    _warm_up(producer, topic, seen)
    stall_probe.reset()  # the window: from the first send to the last arrival

    sent: dict[str, tuple[Message, int]] = {}  # id -> (message, expected partition)
    levels = len(delay_config.levels)
    n = 2500
    for i in range(n):  # ~1,000 msg/s, levels round robin, one key of 50 per message
        key = f"key-{i % 50}"
        msg = Message(topic, body=f"body-{i}".encode(), tags=f"T{i % 3}", keys=[key, f"extra-{i}"],
                      properties={"seq": str(i), "app": "levels"}, delay_time_level=1 + i % levels)
        producer.send_async(msg, lambda r: None, selector=hash_selector, arg=key)
        sent[msg.id] = (msg, hash_selector(4, msg, key))
        if i % 50 == 49:
            producer.poll(0)
            time.sleep(0.05)
    assert producer.flush(30) == 0
    producer.shutdown()

    assert seen.wait_for(set(sent), timeout=30), f"lost: {len(set(sent) - set(seen.ids()))} of {n}"
    stall_probe.stop()
    time.sleep(0.5)  # a duplicate would show now
    originals = delay_records(rk_settings, delay_config)
    due = {m: due_of(originals[m]) for m in sent}
    report = lateness(seen.arrivals, due, stall_probe)
    by_level: dict[int, list[int]] = defaultdict(list)
    for a in seen.arrivals:
        if a.msg_id in sent:
            by_level[sent[a.msg_id][0].delay_time_level].append(a.received_ms - due[a.msg_id])
    print(f"\nlevels {delay_config.describe()}: {report.summary()}")
    for level, late in sorted(by_level.items()):
        late.sort()
        print(f"  level {level}: n={len(late)} p50={late[len(late) // 2]} ms p99={late[int(len(late) * 0.99)]} ms "
              f"max={late[-1]} ms")

    duplicates = {m: c for m, c in seen.ids().items() if c > 1 and m in sent}
    assert not duplicates, f"duplicates without a crash: {list(duplicates.items())[:5]}"
    assert report.count == n and report.early == [], f"early: {report.early[:10]}"
    assert report.within_bound(), report.summary()
    for a in seen.arrivals:
        if a.msg_id not in sent:
            continue
        msg, partition = sent[a.msg_id]
        record = a.record
        original = originals[a.msg_id]
        assert (record.topic(), record.partition()) == (topic, partition)
        assert record.value() == msg.body and record.key() == original.key() == msg.keys.split()[0].encode()
        assert record.headers() == delivered_headers(original.headers())
        headers = dict(record.headers())
        assert headers["seq"] == msg.properties["seq"].encode() and headers[Header.TAGS] == msg.tags.encode()
        assert headers[Header.KEYS] == msg.keys.encode() and headers[Header.MSG_ID] == a.msg_id.encode()
        # the routing headers go; the provenance stays: when it was due, and at which level
        assert not {Header.REAL_TOPIC, Header.REAL_QUEUE_ID, Header.ORIGIN_TIMESTAMP} & headers.keys()
        assert headers[Header.DELIVER_AT] == dict(original.headers())[Header.DELIVER_AT]
        assert headers[Header.DELAY_LEVEL] == str(msg.delay_time_level).encode()


def test_same_key_same_delay_arrives_in_send_order(rk_settings, rk_topic, delay_config, forwarder, receiver):
    topic = rk_topic(partitions=4)
    forwarder()
    seen = receiver({topic: 4})
    producer = Producer("delay-order", settings=rk_settings)
    producer.start()
    order: dict[str, list[str]] = defaultdict(list)
    for i in range(400):  # 8 keys x 50 messages, all level 2, sent as fast as the producer goes
        key = f"order-{i % 8}"
        msg = Message(topic, body=str(i).encode(), keys=[key], delay_time_level=2)
        producer.send_async(msg, lambda r: None, selector=hash_selector, arg=key)
        order[key].append(msg.id)
    drop_in = KafkaProducer({"bootstrap.servers": rk_settings.bootstrap_servers,
                             "rocketkafka.topic.prefix": rk_settings.topic_prefix,
                             "rocketkafka.delay.levels": rk_settings.delay.describe()})
    for i in range(100):  # the Kafka door: key= and delay_level= (the partition is fixed at send by the key)
        drop_in.produce(topic, f"k{i}".encode(), key="kafka-key", delay_level=2, headers={"n": str(i).encode()})
    assert producer.flush(30) == 0 and drop_in.flush(30) == 0
    producer.shutdown()
    expected = {m for ids in order.values() for m in ids}
    assert seen.wait_for(expected, timeout=30)
    assert wait_until(lambda: sum(1 for a in list(seen.arrivals) if a.record.key() == b"kafka-key") >= 100, 30)
    drop_in.close()

    arrived: dict[str, list[str]] = defaultdict(list)
    for a in seen.arrivals:
        if a.record.key() != b"kafka-key":
            arrived[a.record.key().decode()].append(a.msg_id)
    for key, ids in order.items():
        assert arrived[key] == ids, f"{key} out of order"
    kafka_door = [a.record for a in seen.arrivals if a.record.key() == b"kafka-key"]
    assert [dict(r.headers())["n"] for r in kafka_door] == [str(i).encode() for i in range(100)]
    assert len({r.partition() for r in kafka_door}) == 1
    # the same partition an immediate send of that key gets from the producer's partitioner
    drop_in = KafkaProducer({"bootstrap.servers": rk_settings.bootstrap_servers})
    reports = []
    drop_in.produce(topic, b"now", key="kafka-key", tags="immediate", on_delivery=lambda e, m: reports.append(m))
    drop_in.flush(10)
    assert reports[0].partition() == kafka_door[0].partition()
