"""The send engine behind both producer doors: validate, encode, choose a partition, produce.

Everything that can be wrong with a message is checked before the first byte
reaches librdkafka, so a bad call raises and sends nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Producer as _KafkaProducer

from facade.admin import TopicAdmin
from facade.codec import encode_headers
from facade.config import Settings
from facade.errors import MessageTooLargeError, SendError, StateError
from facade.message import Message, SendResult, SendStatus
from facade.msgid import new_msg_id_at
from facade.names import Header
from facade.selectors import Selector, select_partition

log = logging.getLogger(__name__)

#: librdkafka's default ``message.max.bytes``.
DEFAULT_MAX_MESSAGE_BYTES = 1_000_000
_HEADER_OVERHEAD = 8  # per header, rough upper bound of the record framing


@dataclass(slots=True)
class Record:
    """A message ready for Kafka: where it goes and what it carries."""

    topic: str
    partition: int  # -1: let the partitioner choose
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]
    msg_id: str


class Sender:
    """Owns one confluent-kafka producer and turns :class:`Message` objects into records.

    Parameters:
        settings: broker address and internal topic names.
        producer_config: extra confluent-kafka producer settings.
        group_id: producer group (stamped on transactional and check-back records).
    """

    def __init__(self, settings: Settings, producer_config: dict[str, Any] | None = None, group_id: str | None = None) -> None:
        self.settings = settings
        self.group_id = group_id
        config = settings.kafka_config(**{"linger.ms": 5, "enable.idempotence": True, **(producer_config or {})})
        self.max_bytes = int(config.get("message.max.bytes", DEFAULT_MAX_MESSAGE_BYTES))
        self.admin = TopicAdmin(settings)
        self.kafka = _KafkaProducer(config)
        self._closed = False
        self._partitions: dict[str, tuple[float, int]] = {}
        self._delay_router = None  # built on first delayed send (the delay package's seam)

    # -- preparing -------------------------------------------------------------------
    def partitions(self, topic: str) -> int:
        """Partition count of an existing topic (cached); :class:`TopicNotFoundError` otherwise."""
        cached = self._partitions.get(topic)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        count = self.admin.partitions(topic)
        self._partitions[topic] = (time.monotonic() + 30.0, count)
        return count

    def prepare(self, msg: Message, selector: Selector | None = None, arg: Any = None,
                sharding_key: str | None = None, system: dict[str, str] | None = None) -> Record:
        """Validate and encode ``msg``; nothing is sent.

        Raises:
            MessageError, TopicNotFoundError, SelectorError, DelayError: the message cannot be sent as given.
        """
        if self._closed:
            raise StateError("producer is shut down")
        msg.validate()
        partitions = self.partitions(msg.topic)
        partition = select_partition(selector, partitions, msg, arg) if selector else -1
        now_ms = time.time_ns() // 1_000_000
        msg_id = new_msg_id_at(now_ms)
        extra = dict(system or {})
        if sharding_key is not None:
            extra[Header.SHARDING_KEY] = str(sharding_key)
        if self.group_id:
            extra.setdefault(Header.PRODUCER_GROUP, self.group_id)
        key = sharding_key.encode() if isinstance(sharding_key, str) else (msg.keys.split()[0].encode() if msg.keys else None)
        record = Record(msg.topic, partition, key, bytes(msg.body),
                        encode_headers(msg, msg_id, now_ms, extra), msg_id)
        if msg.delay_time_level or msg.deliver_at is not None or msg.delay is not None:
            record = self._route_delayed(msg, record, partitions)
        self.check_size(record)
        msg.id = msg_id
        return record

    def check_size(self, record: Record) -> None:
        """Raise :class:`MessageTooLargeError` when the record would exceed ``message.max.bytes``."""
        size = len(record.value) + len(record.key or b"")
        if size < self.max_bytes // 2 and len(record.headers) <= 8 and self._small_headers(record):
            return  # the common case, decided without summing every header
        size += sum(len(k) + len(v) + _HEADER_OVERHEAD for k, v in record.headers)
        if size > self.max_bytes:
            raise MessageTooLargeError(record.topic, size, self.max_bytes)

    def _small_headers(self, record: Record) -> bool:
        return all(len(v) < 1024 for _, v in record.headers)

    def _route_delayed(self, msg: Message, record: Record, partitions: int) -> Record:
        if self._delay_router is None:
            from delay.routing import DelayRouter  # narrow seam into the delay package

            self._delay_router = DelayRouter(self.settings, self.admin)
        return self._delay_router.route(msg, record, partitions)

    # -- sending ---------------------------------------------------------------------
    def produce(self, record: Record, on_delivery: Callable[[KafkaError | None, Any], None] | None = None) -> None:
        """Hand ``record`` to librdkafka (waiting for queue space rather than failing)."""
        kwargs: dict[str, Any] = {"key": record.key, "headers": record.headers}
        if record.partition >= 0:
            kwargs["partition"] = record.partition
        if on_delivery is not None:
            kwargs["on_delivery"] = on_delivery
        while True:
            try:
                self.kafka.produce(record.topic, record.value, **kwargs)
                return
            except BufferError:
                self.kafka.poll(0.05)
            except KafkaException as exc:
                raise SendError(record.topic, str(exc)) from exc

    def send_sync(self, record: Record, timeout: float = 30.0) -> SendResult:
        """Produce and wait for the broker's ack."""
        done = threading.Event()
        outcome: dict[str, Any] = {}

        def delivered(err: KafkaError | None, kmsg: Any) -> None:
            outcome["err"], outcome["msg"] = err, kmsg
            done.set()

        self.produce(record, delivered)
        deadline = time.monotonic() + timeout
        while not done.is_set():
            if time.monotonic() > deadline:
                raise SendError(record.topic, f"no acknowledgement within {timeout} s")
            self.kafka.poll(0.01)
        return self.result(record, outcome["err"], outcome["msg"])

    @staticmethod
    def result(record: Record, err: KafkaError | None, kmsg: Any) -> SendResult:
        """The SendResult of a delivery report, or :class:`SendError`."""
        if err is not None:
            raise SendError(record.topic, err.str())
        return SendResult(SendStatus.OK, record.msg_id, kmsg.topic(), kmsg.partition(), kmsg.offset())

    def flush(self, timeout: float = 30.0) -> int:
        return self.kafka.flush(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Deliver what is queued, then refuse new sends."""
        if not self._closed:
            remaining = self.kafka.flush(timeout)
            if remaining:
                log.warning("producer closed with %d messages undelivered", remaining)
            self._closed = True
