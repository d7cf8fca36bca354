"""OpenTelemetry tracing across every hop: W3C trace context in Kafka headers, and the spans of each hop.

Off by default: ``otel=True`` on a producer or consumer turns it on for that client, ``Settings.otel``
(``ROCKETKAFKA_OTEL=1``) for every client made with those settings, the sidecars included. Only a
client that is on imports this module, so with tracing off rocketkafka imports no OpenTelemetry
(redis-py 7 may, on its own) and no message does any tracing work: clients pick their traced
code paths when they start, as the message trace (:mod:`rocketkafka.trace`) does.

The context travels as opentelemetry-instrumentation-confluent-kafka carries it: the global
propagator (W3C ``traceparent`` / ``tracestate`` by default) writes plain Kafka headers with
UTF-8 bytes values, so a plain confluent-kafka reader or writer, instrumented or not,
continues the same trace. Every hop rocketkafka adds re-injects the context of its own span
into the record it writes, so one message is one trace through the delay topics and the
forwarder, the retry topic, the dead-letter topic, the half topic and the checker:

=====================  ========  =====================================================  ======================
span name              kind      parent                                                 emitted by
=====================  ========  =====================================================  ======================
``send <topic>``       PRODUCER  the current span (a send from a listener: its process)  producers, the half send
``process <topic>``    CONSUMER  the record's context                                   ``PushConsumer`` listeners
``send <retry|dlq>``   PRODUCER  the process span (its context is put in the copy)       retry and dead-letter copies
``forward <topic>``    PRODUCER  the record's context                                   the delay forwarder
``check <topic>``      INTERNAL  the half's context                                     the transaction checker
``commit <topic>``     PRODUCER  the half's context (the check-back's, if checked)      the end of a transaction
=====================  ========  =====================================================  ======================

Attributes follow OpenTelemetry's messaging conventions (``messaging.system`` is ``kafka``:
the records are Kafka records, read by Kafka tools) with RocketMQ's (``rocketmq.message.tag``,
``.keys``, ``.type`` normal/fifo/delay/transaction, ``.delay_time_level``, ``.delivery_timestamp``,
``rocketmq.consumption_model``). Spans go to whatever tracer provider the application set
(``opentelemetry.trace.set_tracer_provider``); without one the API's no-op provider drops them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from rocketkafka.errors import ConfigError

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
    from opentelemetry.propagators.textmap import Getter, Setter
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - the message is the point; tests/unit/test_otel.py checks it
    raise ConfigError("OpenTelemetry tracing is on (otel=True or ROCKETKAFKA_OTEL=1) but opentelemetry-api is not "
                      "installed: pip install 'rocketkafka[otel]'") from exc

from rocketkafka.names import Header
from rocketkafka.record import Record

Headers = Sequence[tuple[str, "bytes | None"]]

#: ``messaging.system``: the records are Kafka records (as opentelemetry-instrumentation-confluent-kafka says).
SYSTEM = "kafka"
#: The instrumentation scope of every span.
SCOPE = "rocketkafka"

try:  # the scope's version (not ``rocketkafka.__version__``: the package's face imports every layer)
    _VERSION = version("rocketkafka")
except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    _VERSION = "0+unknown"

_TRACER = trace.get_tracer(SCOPE, _VERSION)

#: The headers the W3C propagators write (others a configured propagator uses are handled the same way).
TRACE_HEADERS = frozenset({"traceparent", "tracestate", "baggage"})


class _Getter(Getter[Headers]):
    """Reads a context from a Kafka header list, as opentelemetry-instrumentation-confluent-kafka's getter."""

    def get(self, carrier: Headers, key: str) -> list[str] | None:
        values = [v.decode("utf-8", "replace") for k, v in carrier if k == key and v is not None]
        return values or None

    def keys(self, carrier: Headers) -> list[str]:
        return [k for k, _ in carrier]


class _Setter(Setter[list[tuple[str, "bytes | None"]]]):
    """Writes a context into a Kafka header list, values as UTF-8 bytes (the instrumentation's setter)."""

    def set(self, carrier: list[tuple[str, bytes | None]], key: str, value: str) -> None:
        carrier.append((key, value.encode()))


