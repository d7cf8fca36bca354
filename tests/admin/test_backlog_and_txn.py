"""`admin delay-backlog` and `admin txn-pending` against what was sent."""

from __future__ import annotations

import time

import pytest

from rocketkafka import Message
from rocketkafka.delay import DelayForwarder
from rocketkafka.txn import TransactionMQProducer, TransactionStatus
from tests.admin.conftest import FAST, wait_until

pytestmark = pytest.mark.integration

FORWARDER = {k: v for k, v in FAST.items() if k != "consume_from_where"}


def test_delay_backlog_counts_waiting_messages_per_level_with_due_times_and_owners(rk_settings, rk_topic, send,
                                                                                  admin, admin_json):
    topic = rk_topic(partitions=1)
    before = int(time.time() * 1000)
    send(topic, 5, delay_time_level=5)  # 10 minutes: they stay
    send(topic, 3, delay_time_level=1)  # 300 ms: forwarded once a forwarder runs
    after = int(time.time() * 1000)
    rows = {r["level"]: r for r in admin_json("delay-backlog")}
    assert (rows[5]["waiting"], rows[1]["waiting"]) == (5, 3)
    assert before + 600_000 <= rows[5]["oldest_due_ms"] <= after + 600_000
    assert rows[5]["owners"] == [] and rows[2]["waiting"] == 0 and rows[2]["oldest_due_ms"] is None

    forwarder = DelayForwarder(rk_settings, consumer_options=FORWARDER).start()
    try:
        assert wait_until(lambda: {r["level"]: r["waiting"] for r in admin_json("delay-backlog")}[1] == 0)
        rows = {r["level"]: r for r in admin_json("delay-backlog")}
        assert rows[5]["waiting"] == 5 and rows[5]["owners"] == [forwarder.instance_name]
        assert before + 600_000 <= rows[5]["next_due_ms"] <= after + 600_000
        code, text = admin("delay-backlog")
        line = next(line for line in text.splitlines() if line.split("|")[0].strip() == "5")
        assert line.split("|")[2].strip() == "5" and "10m" in line and forwarder.instance_name in line
    finally:
        forwarder.close()


def test_txn_pending_lists_open_halves_by_producer_group(rk_settings, rk_topic, admin, admin_json):
    topic = rk_topic(partitions=2)
    producer = TransactionMQProducer("pg-admin", lambda msg: TransactionStatus.UNKNOWN, settings=rk_settings)
    producer.start()
    try:
        open_ids = []
        for i in range(3):
            msg = Message(topic, body=f"t{i}".encode())
            state = TransactionStatus.COMMIT if i == 1 else TransactionStatus.UNKNOWN
            producer.send_message_in_transaction(msg, lambda m, arg, s=state: s)
            if state is TransactionStatus.UNKNOWN:
                open_ids.append(msg.id)
    finally:
        producer.shutdown()
    time.sleep(0.2)
    halves = admin_json("txn-pending")
    assert sorted(h["transaction_id"] for h in halves) == sorted(open_ids)
    assert all(h["producer_group"] == "pg-admin" and h["real_topic"] == topic and h["checks"] == 0
               and h["age_ms"] >= 200 for h in halves)
    assert admin_json("txn-pending", "--producer-group", "someone-else") == []
    code, text = admin("txn-pending")
    assert code == 0 and all(i in text for i in open_ids) and "pg-admin" in text
