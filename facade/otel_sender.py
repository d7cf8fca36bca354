"""Sending with OpenTelemetry spans: the send engine, a confluent-kafka producer and a copy writer that trace each
record they write (:mod:`rocketkafka.otel`).

A client with tracing on sends through these instead of the plain ones; chosen when it starts,
so a client with tracing off has no extra work per message (and never imports OpenTelemetry).
Each one starts the record's span, writes the record carrying the span's context in its
headers, and ends the span when the broker acknowledges the record (or refuses it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError

from rocketkafka.names import Header
from rocketkafka.observed_sender import ObservedSender
from rocketkafka.otel import finish, outgoing
from rocketkafka.record import Record


def operation_of(record: Record) -> str | None:
    """What writing ``record`` is: ``send``, ``commit`` (the real message of an ended transaction), or ``None`` for
    plumbing that is no message (op records, the checker's probes: no message id), which gets no span."""
    names = {k for k, _ in record.headers}
    if Header.MSG_ID not in names:
        return None
    if Header.TRANSACTION_ID in names and Header.TRANSACTION not in names:
        return "commit"
    return "send"


class OtelSender(ObservedSender):
    """A :class:`~rocketkafka.observed_sender.ObservedSender` whose every message write is a PRODUCER span.

    Producers with tracing on send through it (user messages, a transaction's half and its
    commit), and consumers write their retry and dead-letter copies with it.
    """

    def produce(self, record: Record, on_delivery: Callable[[KafkaError | None, Any], None] | None = None) -> None:
        operation = operation_of(record)
        if operation is None:
            return super().produce(record, on_delivery)
        span, record = outgoing(record, operation)

        def delivered(err: KafkaError | None, kmsg: Any) -> None:
            finish(span, err, kmsg)
            if on_delivery is not None:
                on_delivery(err, kmsg)

        try:
            super().produce(record, delivered)
        except BaseException as exc:  # refused before it was queued: no report will come
            finish(span, exc)
            raise


class OtelProducer:
    """A confluent-kafka producer whose ``produce`` traces each record (the delay forwarder's ``forward`` spans).

    Parameters:
        producer: the producer (or a wrapper of one, such as the message trace's) to write with.
        operation: the spans' operation name.
    """

    def __init__(self, producer: Any, operation: str = "forward") -> None:
        self._producer, self._operation = producer, operation

    def produce(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> None:
        """``producer.produce``, the record carrying the span's context; the span ends at its delivery report."""
        record = Record(topic, kwargs.get("partition", -1), key, value, kwargs.get("headers") or [], "")
        span, record = outgoing(record, self._operation)
        on_delivery = kwargs.get("on_delivery")

        def delivered(err: Any, kmsg: Any) -> None:
            finish(span, err, kmsg)
            if on_delivery is not None:
                on_delivery(err, kmsg)

        try:
            self._producer.produce(topic, value, key, **{**kwargs, "headers": record.headers, "on_delivery": delivered})
        except BufferError:  # the queue is full: the caller waits for room and produces again, a span of its own;
            raise            # this one is left unended, so it is never exported (no error span for a wait)
        except BaseException as exc:  # refused at once
            finish(span, exc)
            raise

    def __getattr__(self, name: str) -> Any:  # poll, flush, len, transactions: the producer's own
        return getattr(self._producer, name)


def traced_write(write: Callable[[Record], None]) -> Callable[[Record], None]:
    """``write`` (a retry or dead-letter copy's) inside the copy's span: a child of the process span whose context
    the failed message carries (:meth:`rocketkafka.otel.Processing.failed`); the copy carries the send span."""
    def traced(record: Record) -> None:
        span, record = outgoing(record, "send")
        try:
            write(record)
        except BaseException as exc:
            finish(span, exc)
            raise
        finish(span)

    return traced