_GETTER, _SETTER = _Getter(), _Setter()


def extract(headers: Headers | None) -> otel_context.Context:
    """The context a record's headers carry (an empty one when they carry none)."""
    return propagate.extract(headers or (), getter=_GETTER)


def inject(headers: Headers | None, context: otel_context.Context | None = None) -> list[tuple[str, bytes | None]]:
    """``headers`` with the trace context of ``context`` (default: the current one) in place of any they had.

    A record copied from another (a retry copy, a forwarded or committed message) carries its
    source's trace headers; they are replaced, never duplicated, so a reader takes the new span as parent.
    """
    carrier: list[tuple[str, bytes | None]] = []
    propagate.inject(carrier, context=context, setter=_SETTER)
    written = {k for k, _ in carrier} | TRACE_HEADERS if carrier else set()
    return [(k, v) for k, v in headers or () if k not in written] + carrier


def _text(headers: Headers) -> dict[str, str]:
    return {k: v.decode("utf-8", "replace") for k, v in headers if v is not None and k in _READ}


_READ = frozenset({Header.TAGS, Header.KEYS, Header.MSG_ID, Header.DELAY_LEVEL, Header.DELIVER_AT, Header.REAL_TOPIC,
                   Header.TRANSACTION, Header.TRANSACTION_ID, Header.SHARDING_KEY, Header.RECONSUME_TIMES})


def message_type(h: dict[str, str]) -> str:
    """RocketMQ's message type of a record whose system headers are ``h``: transaction, delay, fifo or normal."""
    if Header.TRANSACTION in h or Header.TRANSACTION_ID in h:
        return "transaction"
    if Header.DELIVER_AT in h or Header.DELAY_LEVEL in h:
        return "delay"
    if Header.SHARDING_KEY in h:
        return "fifo"
    return "normal"


def attributes(topic: str, headers: Headers, operation: str, op_type: str, key: bytes | None = None,
               partition: int | None = None, offset: int | None = None, h: dict[str, str] | None = None) -> dict[str, Any]:
    """The semantic-convention attributes of a span about one record of ``topic`` (``h``: its system headers, read
    already)."""
    h = _text(headers) if h is None else h
    attrs: dict[str, Any] = {"messaging.system": SYSTEM, "messaging.destination.name": topic,
                             "messaging.operation.name": operation, "messaging.operation.type": op_type,
                             "rocketmq.message.type": message_type(h)}
    if Header.MSG_ID in h:
        attrs["messaging.message.id"] = h[Header.MSG_ID]
    if Header.TAGS in h:
        attrs["rocketmq.message.tag"] = h[Header.TAGS]
    if h.get(Header.KEYS):
        attrs["rocketmq.message.keys"] = h[Header.KEYS].split()
    level = h.get(Header.DELAY_LEVEL)
    if level and level.isdigit():
        attrs["rocketmq.message.delay_time_level"] = int(level)
    due = h.get(Header.DELIVER_AT)
    if due and due.isdigit():
        attrs["rocketmq.message.delivery_timestamp"] = int(due)
    times = h.get(Header.RECONSUME_TIMES)
    if times and times.isdigit():
        attrs["rocketmq.message.reconsume_times"] = int(times)  # not in the conventions; what a retry is
    if Header.TRANSACTION_ID in h:
        attrs["rocketmq.message.transaction_id"] = h[Header.TRANSACTION_ID]
    if key is not None:
        attrs["messaging.kafka.message.key"] = key.decode("utf-8", "replace")
    if partition is not None and partition >= 0:
        attrs["messaging.destination.partition.id"] = str(partition)
    if offset is not None and offset >= 0:
        attrs["messaging.kafka.offset"] = offset
    return attrs


def tracer() -> trace.Tracer:
    """rocketkafka's tracer of the global tracer provider.

    Made once: before the application sets a provider it is the API's proxy, which uses the provider
    once one is set (asking the SDK's provider per span took a third of a traced send's time).
    """
    return _TRACER


