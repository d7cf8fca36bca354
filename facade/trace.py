"""Message trace (RocketMQ's msg trace): the life of a message as events on a trace topic.

Opt-in per client (``Producer(trace=True)``, ``PushConsumer(trace=True)``,
``DelayForwarder(trace=True)``). Each step of a message's life is one event:

==================  ==============================================================
``SENT``            a producer stored it (topic, partition, offset, tags, keys)
``DELAYED``         it waits on a delay level (level, due time)
``FORWARDED``       the forwarder delivered it to its topic when due (or ``HOPPED``
                    it to the next delay topic)
``DELIVERED``       a consumer member handed it to its listener (group, member)
``CONSUMED``        the listener answered (status, time spent)
``RETRIED``         it was sent back for a later try (reconsume times)
``DEAD_LETTERED``   it went to the group's dead-letter topic (reason)
==================  ==============================================================

Events are JSON objects (:data:`TRACE_FIELDS`), keyed by message id and written to the
partition ``murmur2(msg_id)`` of ``<prefix>.trace``, so one message's events are in one
partition, in order. Writing is asynchronous: :meth:`Tracer.emit` appends to a bounded
queue (:class:`~rocketkafka.background.BackgroundQueue`) and returns; a thread encodes
and produces. A full queue or an unreachable trace topic drops events (counted, logged),
never blocks or fails the message. With tracing off nothing of this runs: clients pick
their traced code paths when they start.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from typing import Any, Final

from confluent_kafka import Producer as _KafkaProducer

from rocketkafka.admin import TopicAdmin
from rocketkafka.background import BackgroundQueue
from rocketkafka.config import Settings
from rocketkafka.murmur2 import murmur2

log = logging.getLogger(__name__)

SENT: Final = "SENT"
DELAYED: Final = "DELAYED"
FORWARDED: Final = "FORWARDED"
HOPPED: Final = "HOPPED"
DELIVERED: Final = "DELIVERED"
CONSUMED: Final = "CONSUMED"
RETRIED: Final = "RETRIED"
DEAD_LETTERED: Final = "DEAD_LETTERED"

#: Every field an event may carry (JSON keys; absent fields are null), for readers such as Spark.
TRACE_FIELDS: Final = ("msg_id", "event", "ts", "client", "host", "topic", "partition", "offset", "tags", "keys",
                       "group", "member", "level", "due", "to_topic", "to_partition", "status", "elapsed_ms",
                       "reconsume_times", "reason")

#: Partitions of the trace topic when a tracer creates it.
TRACE_PARTITIONS = 4


def trace_partition(msg_id: str, partitions: int) -> int:
    """The trace partition holding ``msg_id``'s events."""
    return (murmur2(msg_id.encode()) & 0x7FFFFFFF) % partitions


class Tracer:
    """Writes trace events of one client to the trace topic, in the background.

    Parameters:
        settings: broker and topic prefix (the topic is ``settings.topics.trace()``).
        client: names the client in every event (``"producer pg"``, ``"consumer c1 of group g"``).
        capacity: events queued at most; more are dropped (:attr:`dropped`).
    """

    def __init__(self, settings: Settings, client: str, capacity: int = 100_000) -> None:
        self.topic, self.client, self.host = settings.topics.trace(), client, f"{socket.gethostname()}@{os.getpid()}"
        admin = TopicAdmin(settings)
        admin.create_internal({self.topic: TRACE_PARTITIONS})
        self._partitions = admin.partitions(self.topic)
        self._kafka: _KafkaProducer | None = _KafkaProducer(settings.kafka_config(**{"linger.ms": 20, "acks": 1}))
        self._errors: set[str] = set()
        self._queue: BackgroundQueue[tuple[str, str, int, dict[str, Any]]] = BackgroundQueue(
            "trace", self._write, capacity)

    @property
    def dropped(self) -> int:
        """Events lost: the queue was full, or the broker refused them."""
        return self._queue.dropped

    def emit(self, event: str, msg_id: str, **fields: Any) -> None:
        """Record ``event`` of ``msg_id`` now; returns at once, never raises."""
        self._queue.put((event, msg_id, time.time_ns() // 1_000_000, fields))

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until the events emitted so far are written (tests, shutdown)."""
        self._queue.flush(timeout)
        if self._kafka is not None:
            self._kafka.flush(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued (up to ``timeout`` s), then let the producer go (see ``TopicAdmin.close``)."""
        self._queue.close(timeout)
        kafka, self._kafka = self._kafka, None
        remaining = kafka.flush(timeout) if kafka is not None else 0
        if remaining:
            log.warning("trace: %d event(s) not written at close", remaining)

    def _write(self, items: list[tuple[str, str, int, dict[str, Any]]]) -> None:
        kafka = self._kafka
        if kafka is None:  # closed: the queue is closed too, so this is only a race with close()
            return
        produce, partitions = kafka.produce, self._partitions
        for event, msg_id, ts, fields in items:
            value = json.dumps({"msg_id": msg_id, "event": event, "ts": ts, "client": self.client, "host": self.host,
                                **fields}, separators=(",", ":"), default=str)
            try:
                produce(self.topic, value.encode(), msg_id.encode(), partition=trace_partition(msg_id, partitions),
                        on_delivery=self._delivered)
            except BufferError:
                self._queue.dropped += 1
        kafka.poll(0)

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self._queue.dropped += 1
            if err.str() not in self._errors:
                self._errors.add(err.str())
                log.warning("trace: writing to %s failed: %s", self.topic, err.str())
