"""OpenTelemetry's carrier over Kafka headers, the attributes of a span, and tracing off costing nothing
(:mod:`rocketkafka.otel`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("opentelemetry.sdk.trace")

from opentelemetry import trace  # noqa: E402
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags  # noqa: E402

from rocketkafka import otel  # noqa: E402
from rocketkafka.names import Header  # noqa: E402
from rocketkafka.otel_sender import operation_of  # noqa: E402
from rocketkafka.record import Record  # noqa: E402

TRACE_ID, SPAN_ID = 0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331
#: What opentelemetry-instrumentation-confluent-kafka writes: the W3C header, its value as UTF-8 bytes.
TRACEPARENT = ("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")


def _context(span_id: int = SPAN_ID):
    return trace.set_span_in_context(NonRecordingSpan(SpanContext(TRACE_ID, span_id, is_remote=False,
                                                                  trace_flags=TraceFlags(1))))


def test_inject_writes_the_w3c_header_as_bytes_and_keeps_the_others():
    headers = otel.inject([(Header.MSG_ID, b"ID"), ("app", None)], _context())
    assert headers == [(Header.MSG_ID, b"ID"), ("app", None), TRACEPARENT]


def test_a_copy_carries_one_context_the_new_one():
    headers = otel.inject([TRACEPARENT, ("tracestate", b"old=1"), ("app", b"x")], _context(0x1111))
    assert [k for k, _ in headers] == ["app", "traceparent"]
    assert dict(headers)["traceparent"] == b"00-0af7651916cd43dd8448eb211c80319c-0000000000001111-01"


def test_extract_reads_what_a_plain_confluent_kafka_writer_wrote():
    span_context = trace.get_current_span(otel.extract([("x", b"1"), TRACEPARENT])).get_span_context()
    assert (span_context.trace_id, span_context.span_id, span_context.is_remote) == (TRACE_ID, SPAN_ID, True)
    assert not trace.get_current_span(otel.extract(None)).get_span_context().is_valid
    assert not trace.get_current_span(otel.extract([("traceparent", None)])).get_span_context().is_valid


@pytest.mark.parametrize("headers, kind", [
    ([], "normal"),
    ([(Header.SHARDING_KEY, b"k")], "fifo"),
    ([(Header.DELAY_LEVEL, b"3"), (Header.DELIVER_AT, b"1700000000000")], "delay"),
    ([(Header.TRANSACTION, b"true"), (Header.TRANSACTION_ID, b"T")], "transaction"),
])
def test_the_rocketmq_message_type(headers, kind):
    assert otel.attributes("t", headers, "send", "send")["rocketmq.message.type"] == kind


def test_attributes_of_a_delayed_message():
    headers = [(Header.MSG_ID, b"ID"), (Header.TAGS, b"paid"), (Header.KEYS, b"o-1 o-2"), (Header.DELAY_LEVEL, b"3"),
               (Header.DELIVER_AT, b"1700000000000"), (Header.RECONSUME_TIMES, b"2")]
    assert otel.attributes("orders", headers, "process", "process", b"o-1", 4, 17) == {
        "messaging.system": "kafka", "messaging.destination.name": "orders", "messaging.operation.name": "process",
        "messaging.operation.type": "process", "rocketmq.message.type": "delay", "messaging.message.id": "ID",
        "rocketmq.message.tag": "paid", "rocketmq.message.keys": ["o-1", "o-2"],
        "rocketmq.message.delay_time_level": 3, "rocketmq.message.delivery_timestamp": 1700000000000,
        "rocketmq.message.reconsume_times": 2, "messaging.kafka.message.key": "o-1",
        "messaging.destination.partition.id": "4", "messaging.kafka.offset": 17}


def test_outgoing_continues_the_records_context_and_names_the_real_topic(otel_spans):
    record = Record("rk.delay.3", 1, None, b"v", [(Header.MSG_ID, b"ID"), (Header.REAL_TOPIC, b"orders"),
                                                  TRACEPARENT], "ID")
    span, sent = otel.outgoing(record, "forward")
    otel.finish(span)
    (finished,) = otel_spans.get_finished_spans()
    assert (finished.name, finished.kind, finished.parent.span_id) == ("forward orders", SpanKind.PRODUCER, SPAN_ID)
    assert finished.context.trace_id == TRACE_ID
    assert "messaging.destination.partition.id" not in finished.attributes  # partition 1 is the delay topic's
    assert dict(sent.headers)["traceparent"] == f"00-{TRACE_ID:032x}-{finished.context.span_id:016x}-01".encode()
    assert (sent.topic, sent.partition, sent.msg_id) == (record.topic, record.partition, record.msg_id)


def test_a_copy_keeps_the_records_baggage(otel_spans):
    headers = [(Header.MSG_ID, b"ID-1"), ("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
               ("baggage", b"tenant=acme")]
    _span, out = otel.outgoing(Record("orders", 0, None, b"x", headers, "ID-1"), "forward")
    assert dict(out.headers)["baggage"] == b"tenant=acme"  # a forward, retry or commit continues it, as the trace


def test_plumbing_records_get_no_span_and_a_real_message_of_a_transaction_is_a_commit():
    assert operation_of(Record("op", 0, None, b"", [(Header.TRANSACTION_ID, b"T")], "T@1")) is None
    assert operation_of(Record("orders", 0, None, b"", [(Header.MSG_ID, b"T"), (Header.TRANSACTION_ID, b"T")],
                               "T")) == "commit"
    assert operation_of(Record("half", 0, None, b"", [(Header.MSG_ID, b"T"), (Header.TRANSACTION, b"true"),
                                                      (Header.TRANSACTION_ID, b"T")], "T")) == "send"


def test_tracing_off_imports_no_tracing_module():
    code = ("import sys, rocketkafka\n"
            "from rocketkafka import Producer, PushConsumer, Settings\n"
            "from rocketkafka.delay.forwarder import DelayForwarder\n"
            "from rocketkafka.txn.checker import TransactionChecker\n"
            "p = Producer('pg', {'bootstrap.servers': '127.0.0.1:1'})\n"
            "c = PushConsumer('g', {'bootstrap.servers': '127.0.0.1:1'}, redis_urls=['redis://127.0.0.1:1'])\n"
            "assert not p.otel and not Settings(bootstrap_servers='x').otel\n"
            "print(sorted(m for m in sys.modules if m.startswith('rocketkafka.otel')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin"})
    # rocketkafka's tracing modules only (redis-py >= 7 imports the OpenTelemetry API itself when installed)
    assert out.stdout.strip() == "[]"


def test_turned_on_without_the_package_names_the_extra():
    code = ("import sys; sys.modules['opentelemetry'] = None\n"
            "from rocketkafka.errors import ConfigError\n"
            "try:\n    import rocketkafka.otel\nexcept ConfigError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'rocketkafka[otel]'" in out.stdout


def test_the_switch_settings_environment_and_keyword(monkeypatch):
    from rocketkafka import Producer, Settings
    from rocketkafka.ordering.engine.options import ConsumerOptions

    monkeypatch.setenv("ROCKETKAFKA_OTEL", "1")
    on = Settings(bootstrap_servers="127.0.0.1:1")
    assert on.otel and Producer("pg", settings=on).otel and not Producer("pg", settings=on, otel=False).otel
    assert ConsumerOptions().otel_on(on.otel) and not ConsumerOptions(otel=False).otel_on(True)
    assert ConsumerOptions(otel=True).otel_on(False)
