"""The message model: what producers send and what consumers receive.

Names follow Apache's Python client (rocketmq-client-python) so its users switch
with an import: ``Message(topic, body=..., tags=..., keys=...)`` and its ``set_*``
methods; received messages expose ``id, topic, tags, keys, body, queue_id,
queue_offset, reconsume_times, born_timestamp, store_timestamp``.
"""

from __future__ import annotations

import enum
from collections import namedtuple
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from rocketkafka.errors import MessageError
from rocketkafka.headers import read_headers
from rocketkafka.names import HEADER_PREFIX, check_topic_name


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
        body: payload bytes (a ``str`` is sent as UTF-8, as rocketmq-client-python does).
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
        self.body = body.encode() if type(body) is str else body
        self.tags = tags
        self.keys = keys if type(keys) is str and keys else _normalize_keys(keys)
        self.properties: dict[str, str] = dict(properties) if properties else {}
        self.delay_time_level = delay_time_level
        self.deliver_at = deliver_at
        self.delay = delay
        self.id: str | None = None  # assigned at send

    # rocketmq-client-python's setters
    def set_keys(self, keys: str | Iterable[str]) -> None:
        """Set the keys: one key, several space separated, or a list of them."""
        self.keys = _normalize_keys(keys)

    def set_tags(self, tags: str) -> None:
        """Set the tag (one; consumers' tag expressions select by it)."""
        self.tags = tags

    def set_body(self, body: bytes | str) -> None:
        """Set the payload (a ``str`` is sent as UTF-8), as rocketmq-client-python's ``set_body``."""
        self.body = body.encode() if isinstance(body, str) else body

    def set_property(self, key: str, value: str) -> None:
        """Set a user property (sent as a plain record header)."""
        self.properties[key] = value

    def set_delay_time_level(self, level: int) -> None:
        """Set the RocketMQ delay level (0: no delay)."""
        self.delay_time_level = level

    def validate(self) -> None:
        """Raise :class:`MessageError` naming the first thing wrong with this message
        (:class:`~rocketkafka.errors.InvalidTopicNameError` for a topic name Kafka refuses)."""
        if not isinstance(self.topic, str) or not self.topic:
            raise MessageError(f"topic must be a non-empty string, got {self.topic!r}")
        check_topic_name(self.topic)  # InvalidTopicNameError names the rule: such a topic can never exist
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

    One is made for every consumed record, so wrapping a record costs one small object:
    body, key and timestamps are read from the record, and the system headers (id, tags,
    keys, reconsume times, born time, user properties) are decoded all at once the first
    time one of them is asked for. A garbled system header raises
    :class:`~rocketkafka.errors.MalformedRecordError` then -- never in a listener: the push
    consumer decodes a record's system headers before its listener sees it (a batch's records are
    checked by :func:`~rocketkafka.headers.unreadable_header`) and dead-letters one that would raise.

    Properties read as in rocketmq-client-python: ``msg.get_property("region")`` or
    ``msg["region"]`` (``KeyError`` when absent); system properties by their header name.
    """

    __slots__ = ("_record", "_topic", "_queue_id", "_queue_offset", "_id", "_tags", "_keys", "_reconsume", "_born",
                 "_properties", "_headers", "_body", "_key", "_store")

    def __init__(self, id: str, topic: str, body: bytes, tags: str | None, keys: str | None, queue_id: int,
                 queue_offset: int, reconsume_times: int, born_timestamp: int, store_timestamp: int,
                 properties: dict[str, str] | None = None, key: bytes | None = None,
                 headers: list[tuple[str, bytes | None]] | None = None) -> None:
        self._record: Any = None  # a confluent-kafka record (see ``of``); None for one built by hand
        self._id, self._topic, self._body, self._tags, self._keys = id, topic, body, tags, keys
        self._queue_id, self._queue_offset, self._reconsume = queue_id, queue_offset, reconsume_times
        self._born: int | None = born_timestamp  # decoded: None when the record has no born-time header
        self._store, self._key = store_timestamp, key
        self._properties = properties if properties is not None else {}
        self._headers = headers if headers is not None else []

    @classmethod
    def of(cls, record: Any, topic: str | None = None) -> MessageExt:
        """The message of a confluent-kafka record; ``topic`` overrides the record's (a retry copy is
        seen under its original topic). Nothing is decoded yet."""
        self = _new(cls)
        self._record = record
        if topic is not None:
            self._topic = topic
        return self

    @property
    def record(self) -> Any:
        """The confluent-kafka record this message came from (``None`` for one built by hand)."""
        return self._record

    def decode(self) -> MessageExt:
        """Decode the system headers now (they are otherwise decoded on first use); returns the message.

        Raises:
            MalformedRecordError: a system header is garbled.
        """
        if self._record is None:
            return self
        h = read_headers(self._record)
        self._id, self._tags, self._keys, self._reconsume, self._born = h.msg_id, h.tags, h.keys, \
            h.reconsume_times, h.born_ms
        self._properties, self._headers = h.properties, h.headers
        return self

    def _decoded(self, name: str) -> Any:
        try:
            return getattr(self, name)
        except AttributeError:
            self.decode()
            return getattr(self, name)

    @property
    def id(self) -> str:
        """The message id (``UNIQ_KEY``), or ``topic@partition@offset`` for a record without one."""
        return self._decoded("_id")

    @property
    def tags(self) -> str | None:
        """The message's tag, or ``None``."""
        return self._decoded("_tags")

    @property
    def keys(self) -> str | None:
        """The message keys, space separated (``key_list`` splits them)."""
        return self._decoded("_keys")

    @property
    def reconsume_times(self) -> int:
        """How often this message was consumed before and failed."""
        return self._decoded("_reconsume")

    @reconsume_times.setter
    def reconsume_times(self, value: int) -> None:
        self._decoded("_reconsume")
        self._reconsume = value

    @property
    def properties(self) -> dict[str, str]:
        """User properties (plain headers, UTF-8)."""
        return self._decoded("_properties")

    @property
    def headers(self) -> list[tuple[str, bytes | None]]:
        """Every header of the record, raw, in order (duplicates kept)."""
        return self._decoded("_headers")

    @property
    def topic(self) -> str:
        """The topic the message was read from."""
        try:
            return self._topic
        except AttributeError:
            self._topic = self._record.topic()
            return self._topic

    @topic.setter
    def topic(self, value: str) -> None:
        self._topic = value

    @property
    def queue_id(self) -> int:
        """The partition."""
        try:
            return self._queue_id
        except AttributeError:
            return self._record.partition()

    @property
    def queue_offset(self) -> int:
        """The offset in the partition."""
        try:
            return self._queue_offset
        except AttributeError:
            return self._record.offset()

    @property
    def body(self) -> bytes:
        """The payload (``b""`` for a record without a value)."""
        try:
            return self._body
        except AttributeError:
            value = self._record.value()
            self._body = value if value is not None else b""
            return self._body

    @property
    def key(self) -> bytes | None:
        """The Kafka record key."""
        try:
            return self._key
        except AttributeError:
            return self._record.key()

    @property
    def store_timestamp(self) -> int:
        """Epoch ms of the record (the broker's or the producer's create time)."""
        try:
            return self._store
        except AttributeError:
            self._store = self._record.timestamp()[1]
            return self._store

    @property
    def born_timestamp(self) -> int:
        """Epoch ms at the producer (the born-time header, else the record's create time)."""
        born = self._decoded("_born")
        return born if born is not None else self.store_timestamp

    def get_property(self, name: str | enum.Enum) -> str | None:
        """A user property, or a system one; ``None`` when absent (as rocketmq-client-python).

        ``name`` is a property name, a system property's full header name (``"rk.TAGS"``), RocketMQ's
        bare name of it (``"TAGS"``, ``"KEYS"``, ``"UNIQ_KEY"``...) or an enum member whose value is
        one (upstream's ``MessageProperty.TAGS``).
        """
        if isinstance(name, enum.Enum):
            name = str(name.value)
        properties = self.properties
        if name in properties:
            return properties[name]
        system = name if name.startswith(HEADER_PREFIX) else HEADER_PREFIX + name
        for k, v in self.headers:
            if k == name or k == system:
                return v.decode("utf-8", "replace") if v is not None else None
        return None

    def __getitem__(self, name: str | enum.Enum) -> str | None:
        """``msg["region"]``, as rocketmq-client-python's ``msg[prop]``: :meth:`get_property` (``None`` when absent)."""
        return self.get_property(name)

    @property
    def key_list(self) -> list[str]:
        """``keys`` split on spaces."""
        return self.keys.split() if self.keys else []

    def __repr__(self) -> str:
        return (f"MessageExt(id={self.id!r}, topic={self.topic!r}, tags={self.tags!r}, keys={self.keys!r}, "
                f"queue_id={self.queue_id}, queue_offset={self.queue_offset}, reconsume_times={self.reconsume_times})")


