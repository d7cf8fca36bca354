"""DeFiBus transition state: the lock entry shows delivered and acked offsets; a new owner starts at the commit."""

from __future__ import annotations

import threading
import time

import pytest

from rocketkafka import PushConsumer
from rocketkafka.testing.history import History, check
from rocketkafka.testing.reading import committed_offsets
from rocketkafka.ordering.locks import LockTable
from tests.ordering.conftest import FAST, STEADY, shut_down, wait_until

pytestmark = pytest.mark.integration


def test_lock_entry_records_delivered_and_acked_offsets(rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=2)
    gate = threading.Event()
    ids = produce(topic, 400, key_of=lambda i: f"o{i % 10}")
    seen = []

    def handle(msg):
        if len(seen) == 20:
            gate.wait(30)  # hold the partition: delivered runs ahead of acked
        seen.append(msg.id)

    consumer = PushConsumer(rk_group, settings=rk_settings, orderly=True, **FAST)
    consumer.subscribe(topic, handle)
    consumer.start()
    observer = LockTable(rk_settings.redis_urls, rk_group, "observer", rk_settings.keys)
    try:
        assert wait_until(lambda: len(seen) >= 20)

        def in_flight():  # the next renewals write the progress of the held-up partition
            entries = [observer.describe((topic, p)) for p in range(2)]
            return all(e and e["owner"] == consumer.instance_name for e in entries) and \
                any(e["acked"] is not None and e["delivered"] > e["acked"] for e in entries)

        assert wait_until(in_flight, timeout=10), "delivered runs ahead of acked while work is in flight"
        gate.set()
        assert wait_until(lambda: len(seen) == 400)
        assert wait_until(lambda: sum(committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 2).values()) == 400)
        committed = committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 2)

        def settled():
            now = {p: observer.describe((topic, p)) for p in range(2)}
            return all(now[p] and now[p]["delivered"] == now[p]["acked"] == committed[p] for p in range(2))

        assert wait_until(settled, timeout=10), "delivered == acked == committed once the owner is idle"
        assert {p: observer.describe((topic, p))["fencing_token"] for p in range(2)} == \
            {p: consumer.engine.fencing_token((topic, p)) for p in range(2)}
    finally:
        gate.set()
        consumer.shutdown()
        observer.close()
    assert sorted(seen) == sorted(ids)
    with LockTable(rk_settings.redis_urls, rk_group, "observer2", rk_settings.keys) as table:
        # a graceful leave unlocks (a node too slow to answer the release lets the lease run out instead)
        assert wait_until(lambda: [table.describe((topic, p)) for p in range(2)] == [None, None],
                          timeout=FAST["lock_lease_ms"] / 1000 + 2)


def test_new_owner_starts_exactly_at_the_committed_offset(rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=2)
    history = History()
    ids = produce(topic, 1200, key_of=lambda i: f"o{i % 20}")

    def listener(name):
        def handle(msg):
            with history.handler_call(name, msg):
                time.sleep(0.002)
        return handle

    a = PushConsumer(rk_group, settings=rk_settings, orderly=True, **STEADY)
    a.subscribe(topic, listener("a"))
    a.start()
    b = PushConsumer(rk_group, settings=rk_settings, orderly=True, **STEADY)
    b.subscribe(topic, listener("b"))
    try:
        assert wait_until(lambda: len(history.calls) > 200)
        b.start()  # takes one partition over from a, mid-stream
        assert wait_until(lambda: len(b.assignment()) == 1, timeout=20)
        assert wait_until(lambda: len({c.msg_id for c in history.calls}) >= 1200, timeout=60)
    finally:
        locks_lost = shut_down([a, b])
    report = check(history.calls, ids)
    assert report.lost_count == 0 and report.duplicate_count == 0 and report.reorders == [] and report.overlaps == [], \
        f"{report.summary()}; locks lost: {locks_lost}"
    (moved,) = {c.partition for c in history.calls if c.consumer == "b"}
    last_of_a = max(c.offset for c in history.calls if c.consumer == "a" and c.partition == moved)
    first_of_b = min(c.offset for c in history.calls if c.consumer == "b" and c.partition == moved)
    assert first_of_b == last_of_a + 1, "the new owner starts exactly where the old one committed"
