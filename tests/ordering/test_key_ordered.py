"""Key-ordered mode (DDMQ): same key serial and in offset order, keys of one partition in parallel."""

from __future__ import annotations

import json
import threading
import time

import pytest

from rocketkafka import ConfigError, ConsumeOrderlyStatus, Message, Producer, PushConsumer
from rocketkafka.testing.history import History, check
from rocketkafka.testing.reading import committed_offsets, read_all
from tests.ordering.conftest import FAST, STEADY, overlapping_keys, shut_down, wait_until

pytestmark = pytest.mark.integration


def _keyed(history: History, name: str, sleep: float = 0.0):
    def handle(msg):
        with history.handler_call(name, msg, key=msg.key.decode() if msg.key else None):
            time.sleep(sleep)
    return handle


def test_same_key_serial_in_offset_order_and_keys_of_a_partition_overlap(rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=2)
    history = History()
    c = PushConsumer(rk_group, settings=rk_settings, orderly=True, order_key="key", consume_thread_max=32, **STEADY)
    c.subscribe(topic, _keyed(history, "k1", sleep=0.010))
    c.start()
    ids = produce(topic, 800, key_of=lambda i: f"order-{i % 40}", keys_of=lambda i: f"order-{i % 40}")
    try:
        assert wait_until(lambda: len({x.msg_id for x in history.calls}) >= 800, timeout=60)
        assert wait_until(lambda: sum(committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 2).values()) == 800)
    finally:
        c.shutdown()
    report = check(history.calls, ids, order_by="key", serial_by="key")
    overlaps = overlapping_keys(history.calls)
    print(report.summary(), f"overlapping keys within a partition: {overlaps}")
    assert report.lost_count == 0 and report.duplicate_count == 0
    assert report.reorders == [] and report.overlaps == []
    assert overlaps > 50, "different keys of one partition must run concurrently"


def test_json_path_order_key(rk_settings, rk_topic, rk_group):
    topic = rk_topic(partitions=1)
    history = History()
    c = PushConsumer(rk_group, settings=rk_settings, orderly=True, order_key="$.order.id", consume_thread_max=16, **STEADY)

    def handle(msg):
        with history.handler_call("j", msg, key=str(json.loads(msg.body)["order"]["id"])):
            time.sleep(0.005)

    c.subscribe(topic, handle)
    c.start()
    producer = Producer("p", settings=rk_settings)
    producer.start()
    ids = []
    try:
        for i in range(300):
            msg = Message(topic, body=json.dumps({"order": {"id": i % 10}, "seq": i}).encode())
            producer.send_async(msg, lambda r: None)
            ids.append(msg.id)
        assert producer.flush(30) == 0
        assert wait_until(lambda: len({x.msg_id for x in history.calls}) >= 300, timeout=60)
    finally:
        producer.shutdown()
        c.shutdown()
    report = check(history.calls, ids, order_by="key", serial_by="key")
    assert report.lost_count == 0 and report.duplicate_count == 0
    assert report.reorders == [] and report.overlaps == []
    assert overlapping_keys(history.calls) > 0


def test_poison_message_blocks_only_its_own_key(rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=1)
    ids = produce(topic, 200, key_of=lambda i: f"k{i % 5}", keys_of=lambda i: f"k{i % 5}")
    poison = ids[10]  # key k0
    attempts, done = [], {}

    def handle(msg):
        if msg.id == poison:
            attempts.append(time.monotonic())
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        done[msg.id] = (time.monotonic(), msg.key.decode())
        return ConsumeOrderlyStatus.SUCCESS

    c = PushConsumer(rk_group, settings=rk_settings, orderly=True, order_key="key", max_reconsume_times=3,
                     suspend_current_queue_time_ms=500, **FAST)
    c.subscribe(topic, handle)
    c.start()
    try:
        assert wait_until(lambda: len(done) == 199, timeout=30)
        committed = committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 1)[0]
        assert wait_until(lambda: committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 1)[0] == 200)
    finally:
        c.shutdown()
    assert len(attempts) == 4  # the first try and 3 reconsumes
    others = [t for i, (t, key) in done.items() if key != "k0"]
    later_k0 = [t for i, (t, key) in done.items() if key == "k0" and ids.index(i) > 10]
    # every other key finished while k0 still waited on its poison message
    assert max(others) < attempts[-1]
    # k0's later messages ran only after the poison message was dead-lettered, in order
    assert min(later_k0) > attempts[-1]
    dlq = read_all(rk_settings.bootstrap_servers, rk_settings.topics.dead_letter(rk_group))
    assert [dict(r.headers())["rk.UNIQ_KEY"].decode() for r in dlq] == [poison]
    assert committed <= 10 or committed == 200, "the commit point never passes the unfinished poison message"


def test_committed_offset_never_passes_an_unfinished_message(rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=1)
    gate = threading.Event()
    seen = []
    ids = produce(topic, 100, key_of=lambda i: f"k{i % 4}", keys_of=lambda i: f"k{i % 4}")

    def handle(msg):
        if msg.id == ids[5]:  # key k1 waits; the other keys go on
            gate.wait(30)
        seen.append(msg.id)

    c = PushConsumer(rk_group, settings=rk_settings, orderly=True, order_key="key", **FAST)
    c.subscribe(topic, handle)
    c.start()
    try:
        assert wait_until(lambda: len(seen) == 100 - 24, timeout=30)  # everything but k1 from offset 5 on
        assert wait_until(lambda: committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 1)[0] == 5)
        time.sleep(5 * FAST["commit_interval_ms"] / 1000)  # later commits stay below the waiting message
        assert committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 1)[0] == 5
        gate.set()
        assert wait_until(lambda: committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 1)[0] == 100)
    finally:
        gate.set()
        c.shutdown()
    assert sorted(seen) == sorted(ids)


def test_graceful_handover_in_key_mode_redelivers_nothing(rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=4)
    history = History()
    consumers = {}

    def add(name):
        c = PushConsumer(rk_group, settings=rk_settings, orderly=True, order_key="key", consume_thread_max=16, **STEADY)
        c.subscribe(topic, _keyed(history, name, sleep=0.002))
        c.start()
        consumers[name] = c

    add("a")
    ids = produce(topic, 1500, key_of=lambda i: f"o{i % 64}", keys_of=lambda i: f"o{i % 64}")
    assert wait_until(lambda: len(history.calls) > 200)
    add("b")  # a hands two partitions over while it is busy
    assert wait_until(lambda: len(consumers["b"].assignment()) == 2, timeout=20)
    more = produce(topic, 500, key_of=lambda i: f"o{i % 64}", keys_of=lambda i: f"o{i % 64}")
    locks_lost = shut_down([consumers.pop("a")])  # and leaves while keys are in flight
    assert wait_until(lambda: len({x.msg_id for x in history.calls}) >= 2000, timeout=60)
    time.sleep(0.5)
    locks_lost += shut_down([consumers["b"]])
    report = check(history.calls, ids + more, order_by="key", serial_by="key")
    print(report.summary(), f"locks lost: {locks_lost}")
    assert report.lost_count == 0 and report.duplicate_count == 0, f"{report}; locks lost: {locks_lost}"
    assert report.reorders == [] and report.overlaps == []


def test_order_key_needs_orderly(rk_settings, rk_group):
    with pytest.raises(ConfigError, match="needs orderly=True"):
        PushConsumer(rk_group, settings=rk_settings, order_key="key")
    with pytest.raises(ConfigError, match="order_key"):
        PushConsumer(rk_group, settings=rk_settings, orderly=True, order_key="order.id")
