"""Re-consumption and dead letters (RocketMQ's ``sendMessageBack``).

A message the listener could not handle is copied to the group's retry topic
with ``reconsume_times + 1``; after ``max_reconsume_times`` it goes to the
group's dead-letter topic instead, with where it came from and the last error in
headers. Copies keep body, key, user headers, tags, keys and the message id.
The caller commits the original offset only after :meth:`Reconsumer.send_back`
returned, i.e. once the copy is durably produced.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from rocketkafka.errors import MalformedRecordError
from rocketkafka.exactly_once import transaction_producer
from rocketkafka.headers import record_id
from rocketkafka.logs import message_fields, record_fields
from rocketkafka.message import MessageExt
from rocketkafka.names import Header
from rocketkafka.record import Record, produce_waiting
from rocketkafka.sender import Sender
from rocketkafka.trace import DEAD_LETTERED, RETRIED, Tracer

log = logging.getLogger(__name__)

_REWRITTEN = {Header.RECONSUME_TIMES, Header.ORIGIN_TOPIC, Header.ORIGIN_QUEUE_ID, Header.ORIGIN_OFFSET,
              Header.ORIGIN_MSG_ID, Header.LAST_ERROR, Header.DLQ_REASON}


class Reconsumer:
    """Sends failed messages back for a later try, or to the dead-letter topic.

    Parameters:
        sender: the producer engine that writes the copies.
        group: consumer group (names the retry and dead-letter topics).
        max_reconsume_times: tries after the first before dead-lettering (RocketMQ: 16).
        retry_router: optional ``(record, reconsume_times) -> record`` that delays the copy
            (the delay package routes it through level ``3 + reconsume_times``).
        tracer: writes ``RETRIED`` / ``DEAD_LETTERED`` trace events (:mod:`rocketkafka.trace`).
        otel: write each copy in an OpenTelemetry span (:mod:`rocketkafka.otel`), the copy carrying its context.
    """

    def __init__(self, sender: Sender, group: str, max_reconsume_times: int = 16,
                 retry_router: Callable[[Record, int], Record] | None = None, tracer: Tracer | None = None,
                 otel: bool = False) -> None:
        if max_reconsume_times < 0:
            raise ValueError("max_reconsume_times must be >= 0")
        self.sender = sender
        self.group = group
        self.max_reconsume_times = max_reconsume_times
        self.retry_router = retry_router
        self.tracer = tracer
        self.retry_topic = sender.settings.topics.retry(group)
        self.dlq_topic = sender.settings.topics.dead_letter(group)
        self._counts: Counter[tuple[str, str]] = Counter()  # (retried | dead_lettered, original topic) -> copies
        self._counted = threading.Lock()  # workers write copies concurrently (a rare path: a lock is fine)
        self._write: Callable[[Record], None] = self._write_now
        if otel:  # chosen once: off, OpenTelemetry is never imported
            from rocketkafka.otel_sender import traced_write

            self._write = traced_write(self._write_now)

    def _write_now(self, record: Record) -> None:
        """Write a copy: into this thread's Kafka transaction when a handler runs in one (it commits with the
        consumed offset: :mod:`rocketkafka.exactly_once`), else at once, waiting for the ack."""
        producer = transaction_producer()
        if producer is not None:
            produce_waiting(producer, record)
        else:
            self.sender.send_sync(record)

    def counts(self) -> dict[tuple[str, str], int]:
        """Copies written since start: ``{("retried" | "dead_lettered", original topic): n}`` (any thread)."""
        with self._counted:
            return dict(self._counts)

    def _count(self, kind: str, topic: str) -> None:
        with self._counted:
            self._counts[(kind, topic)] += 1

    def send_back(self, msg: MessageExt, error: str | None) -> str:
        """Write the retry or dead-letter copy of ``msg`` and wait for the ack; returns the topic written."""
        times = msg.reconsume_times + 1
        if times > self.max_reconsume_times:
            self.dead_letter(msg, f"max reconsume times {self.max_reconsume_times} reached: {error}")
            return self.dlq_topic
        record = self._copy(msg, self.retry_topic, {Header.RECONSUME_TIMES: str(times)}, error)
        if self.retry_router:
            record = self.retry_router(record, times)
        self._write(record)
        self._count("retried", msg.topic)
        if self.tracer is not None:
            routed = {k: v.decode() for k, v in record.headers if k in (Header.DELIVER_AT, Header.DELAY_LEVEL) and v}
            self.tracer.emit(RETRIED, msg.id, group=self.group, topic=msg.topic, to_topic=self.retry_topic,
                             reconsume_times=times, reason=(error or "")[:300],
                             level=int(routed[Header.DELAY_LEVEL]) if Header.DELAY_LEVEL in routed else None,
                             due=int(routed[Header.DELIVER_AT]) if Header.DELIVER_AT in routed else None)
        log.debug("sent %s back for try %d: %s", msg.id, times + 1, error, extra=message_fields(msg))
        return self.retry_topic

    def dead_letter(self, msg: MessageExt, reason: str) -> None:
        """Write ``msg`` to the dead-letter topic with ``reason``."""
        log.warning("dead-lettering %s from %s[%d]@%d: %s", msg.id, msg.topic, msg.queue_id, msg.queue_offset, reason,
                    extra=message_fields(msg))
        self._write(self._copy(msg, self.dlq_topic, {Header.DLQ_REASON: reason,
                                                               Header.RECONSUME_TIMES: str(msg.reconsume_times)}, reason))
        self._count("dead_lettered", msg.topic)
        if self.tracer is not None:
            self.tracer.emit(DEAD_LETTERED, msg.id, group=self.group, topic=msg.topic, to_topic=self.dlq_topic,
                             reconsume_times=msg.reconsume_times, reason=reason[:300])

    def dead_letter_raw(self, record: Any, error: MalformedRecordError) -> None:
        """Write a record that could not be decoded to the dead-letter topic, headers untouched."""
        log.error("dead-lettering malformed record: %s", error, extra=record_fields(record))
        headers = list(record.headers() or []) + [
            (Header.DLQ_REASON, str(error).encode()),
            (Header.ORIGIN_TOPIC, record.topic().encode()),
            (Header.ORIGIN_QUEUE_ID, str(record.partition()).encode()),
            (Header.ORIGIN_OFFSET, str(record.offset()).encode()),
        ]
        self._write(Record(self.dlq_topic, -1, record.key(), record.value() or b"", headers,
                                     f"{record.topic()}@{record.partition()}@{record.offset()}"))
        self._count("dead_lettered", record.topic())
        if self.tracer is not None:
            self.tracer.emit(DEAD_LETTERED, record_id(record), group=self.group, topic=record.topic(),
                             partition=record.partition(), offset=record.offset(), to_topic=self.dlq_topic,
                             reason=str(error)[:300])

    def _copy(self, msg: MessageExt, topic: str, extra: dict[str, str], error: str | None) -> Record:
        origin = {
            Header.ORIGIN_TOPIC: msg.get_property(Header.ORIGIN_TOPIC) or msg.topic,
            Header.ORIGIN_QUEUE_ID: msg.get_property(Header.ORIGIN_QUEUE_ID) or str(msg.queue_id),
            Header.ORIGIN_OFFSET: msg.get_property(Header.ORIGIN_OFFSET) or str(msg.queue_offset),
            Header.ORIGIN_MSG_ID: msg.id,
            **extra,
        }
        if error:
            origin[Header.LAST_ERROR] = error[:1000]
        kept = [(k, v) for k, v in msg.headers if k not in _REWRITTEN and k not in origin]
        if not any(k == Header.MSG_ID for k, _ in kept):
            kept.append((Header.MSG_ID, msg.id.encode()))
        headers = kept + [(k, v.encode()) for k, v in origin.items()]
        return Record(topic, -1, msg.key, msg.body, headers, msg.id)