_new = object.__new__


def require_message(msg: object, call: str) -> Message:
    """``msg`` when it is a :class:`Message`; else the ``TypeError`` a send method raises before anything else.

    A str or a dict is the usual mistake (``send_sync("hello")``): without this it fails deep
    inside with ``'str' object has no attribute 'validate'``.
    """
    if isinstance(msg, Message):
        return msg
    shown = repr(msg) if len(repr(msg)) <= 60 else f"{repr(msg)[:57]}..."
    raise TypeError(f"{call}() takes a rocketkafka Message, got {type(msg).__name__} {shown}: "
                    "send Message(topic, body=b'...', tags=..., keys=...)")



class SendStatus(enum.IntEnum):
    """RocketMQ's send statuses; Kafka acks give only OK or an exception."""

    OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3


_SendResultTuple = namedtuple("SendResult", ["status", "msg_id", "offset"])  # type: ignore[name-match]  # upstream's name
_tuple_new = tuple.__new__


class SendResult(_SendResultTuple):
    """Outcome of a send, rocketmq-client-python's namedtuple ``SendResult(status, msg_id, offset)``.

    It unpacks (``status, msg_id, offset = result``), indexes and compares as upstream's
    three-field tuple; ``topic`` and ``queue_id`` (the partition) say where the message is stored.

    >>> r = SendResult(SendStatus.OK, "0193...", 42, topic="orders", queue_id=3)
    >>> status, msg_id, offset = r
    >>> (offset, r.queue_id)
    (42, 3)
    """

    topic: str
    queue_id: int

    def __new__(cls, status: SendStatus, msg_id: str, offset: int, topic: str = "", queue_id: int = -1) -> SendResult:
        self = _tuple_new(cls, (status, msg_id, offset))  # namedtuple's own __new__ is a Python call more
        self.topic, self.queue_id = topic, queue_id
        return self

    def __repr__(self) -> str:
        return (f"SendResult(status={self.status!r}, msg_id={self.msg_id!r}, offset={self.offset}, "
                f"topic={self.topic!r}, queue_id={self.queue_id})")


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
