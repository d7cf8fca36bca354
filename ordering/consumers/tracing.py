"""Trace events of a consumer (``PushConsumer(trace=True)``): ``DELIVERED`` and ``CONSUMED`` around the
listener; and its OpenTelemetry process spans (``otel=True``: :func:`otel_listeners`).

The consumer wraps each subscription's listener when it starts with tracing on, so the
listener loop itself is the same with tracing on or off: off, nothing here runs. An
event that cannot be made (a garbled record) is skipped; the listener is called all the
same and the record takes its usual way to the dead-letter topic.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from rocketkafka.config import Settings
from rocketkafka.errors import MalformedRecordError
from rocketkafka.message import ConsumeOrderlyStatus, ConsumeStatus, MessageExt
from rocketkafka.ordering.consumers.subscriptions import Subscriptions
from rocketkafka.ordering.engine.options import ConsumerOptions
from rocketkafka.trace import CONSUMED, DELIVERED, Tracer


def _status(answer: Any) -> str:
    if answer is None or answer is ConsumeStatus.CONSUME_SUCCESS or answer is ConsumeOrderlyStatus.SUCCESS:
        return "SUCCESS"
    if isinstance(answer, (ConsumeStatus, ConsumeOrderlyStatus)):
        return answer.name
    if hasattr(answer, "add_done_callback"):
        return "PENDING"  # an orderly listener's future: handled when it resolves
    return type(answer).__name__


class ListenerTrace:
    """Wraps listeners of one consumer so every call is traced.

    Parameters:
        tracer: where events go.
        group: the consumer group.
        member: the consumer's instance name (which member got the message).
    """

    def __init__(self, tracer: Tracer, group: str, member: str) -> None:
        self.tracer, self.group, self.member = tracer, group, member

    def _delivered(self, msg: MessageExt) -> str | None:
        try:
            msg_id = msg.id
            fields = {"topic": msg.topic, "partition": msg.queue_id, "offset": msg.queue_offset,
                      "reconsume_times": msg.reconsume_times, "tags": msg.tags}
        except MalformedRecordError:
            return None
        self.tracer.emit(DELIVERED, msg_id, group=self.group, member=self.member, **fields)
        return msg_id

    def _consumed(self, msg_id: str | None, status: str, started: float) -> None:
        if msg_id is not None:
            self.tracer.emit(CONSUMED, msg_id, group=self.group, member=self.member, status=status,
                             elapsed_ms=round((time.monotonic() - started) * 1000, 3))

    def listener(self, listener: Callable[[MessageExt], Any]) -> Callable[[MessageExt], Any]:
        """``listener`` with ``DELIVERED`` before and ``CONSUMED`` (status, time) after each call."""
        def traced(msg: MessageExt) -> Any:
            msg_id, started = self._delivered(msg), time.monotonic()
            try:
                answer = listener(msg)
            except Exception as exc:
                self._consumed(msg_id, f"FAILED: {type(exc).__name__}: {exc}"[:300], started)
                raise
            self._consumed(msg_id, _status(answer), started)
            return answer

        return traced

    def batch_listener(self, listener: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """A batch listener traced per message (the batch's answer is each message's status)."""
        def traced(batch: Any) -> Any:
            ids, started = [self._delivered(msg) for msg in batch], time.monotonic()
            try:
                answer = listener(batch)
            except Exception as exc:
                status = f"FAILED: {type(exc).__name__}: {exc}"[:300]
                for msg_id in ids:
                    self._consumed(msg_id, status, started)
                raise
            for msg_id in ids:
                self._consumed(msg_id, _status(answer), started)
            return answer

        return traced


def otel_listeners(subscriptions: Subscriptions, group: str, options: ConsumerOptions, settings: Settings) -> bool:
    """Wrap every listener of ``subscriptions`` in OpenTelemetry process spans when tracing is on
    (:meth:`ConsumerOptions.otel_on`, else ``Settings.otel``); returns whether it is on.

    Called once when the consumer starts: off, the listeners stay as they are and OpenTelemetry is
    not imported. A per-message listener's span is the parent of the message's retry or
    dead-letter copy (:meth:`rocketkafka.otel.Processing.failed`); a batch listener's one span links
    to each message's context (OpenTelemetry's batch convention), and its copies continue each
    message's own trace.
    """
    if not options.otel_on(settings.otel):
        return False
    from rocketkafka.otel import SYSTEM, Processing, SpanKind, linked, tracer

    model = options.message_model.value.lower()

    def traced(listener: Callable[[MessageExt], Any]) -> Callable[[MessageExt], Any]:
        def process(msg: MessageExt) -> Any:
            with Processing(msg, group, model) as span:
                try:
                    answer = listener(msg)
                except Exception as exc:
                    span.failed(msg, f"{type(exc).__name__}: {exc}")
                    raise
                status = _status(answer)
                if status not in ("SUCCESS", "PENDING"):
                    span.failed(msg, status)
                return answer

        return process

    def traced_batch(listener: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def process(batch: Any) -> Any:
            attrs: dict[str, Any] = {"messaging.system": SYSTEM, "messaging.operation.name": "process",
                     "messaging.operation.type": "process", "messaging.batch.message_count": len(batch),
                     "messaging.consumer.group.name": group, "rocketmq.consumption_model": model}
            if len(batch):
                attrs["messaging.destination.name"] = batch[0].topic
            with tracer().start_as_current_span(f"process {attrs.get('messaging.destination.name', '')}",
                                                     kind=SpanKind.CONSUMER, attributes=attrs,
                                                     links=linked(batch)):
                return listener(batch)

        return process

    for sub in list(subscriptions.by_topic.values()):
        listener = traced_batch(sub.listener) if sub.batch_size else traced(sub.listener)
        subscriptions.add(dataclasses.replace(sub, listener=listener))
    return True
