"""Subscribing with a MessageSelector: SQL92 through a real consumer, filtered records commit, bad input."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer as KafkaProducer

from rocketkafka import ConfigError, Message, MessageSelector, Producer, PushConsumer, SelectorSyntaxError
from rocketkafka.names import Header
from rocketkafka.testing.reading import committed_offsets, read_all
from tests.ordering.conftest import FAST, wait_until

pytestmark = pytest.mark.integration


def _send(settings, topic: str, rows: list[tuple[str | None, dict[str, str]]]) -> list[str]:
    with Producer("selector-test", settings=settings) as producer:
        ids = []
        for tags, props in rows:
            msg = Message(topic, body=b"x", tags=tags, properties=props)
            producer.send_sync(msg)
            ids.append(msg.id)
    return ids


def test_sql_selector_selects_by_properties_and_tag_and_filtered_offsets_commit(rk_settings, rk_topic, rk_group):
    topic = rk_topic(partitions=1)
    rows = [("paid" if i % 2 else "created", {"amount": str(i * 10), "region": ("eu", "us", "ap")[i % 3]})
            for i in range(60)]
    ids = _send(rk_settings, topic, rows)
    expression = "amount > 100 AND region IN ('eu', 'us') AND TAGS = 'paid'"
    wanted = [i for i, (tags, props) in zip(ids, rows)
              if int(props["amount"]) > 100 and props["region"] in ("eu", "us") and tags == "paid"]
    seen = []
    consumer = PushConsumer(rk_group, settings=rk_settings, **FAST)
    consumer.subscribe(topic, lambda m: seen.append(m.id), selector=MessageSelector.by_sql(expression))
    consumer.start()
    try:
        # every offset commits, the last records being left out by the selector included
        assert wait_until(lambda: committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 1)[0] == 60)
    finally:
        consumer.shutdown()
    assert seen == wanted and len(wanted) == 16


def test_only_filtered_out_records_still_commit_past_them(rk_settings, rk_topic, rk_group):
    topic = rk_topic(partitions=1)
    _send(rk_settings, topic, [(None, {"n": "1"})] * 25)
    seen = []
    consumer = PushConsumer(rk_group, settings=rk_settings, **FAST)
    consumer.subscribe(topic, seen.append, MessageSelector.by_sql("n > 5"))  # positional MessageSelector
    consumer.start()
    try:
        assert wait_until(lambda: committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 1)[0] == 25)
    finally:
        consumer.shutdown()
    assert seen == []


def test_batch_listener_gets_only_selected_messages(rk_settings, rk_topic, rk_group):
    topic = rk_topic(partitions=1)
    ids = _send(rk_settings, topic, [(None, {"k": str(i % 4)}) for i in range(40)])
    batches = []
    consumer = PushConsumer(rk_group, settings=rk_settings, **FAST)
    consumer.subscribe_batch(topic, lambda batch: batches.append([m.id for m in batch]), max_batch_size=8,
                             selector=MessageSelector.by_sql("k = '3'"))
    consumer.start()
    try:
        assert wait_until(lambda: committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 1)[0] == 40)
    finally:
        consumer.shutdown()
    assert [i for batch in batches for i in batch] == ids[3::4]


def test_a_malformed_record_goes_to_the_dlq_and_the_partition_goes_on(rk_settings, rk_topic, rk_group):
    topic = rk_topic(partitions=1)
    foreign = KafkaProducer({"bootstrap.servers": rk_settings.bootstrap_servers})
    foreign.produce(topic, b"bad", partition=0, headers=[(Header.RECONSUME_TIMES, b"not-a-number"), ("a", b"9")])
    foreign.flush(10)
    ids = _send(rk_settings, topic, [(None, {"a": "9"}), (None, {"a": "1"})])
    seen = []
    consumer = PushConsumer(rk_group, settings=rk_settings, **FAST)
    consumer.subscribe(topic, lambda m: seen.append(m.id), selector=MessageSelector.by_sql("a > 5"))
    consumer.start()
    try:
        assert wait_until(lambda: committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 1)[0] == 3)
    finally:
        consumer.shutdown()
    assert seen == ids[:1]
    dead = read_all(rk_settings.bootstrap_servers, rk_settings.topics.dead_letter(rk_group))
    assert [r.value() for r in dead] == [b"bad"]
    assert dict(dead[0].headers())[Header.DLQ_REASON].startswith(b"malformed record")


def test_tag_expression_still_works_as_a_string_and_as_a_tag_selector(rk_settings, rk_topic, rk_group):
    topic = rk_topic(partitions=1)
    ids = _send(rk_settings, topic, [(t, {}) for t in ("A", "B", "C", "A")])
    seen: dict[str, list[str]] = {"string": [], "selector": []}
    consumers = []
    for n, (name, expression) in enumerate((("string", "A || C"), ("selector", MessageSelector.by_tag("A || C")))):
        c = PushConsumer(f"{rk_group}-{n}", settings=rk_settings, **FAST)
        c.subscribe(topic, lambda m, name=name: seen[name].append(m.id), expression)
        c.start()
        consumers.append(c)
    try:
        assert wait_until(lambda: all(len(v) == 3 for v in seen.values()))
    finally:
        for c in consumers:
            c.shutdown()
    assert seen["string"] == seen["selector"] == [ids[0], ids[2], ids[3]]


def test_bad_expressions_are_refused_at_subscribe_with_the_position(rk_settings):
    consumer = PushConsumer("g-bad-selector", settings=rk_settings)
    with pytest.raises(SelectorSyntaxError) as err:
        consumer.subscribe("t", print, selector=MessageSelector.by_sql("amount > AND region = 'eu'"))
    assert err.value.position == 9
    with pytest.raises(ConfigError, match="MessageSelector"):
        consumer.subscribe("t", print, selector="amount > 5")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not both"):
        consumer.subscribe("t", print, "TagA", selector=MessageSelector.by_sql("a > 1"))
    with pytest.raises(SelectorSyntaxError) as err:
        consumer.subscribe_batch("t", print, selector=MessageSelector.by_sql("a BETWEEN 10 AND 0"))
    assert err.value.position > 0
