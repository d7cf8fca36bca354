"""The message model: what producers send and what consumers receive.

Names follow Apache's Python client (rocketmq-client-python) so its users switch
with an import: ``Message(topic, body=..., tags=..., keys=...)`` and its ``set_*``
methods; received messages expose ``id, topic, tags, keys, body, queue_id,
queue_offset, reconsume_times, born_timestamp, store_timestamp``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from datetime import datetime, timedelta

from facade.errors import MessageError
from facade.names import HEADER_PREFIX


def _normalize_keys(keys: str | Iterable[str] | None) -> str | None:
    if keys is None:
        return None
    if isinstance(keys, str):
        return keys or None
    parts = list(keys)
    for k in parts:
        if not isinstance(k, str) or not k or " " in k:
            raise MessageError(f"message key {k!r} must be a non-empty string without spaces")
    return " ".join(parts) or None


class Message:
    """A message to send.

    Parameters:
        topic: destination topic (must exist).
        body: payload bytes.
        tags: one tag, used by consumers' tag expressions (``"TagA"``).
        keys: one key or several (space separated, or a list); searchable business keys.
        properties: user properties, sent as plain record headers.
        delay_time_level: RocketMQ delay level (0 = none, 1..18 = ``1s .. 2h``).
        deliver_at: absolute due time (timezone-aware datetime or epoch seconds).
        delay: relative delay (timedelta or seconds).

    >>> m = Message("orders", body=b"{...}", tags="created", keys=["order-1"])
    >>> m.set_property("region", "eu")
    """

    __slots__ = ("topic", "body", "tags", "keys", "properties", "delay_time_level", "deliver_at", "delay", "id")

    def __init__(self, topic: str, body: bytes = b"", *, tags: str | None = None,
                 keys: str | Iterable[str] | None = None, properties: dict[str, str] | None = None,
                 delay_time_level: int = 0, deliver_at: datetime | float | None = None,
                 delay: timedelta | float | None = None) -> None:
        self.topic = topic
        self.body = body
        self.tags = tags
        self.keys = _normalize_keys(keys)
        self.properties: dict[str, str] = dict(properties or {})
        self.delay_time_level = delay_time_level
        self.deliver_at = deliver_at
        self.delay = delay
        self.id: str | None = None  # assigned at send

    # rocketmq-client-python's setters
    def set_keys(self, keys: str | Iterable[str]) -> None:
        self.keys = _normalize_keys(keys)

    def set_tags(self, tags: str) -> None:
        self.tags = tags

    def set_body(self, body: bytes) -> None:
        self.body = body

    def set_property(self, key: str, value: str) -> None:
        self.properties[key] = value

    def set_delay_time_level(self, level: int) -> None:
        self.delay_time_level = level

    def validate(self) -> None:
        """Raise :class:`MessageError` naming the first thing wrong with this message."""
        if not isinstance(self.topic, str) or not self.topic:
            raise MessageError(f"topic must be a non-empty string, got {self.topic!r}")
        if not isinstance(self.body, (bytes, bytearray, memoryview)):
            raise MessageError(f"body must be bytes, got {type(self.body).__name__} (encode it first)")
        if self.tags is not None and (not isinstance(self.tags, str) or not self.tags.strip() or "||" in self.tags):
            raise MessageError(f"tags must be one non-empty tag without '||', got {self.tags!r}")
        if self.keys is not None and not isinstance(self.keys, str):
            raise MessageError(f"keys must be a string or a list of strings, got {self.keys!r}")
        for name, value in self.properties.items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise MessageError(f"property {name!r}: names and values must be strings, got {value!r}")
            if name.startswith(HEADER_PREFIX):
                raise MessageError(f"property {name!r} uses the reserved prefix {HEADER_PREFIX!r}")
        if not isinstance(self.delay_time_level, int) or self.delay_time_level < 0:
            raise MessageError(f"delay_time_level must be an int >= 0, got {self.delay_time_level!r}")

    def __repr__(self) -> str:
        return f"Message(topic={self.topic!r}, tags={self.tags!r}, keys={self.keys!r}, body={len(self.body)} bytes)"


class MessageExt:
    """A received message (RocketMQ's ``MessageExt``): queue id = partition, queue offset = offset.

    Built for every consumed record, so it is a slotted class, and a message decoded from a
    Kafka record (:meth:`from_record`) reads body, key and timestamps from the record only
    when they are asked for.
    """

    __slots__ = ("id", "topic", "tags", "keys", "queue_id", "queue_offset", "reconsume_times", "properties", "headers",
                 "_record", "_body", "_key", "_born", "_store")

    def __init__(self, id: str, topic: str, body: bytes, tags: str | None, keys: str | None, queue_id: int,
                 queue_offset: int, reconsume_times: int, born_timestamp: int, store_timestamp: int,
                 properties: dict[str, str] | None = None, key: bytes | None = None,
                 headers: list[tuple[str, bytes]] | None = None) -> None:
        self.id = id
        self.topic = topic
        self.tags = tags
        self.keys = keys
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.reconsume_times = reconsume_times
        self.properties = properties if properties is not None else {}  # user properties (plain headers)
        self.headers = headers if headers is not None else []  # raw, all of them
        self._record = None
        self._body, self._key, self._born, self._store = body, key, born_timestamp, store_timestamp

    @classmethod
    def from_record(cls, record: Any, msg_id: str, tags: str | None, keys: str | None, reconsume_times: int,
                    born_timestamp: int | None, properties: dict[str, str], headers: list[tuple[str, bytes]]) -> MessageExt:
        """A message over a confluent-kafka record whose system headers are already parsed."""
        self = cls.__new__(cls)
        self.id, self.tags, self.keys, self.reconsume_times = msg_id, tags, keys, reconsume_times
        self.topic, self.queue_id, self.queue_offset = record.topic(), record.partition(), record.offset()
        self.properties, self.headers = properties, headers
        self._record, self._body, self._key, self._born, self._store = record, _UNREAD, _UNREAD, born_timestamp, _UNREAD
        return self

    @property
    def body(self) -> bytes:
        """The payload."""
        if self._body is _UNREAD:
            value = self._record.value()
            self._body = value if value is not None else b""
        return self._body

    @property
    def key(self) -> bytes | None:
        """The Kafka record key."""
        if self._key is _UNREAD:
            self._key = self._record.key()
        return self._key

    @property
    def store_timestamp(self) -> int:
        """Epoch ms of the record (the broker's or the producer's create time)."""
        if self._store is _UNREAD:
            self._store = self._record.timestamp()[1]
        return self._store

    @property
    def born_timestamp(self) -> int:
        """Epoch ms at the producer (the born-time header of copies, else the record's create time)."""
        return self._born if self._born is not None else self.store_timestamp

    def get_property(self, name: str) -> str | None:
        """A user property, or a system one by its full header name."""
        if name in self.properties:
            return self.properties[name]
        for k, v in self.headers:
            if k == name:
                return v.decode("utf-8", "replace") if v is not None else None
        return None

    @property
    def key_list(self) -> list[str]:
        """``keys`` split on spaces."""
        return self.keys.split() if self.keys else []

    def __repr__(self) -> str:
        return (f"MessageExt(id={self.id!r}, topic={self.topic!r}, tags={self.tags!r}, keys={self.keys!r}, "
                f"queue_id={self.queue_id}, queue_offset={self.queue_offset}, reconsume_times={self.reconsume_times})")


_UNREAD: Any = object()  # not yet read from the record


class SendStatus(enum.IntEnum):
    """RocketMQ's send statuses; Kafka acks give only OK or an exception."""

    OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3


@dataclass(frozen=True)
class SendResult:
    """Outcome of a send: the stored message's id, partition and offset."""

    status: SendStatus
    msg_id: str
    topic: str
    queue_id: int
    offset: int


class ConsumeStatus(enum.IntEnum):
    """What a concurrent listener returns (raising means ``RECONSUME_LATER``)."""

    CONSUME_SUCCESS = 0
    RECONSUME_LATER = 1


class ConsumeOrderlyStatus(enum.IntEnum):
    """What an orderly listener returns (raising means ``SUSPEND_CURRENT_QUEUE_A_MOMENT``)."""

    SUCCESS = 0
    SUSPEND_CURRENT_QUEUE_A_MOMENT = 1


@dataclass(frozen=True)
class Suspend:
    """An orderly listener's answer: pause this partition ``millis`` ms, then hand it the same message again.

    ``failed=False`` means "not yet" rather than "failed": the message's reconsume count
    does not grow (the delay forwarder waits for a due time this way).
    """

    millis: int
    failed: bool = True


class MessageModel(enum.Enum):
    """CLUSTERING: each message to one member of the group. BROADCASTING: to every member."""

    CLUSTERING = "clustering"
    BROADCASTING = "broadcasting"


class ConsumeFromWhere(enum.Enum):
    """Where a group with no committed offset starts."""

    CONSUME_FROM_FIRST_OFFSET = "first"
    CONSUME_FROM_LAST_OFFSET = "last"
    CONSUME_FROM_TIMESTAMP = "timestamp"
