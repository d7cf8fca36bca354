"""OpenTelemetry across a transaction resolved by check-back: the half's send, the checker's check, the
producer's answer and the commit are one trace, which a plain confluent-kafka reader of the real topic
continues (:mod:`rocketkafka.otel`)."""

from __future__ import annotations

import pytest

from rocketkafka import Message, PushConsumer
from rocketkafka.headers import header_map
from tests.txn.conftest import COMMIT, UNKNOWN, Store, wait_until

pytest.importorskip("opentelemetry.sdk.trace")
pytestmark = pytest.mark.integration

from opentelemetry.trace import SpanKind  # noqa: E402


@pytest.fixture
def rk_settings(rk_settings):
    """Tracing on for every client of the test: the producer, its check-back consumer and the checker."""
    return rk_settings.model_copy(update={"otel": True})


def test_a_transaction_resolved_by_check_back_is_one_trace(rk_settings, rk_topic, rk_group, make_producer,
                                                            make_checker, read_topic, otel_spans):
    topic = rk_topic(partitions=1)
    store = Store()
    producer = make_producer("otel-tx", store.check)
    make_checker()
    result = producer.send_message_in_transaction(Message(topic, b"paid", tags="pay", keys=["o-9"]),
                                                  lambda msg, arg: UNKNOWN)
    txid = result.transaction_id
    store.state[txid] = COMMIT  # the next check-back commits it
    seen: list[str] = []
    consumer = PushConsumer(rk_group, settings=rk_settings, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                            commit_interval_ms=200)
    consumer.subscribe(topic, lambda msg: seen.append(msg.id))
    consumer.start()
    try:
        assert wait_until(lambda: seen == [txid], 30), (seen, store.checks)
        (send,) = [s for s in otel_spans.get_finished_spans() if s.name == f"send {topic}"]
        ours = lambda: [s for s in otel_spans.get_finished_spans() if s.context.trace_id == send.context.trace_id]
        assert wait_until(lambda: any(s.name == f"process {topic}" for s in ours()), 10), [s.name for s in ours()]
    finally:
        consumer.shutdown()
    by_name = {}
    for span in ours():
        by_name.setdefault(span.name.split()[0], []).append(span)
    # usually one check-back; a later one (the first answer lost or late) continues the one before, whose copy it read
    checks, (commit,), (process,) = by_name["check"], by_name["commit"], [
        s for s in by_name["process"] if s.attributes["messaging.destination.name"] == topic]
    answers = [s for s in by_name["process"] if s is not process]
    assert send.kind is SpanKind.PRODUCER and send.parent is None
    assert send.attributes["rocketmq.message.type"] == "transaction"
    assert send.attributes["rocketmq.message.transaction_id"] == txid
    assert checks and all(c.kind is SpanKind.INTERNAL for c in checks)
    ids = {s.context.span_id: s for s in ours()}
    assert checks[0].parent.span_id == send.context.span_id  # the first check-back continues the half's context
    assert all(later.parent.span_id == earlier.context.span_id for earlier, later in zip(checks, checks[1:]))
    answered = ids[commit.parent.span_id]  # the commit continues the check-back that was answered COMMIT
    assert answered in checks and answers and any(a.parent.span_id == answered.context.span_id for a in answers)
    assert commit.kind is SpanKind.PRODUCER and commit.attributes["messaging.destination.name"] == topic
    assert commit.attributes["rocketmq.message.type"] == "transaction"
    assert process.kind is SpanKind.CONSUMER and process.parent.span_id == commit.context.span_id
    for span in (send, *checks, commit, process):
        assert span.attributes["messaging.message.id"] == txid and span.attributes["rocketmq.message.tag"] == "pay"
    # a plain confluent-kafka reader of the real topic finds the commit's context in the W3C header
    (record,) = read_topic(topic)
    traceparent = header_map(record.headers())["traceparent"]
    c = commit.context
    assert traceparent == f"00-{c.trace_id:032x}-{c.span_id:016x}-{int(c.trace_flags):02x}".encode()