def outgoing(record: Record, operation: str = "send", parent: otel_context.Context | None = None,
             kind: SpanKind = SpanKind.PRODUCER, topic: str | None = None) -> tuple[Span, Record]:
    """Start the span of writing ``record`` and return it with the record carrying its context.

    The parent is ``parent`` when given, else the context the record carries (a copy keeps its
    source's: a forward, a commit), else the current one (a send from inside a listener). The
    span is named ``"<operation> <topic>"``; ``topic`` (default: the record's ``rk.REAL_TOPIC`` or
    its own) is the destination a user knows the message by. End it with :func:`finish`.
    """
    h = _text(record.headers)
    topic = topic or h.get(Header.REAL_TOPIC) or record.topic
    if parent is None and any(k in TRACE_HEADERS for k, _ in record.headers):
        parent = extract(record.headers)
    attrs = attributes(topic, record.headers, operation, "send" if kind is SpanKind.PRODUCER else operation,
                       record.key, record.partition if topic == record.topic else None, h=h)
    span = tracer().start_span(f"{operation} {topic}", context=parent, kind=kind, attributes=attrs)
    headers = inject(record.headers, trace.set_span_in_context(span, parent))  # parent's baggage goes on with it
    return span, Record(record.topic, record.partition, record.key, record.value, headers, record.msg_id)


def finish(span: Span, err: Any = None, kmsg: Any = None) -> None:
    """End a send span from its delivery report: where the record was stored, or why it was not."""
    if err is not None:
        span.set_status(Status(StatusCode.ERROR, str(err)))
        span.set_attribute("error.type", type(err).__name__ if not hasattr(err, "name") else str(err.name()))
    elif kmsg is not None:
        span.set_attribute("messaging.destination.partition.id", str(kmsg.partition()))
        span.set_attribute("messaging.kafka.offset", kmsg.offset())
    span.end()


class Processing:
    """The process span of one consumed message, current while its listener runs (``with``).

    Parameters:
        msg: the message (its headers give the parent context).
        group: the consumer group (``messaging.consumer.group.name``).
        model: ``clustering`` or ``broadcasting`` (``rocketmq.consumption_model``).
    """

    __slots__ = ("span", "_parent", "_token")

    def __init__(self, msg: Any, group: str, model: str) -> None:
        headers = msg.headers
        attrs = attributes(msg.topic, headers, "process", "process", msg.key, msg.queue_id, msg.queue_offset)
        attrs["messaging.consumer.group.name"] = group
        attrs["rocketmq.consumption_model"] = model
        self._parent = extract(headers)  # the message's context: its baggage stays current inside the listener
        self.span = tracer().start_span(f"process {msg.topic}", context=self._parent, kind=SpanKind.CONSUMER,
                                        attributes=attrs)
        self._token: Any = None

    def __enter__(self) -> Processing:
        self._token = otel_context.attach(trace.set_span_in_context(self.span, self._parent))
        return self

    def __exit__(self, *exc: object) -> None:
        otel_context.detach(self._token)
        self.span.end()

    def failed(self, msg: Any, reason: str) -> None:
        """The listener failed: the message's headers now carry this span, so its retry or dead-letter copy
        (written after the listener returns, from these headers) is this span's child."""
        self.span.set_status(Status(StatusCode.ERROR, reason[:300]))
        msg.headers[:] = inject(msg.headers, trace.set_span_in_context(self.span, self._parent))


def checking(headers: Headers, topic: str, group: str) -> list[tuple[str, bytes | None]]:
    """The check-back of a half message (the checker's ``check`` span, child of the half's context, ended at
    once: it marks the decision to ask); returns the half's headers carrying it, for its copy and request."""
    attrs = attributes(topic, headers, "check", "process")
    attrs["rocketmq.client_group"] = group
    parent = extract(headers)
    span = tracer().start_span(f"check {topic}", context=parent, kind=SpanKind.INTERNAL, attributes=attrs)
    try:
        return inject(headers, trace.set_span_in_context(span, parent))
    finally:
        span.end()


def linked(messages: Iterable[Any]) -> list[trace.Link]:
    """Links to the contexts of ``messages`` (a batch's process span: one span, many parents)."""
    links = []
    for msg in messages:
        span_context = trace.get_current_span(extract(msg.headers)).get_span_context()
        if span_context.is_valid:
            links.append(trace.Link(span_context))
    return links
