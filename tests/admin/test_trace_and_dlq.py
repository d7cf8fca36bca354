"""A delayed message that fails, is retried and dead-lettered: `admin trace` shows every step; `admin dlq` lists,
shows and re-sends it."""

from __future__ import annotations

import pytest

from rocketkafka import Message, Producer, PushConsumer
from rocketkafka.delay import DelayForwarder
from rocketkafka.testing.reading import read_all
from tests.admin.conftest import FAST, wait_until

pytestmark = pytest.mark.integration

FORWARDER = {k: v for k, v in FAST.items() if k != "consume_from_where"}


def test_trace_shows_every_step_of_a_delayed_retried_dead_lettered_message(rk_settings, rk_topic, rk_group, admin,
                                                                           admin_json):
    topic = rk_topic(partitions=1)
    forwarder = DelayForwarder(rk_settings, consumer_options=FORWARDER, trace=True).start()
    consumer = PushConsumer(rk_group, settings=rk_settings, trace=True, max_reconsume_times=1, **FAST)
    consumer.subscribe(topic, lambda msg: 1 / 0)
    consumer.start()
    try:
        with Producer("traced-producer", settings=rk_settings, trace=True) as producer:
            msg = Message(topic, body=b"doomed", tags="T", keys="order-7", delay_time_level=1)
            producer.send_sync(msg)
        dlq = rk_settings.topics.dead_letter(rk_group)
        assert wait_until(lambda: len(read_all(rk_settings.bootstrap_servers, dlq)) == 1, timeout=60)
    finally:
        consumer.shutdown()  # flushes the tracers
        forwarder.close()

    events = admin_json("trace", "--id", msg.id)
    steps = [e["event"] for e in events]
    assert steps == ["SENT", "DELAYED", "FORWARDED", "DELIVERED", "CONSUMED", "RETRIED", "FORWARDED", "DELIVERED",
                     "CONSUMED", "DEAD_LETTERED"]
    sent, delayed, forwarded, delivered, consumed, retried, _, delivered2, consumed2, dead = events
    assert (sent["fields"]["topic"], sent["fields"]["tags"], sent["fields"]["keys"]) == (topic, "T", "order-7")
    assert sent["client"] == "producer traced-producer"
    assert delayed["fields"]["level"] == 1 and delayed["fields"]["to_topic"] == topic
    assert forwarded["fields"]["to_topic"] == topic and forwarded["ts"] >= delayed["fields"]["due"]
    assert delivered["fields"]["member"] == consumer.instance_name and delivered["fields"]["reconsume_times"] == 0
    assert consumed["fields"]["status"].startswith("FAILED: ZeroDivisionError")
    assert retried["fields"]["reconsume_times"] == 1 and retried["fields"]["level"] == 3
    assert delivered2["fields"]["reconsume_times"] == 1 and delivered2["fields"]["topic"] == topic
    assert consumed2["fields"]["status"].startswith("FAILED")
    assert dead["fields"]["to_topic"] == rk_settings.topics.dead_letter(rk_group)
    assert "max reconsume times 1 reached" in dead["fields"]["reason"]
    code, text = admin("trace", "--id", msg.id)
    assert code == 0 and text.count("FORWARDED") == 2 and "DEAD_LETTERED" in text

    # the dead letter: listed, shown, sent back to its topic with its message id
    [letter] = admin_json("dlq", "list", rk_group)
    assert (letter["msg_id"], letter["origin_topic"], letter["origin_partition"], letter["reconsume_times"]) == \
        (msg.id, topic, 0, 1)
    assert "ZeroDivisionError" in letter["reason"]
    shown = admin_json("dlq", "show", rk_group, msg.id)
    assert (shown["tags"], shown["keys"], shown["body"]) == ("T", "order-7", "doomed")
    code, text = admin("dlq", "list", rk_group)
    assert code == 0 and msg.id in text and f"{topic}[0]@" in text
    [resent] = admin_json("dlq", "resend", rk_group, f"{letter['partition']}@{letter['offset']}")
    assert (resent["msg_id"], resent["topic"]) == (msg.id, topic)
    seen = []
    again = PushConsumer(rk_group + "-after", settings=rk_settings, **FAST)
    again.subscribe(topic, seen.append)
    again.start()
    try:
        assert wait_until(lambda: any(m.queue_offset == resent["offset"] for m in seen))
    finally:
        again.shutdown()
    back = next(m for m in seen if m.queue_offset == resent["offset"])
    assert (back.id, back.tags, back.keys, back.body, back.reconsume_times) == (msg.id, "T", "order-7", b"doomed", 0)


def test_dlq_errors_are_one_line(admin, rk_group):
    code, text = admin("dlq", "resend", rk_group)
    assert code == 1 and text.strip() == "Error: name dead letters (partition@offset or message id) or choose all of them"
    code, text = admin("trace", "--id", "0" * 32)
    assert code == 1 and text.startswith("Error: no trace topic")
