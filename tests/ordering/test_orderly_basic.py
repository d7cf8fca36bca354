"""Orderly mode basics: per-partition offset order, no overlapping handlers, suspend then dead letter."""

from __future__ import annotations

import time

import pytest

from rocketkafka import ConsumeOrderlyStatus, PushConsumer
from rocketkafka.testing.history import History, check
from rocketkafka.testing.reading import read_all
from tests.ordering.conftest import FAST, STEADY, shut_down, wait_until

pytestmark = pytest.mark.integration


def test_three_orderly_consumers_keep_partition_order_and_never_overlap(rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=8)
    history = History()
    consumers = []
    for name in ("o1", "o2", "o3"):
        c = PushConsumer(rk_group, settings=rk_settings, orderly=True, **STEADY)
        c.subscribe(topic, lambda m, n=name: _handle(history, n, m))
        consumers.append(c)
    for c in consumers:
        c.start()
    ids = produce(topic, 3000, key_of=lambda i: f"order-{i % 200}")
    try:
        assert wait_until(lambda: len({c.msg_id for c in history.calls}) >= 3000, timeout=60)
    finally:
        locks_lost = shut_down(consumers)
    report = check(history.calls, ids, order_by="partition", serial_by="partition")
    print(report.summary(), f"locks lost: {locks_lost}")
    assert report.lost_count == 0 and report.duplicate_count == 0, f"{report.summary()}; locks lost: {locks_lost}"
    assert report.reorders == [] and report.overlaps == []


def _handle(history, name, msg):
    with history.handler_call(name, msg):
        time.sleep(0.0002)  # a body long enough for overlaps to be visible


def test_poison_message_is_retried_in_place_then_dead_lettered(rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=1)
    ids = produce(topic, 5)
    seen = []

    def listener(msg):
        seen.append((msg.id, msg.reconsume_times))
        if msg.id == ids[1]:
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    c = PushConsumer(rk_group, settings=rk_settings, orderly=True, max_reconsume_times=3,
                     suspend_current_queue_time_ms=50, **FAST)
    c.subscribe(topic, listener)
    c.start()
    try:
        assert wait_until(lambda: any(i == ids[4] for i, _ in seen))
    finally:
        c.shutdown()
    assert seen == [(ids[0], 0)] + [(ids[1], n) for n in range(4)] + [(ids[2], 0), (ids[3], 0), (ids[4], 0)]
    dlq = read_all(rk_settings.bootstrap_servers, rk_settings.topics.dead_letter(rk_group))
    assert len(dlq) == 1 and dict(dlq[0].headers())["rk.UNIQ_KEY"].decode() == ids[1]
