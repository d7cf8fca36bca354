"""OpenTelemetry across the delay and retry hops: one message delayed, retried once (through the delay levels) and
then consumed is one trace, each hop the child of the one before; a dead letter is the failed process's child
(:mod:`rocketkafka.otel`)."""

from __future__ import annotations

import pytest

from rocketkafka import ConsumeStatus, Message, Producer, PushConsumer
from rocketkafka.testing.reading import read_all
from tests.delay.conftest import FAST, wait_until

pytest.importorskip("opentelemetry.sdk.trace")
pytestmark = pytest.mark.integration

from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402


@pytest.fixture
def rk_settings(rk_settings):
    """Tracing on for every client of the test, the forwarder too (as ``ROCKETKAFKA_OTEL=1`` does)."""
    return rk_settings.model_copy(update={"otel": True})


def test_a_delayed_message_retried_once_then_consumed_is_one_trace(rk_settings, rk_topic, rk_group, forwarder,
                                                                    otel_spans):
    topic = rk_topic(partitions=1)
    retry_topic = rk_settings.topics.retry(rk_group)
    forwarder()
    with Producer("otel", settings=rk_settings) as producer:
        sent = producer.send_sync(Message(topic, body=b"late", tags="paid", keys=["o-7"], delay_time_level=1))
    tries: list[int] = []

    def flaky(msg):
        tries.append(msg.reconsume_times)
        return ConsumeStatus.RECONSUME_LATER if len(tries) == 1 else ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(rk_group, {"fetch.wait.max.ms": 10}, settings=rk_settings, **FAST)
    consumer.subscribe(topic, flaky)
    consumer.start()
    try:
        assert wait_until(lambda: len(tries) >= 2, 30), tries
        (send,) = [s for s in otel_spans.get_finished_spans() if s.name == f"send {topic}"]
        ours = lambda: [s for s in otel_spans.get_finished_spans() if s.context.trace_id == send.context.trace_id]
        assert wait_until(lambda: len(ours()) >= 6, 10), [s.name for s in ours()]
    finally:
        consumer.shutdown()
    spans = sorted(ours(), key=lambda s: s.start_time)
    assert [(s.name, s.kind) for s in spans] == [
        (f"send {topic}", SpanKind.PRODUCER),          # the producer, to delay level 1
        (f"forward {topic}", SpanKind.PRODUCER),       # the forwarder, when due
        (f"process {topic}", SpanKind.CONSUMER),       # the first try: RECONSUME_LATER
        (f"send {retry_topic}", SpanKind.PRODUCER),    # its retry copy, to delay level 3 (the back-off)
        (f"forward {retry_topic}", SpanKind.PRODUCER),  # the forwarder, to the retry topic
        (f"process {topic}", SpanKind.CONSUMER),       # the second try: success
    ], [s.name for s in spans]
    assert spans[0].parent is None
    for child, parent in zip(spans[1:], spans):
        assert child.parent is not None and child.parent.span_id == parent.context.span_id, (child.name, parent.name)
    first, second = spans[2], spans[5]
    assert first.status.status_code is StatusCode.ERROR and second.status.status_code is StatusCode.UNSET
    assert tries == [0, 1] and second.attributes["rocketmq.message.reconsume_times"] == 1
    for span in spans:
        assert span.attributes["messaging.system"] == "kafka"
        assert span.attributes["messaging.message.id"] == sent.msg_id
        assert span.attributes["rocketmq.message.type"] == "delay"
        assert span.attributes["rocketmq.message.tag"] == "paid"
        assert tuple(span.attributes["rocketmq.message.keys"]) == ("o-7",)
    assert spans[0].attributes["rocketmq.message.delay_time_level"] == 1
    assert spans[0].attributes["rocketmq.message.delivery_timestamp"] > 0
    assert spans[3].attributes["rocketmq.message.delay_time_level"] == 3  # the back-off's level
    for process in (first, second):
        assert process.attributes["messaging.operation.type"] == "process"
        assert process.attributes["messaging.consumer.group.name"] == rk_group
        assert process.attributes["rocketmq.consumption_model"] == "clustering"
    assert first.attributes["messaging.destination.partition.id"] == "0"
    assert first.attributes["messaging.kafka.offset"] == 0
    assert {s.attributes["messaging.operation.type"] for s in (spans[0], spans[1], spans[3], spans[4])} == {"send"}


def test_a_dead_letter_is_the_child_of_the_failed_process_and_carries_its_send(rk_settings, rk_topic, rk_group,
                                                                                otel_spans):
    topic = rk_topic(partitions=1)
    dlq_topic = rk_settings.topics.dead_letter(rk_group)
    with Producer("otel", settings=rk_settings) as producer:
        producer.send_sync(Message(topic, body=b"poison", tags="bad"))
    tries: list[int] = []

    def fails(msg):
        tries.append(msg.reconsume_times)
        raise ValueError("cannot parse")

    consumer = PushConsumer(rk_group, {"fetch.wait.max.ms": 10}, settings=rk_settings,
                            **{**FAST, "max_reconsume_times": 0})
    consumer.subscribe(topic, fails)
    consumer.start()
    try:
        assert wait_until(lambda: read_all(rk_settings.bootstrap_servers, dlq_topic), 30)
        (send,) = [s for s in otel_spans.get_finished_spans() if s.name == f"send {topic}"]
        ours = lambda: [s for s in otel_spans.get_finished_spans() if s.context.trace_id == send.context.trace_id]
        assert wait_until(lambda: len(ours()) >= 3, 10), [s.name for s in ours()]
    finally:
        consumer.shutdown()
    spans = sorted(ours(), key=lambda s: s.start_time)
    assert [s.name for s in spans] == [f"send {topic}", f"process {topic}", f"send {dlq_topic}"]
    process, dead = spans[1], spans[2]
    assert process.parent.span_id == send.context.span_id and dead.parent.span_id == process.context.span_id
    assert process.status.status_code is StatusCode.ERROR and "ValueError: cannot parse" in process.status.description
    assert tries == [0]
    (record,) = read_all(rk_settings.bootstrap_servers, dlq_topic)
    c = dead.context
    assert dict(record.headers())["traceparent"] == f"00-{c.trace_id:032x}-{c.span_id:016x}-{int(c.trace_flags):02x}".encode()
