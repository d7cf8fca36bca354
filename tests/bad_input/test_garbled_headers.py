"""A foreign record whose ``rk.*`` header is garbled reaches a listener lazily (system headers are decoded on
first read, to keep the hot path cheap), so the consumer must answer for what the listener runs into:

- reading the garbled field raises :class:`MalformedRecordError`; if that escapes the listener, raw or wrapped
  (``raise ValueError(...) from exc``), the record is dead-lettered at once -- no retries, which could never
  mend it -- with the header named in ``rk.DLQ_REASON``;
- a batch listener's failure at a garbled record dead-letters *that* record, not the batch's first;
- a tag subscription, which reads the tag before any listener, dead-letters a tag that is not UTF-8
  instead of leaving the record out without a word.

Each test failed before issue 21.
"""

from __future__ import annotations

import pytest

from rocketkafka import ConsumeStatus, Message, Producer, PushConsumer
from rocketkafka.errors import MalformedRecordError
from rocketkafka.headers import header_map
from rocketkafka.names import Header
from rocketkafka.testing.reading import read_all
from tests.bad_input.conftest import FAST, wait_until

pytestmark = pytest.mark.integration

GARBLED = {
    "tags": (Header.TAGS, b"\xff\xfe"),
    "reconsume -7": (Header.RECONSUME_TIMES, b"-7"),
    "message id": (Header.MSG_ID, b"\xc3\x28"),
}


def _dead_letters(settings, group: str) -> dict[bytes, str]:
    return {r.value(): header_map(r.headers())[Header.DLQ_REASON].decode()
            for r in read_all(settings.bootstrap_servers, settings.topics.dead_letter(group))}


def _good(settings, topic: str, n: int) -> list[str]:
    with Producer("good", settings=settings) as producer:
        return [producer.send_sync(Message(topic, body=f"good-{i}".encode(), tags="TagA")).msg_id for i in range(n)]


@pytest.mark.parametrize("wrapped", [False, True], ids=["raised", "wrapped"])
@pytest.mark.parametrize("field", list(GARBLED), ids=list(GARBLED))
def test_a_garbled_header_met_by_the_listener_is_dead_lettered_at_once_naming_it(
        rk_settings, rk_topic, rk_group, raw_produce, field, wrapped):
    topic = rk_topic(partitions=1)
    header, value = GARBLED[field]
    raw_produce(topic, [(b"bad", [(header, value)])])
    good = _good(rk_settings, topic, 3)
    calls: list[bytes] = []

    def listener(msg):
        calls.append(msg.body)
        try:
            msg.id, msg.tags, msg.reconsume_times  # what a listener reads; a garbled header raises here
        except MalformedRecordError as exc:
            if wrapped:
                raise ValueError("cannot read the message") from exc
            raise
        return ConsumeStatus.CONSUME_SUCCESS

    # orderly with retries: before, a wrapped error was retried in place max_reconsume_times times
    consumer = PushConsumer(rk_group, settings=rk_settings, orderly=True, max_reconsume_times=3, **FAST)
    consumer.subscribe(topic, listener)
    consumer.start()
    try:
        assert wait_until(lambda: calls.count(b"good-2") and _dead_letters(rk_settings, rk_group), 30), calls
    finally:
        consumer.shutdown()
    assert calls.count(b"bad") == 1, calls
    dead = _dead_letters(rk_settings, rk_group)
    assert list(dead) == [b"bad"] and f"bad system header {header}" in dead[b"bad"], dead
    assert good


def test_a_batch_failing_at_a_garbled_record_dead_letters_that_record_only(rk_settings, rk_topic, rk_group,
                                                                          raw_produce):
    topic = rk_topic(partitions=1)
    _good(rk_settings, topic, 2)
    raw_produce(topic, [(b"bad", [GARBLED["tags"]])])
    _good(rk_settings, topic, 2)
    handled: list[bytes] = []

    def listener(batch):
        for msg in batch:
            msg.tags  # raises at the garbled record; those before it were handled
            handled.append(msg.body)

    consumer = PushConsumer(rk_group, settings=rk_settings, orderly=True, max_reconsume_times=3, **FAST)
    consumer.subscribe_batch(topic, listener, max_batch_size=10)
    consumer.start()
    try:
        assert wait_until(lambda: handled.count(b"good-1") >= 2 and _dead_letters(rk_settings, rk_group), 30), handled
    finally:
        consumer.shutdown()
    assert list(_dead_letters(rk_settings, rk_group)) == [b"bad"]
    assert b"good-0" in handled and handled.count(b"good-1") >= 2, handled


def test_a_tag_subscription_dead_letters_a_tag_that_is_not_utf8(rk_settings, rk_topic, rk_group, raw_produce):
    topic = rk_topic(partitions=1)
    raw_produce(topic, [(b"bad", [GARBLED["tags"]])])
    _good(rk_settings, topic, 2)
    seen: list[bytes] = []
    consumer = PushConsumer(rk_group, settings=rk_settings, **FAST)
    consumer.subscribe(topic, lambda m: seen.append(m.body), "TagA || TagB")
    consumer.start()
    try:
        assert wait_until(lambda: b"good-1" in seen and _dead_letters(rk_settings, rk_group), 30), seen
    finally:
        consumer.shutdown()
    dead = _dead_letters(rk_settings, rk_group)
    assert list(dead) == [b"bad"] and f"bad system header {Header.TAGS}: not UTF-8" in dead[b"bad"], dead
    assert b"bad" not in seen
