"""The header codec: :class:`Message` to a Kafka record and a Kafka record back to :class:`MessageExt`.

System properties travel as ``rk.*`` headers with UTF-8 values; user properties as
plain headers. Records from foreign producers (no ``rk.*`` headers) decode fine:
their message id falls back to ``topic@partition@offset``, stable across
re-deliveries. A record whose system headers are garbled raises
:class:`MalformedRecordError`, which services route to the dead-letter topic.
"""

from __future__ import annotations

from typing import Any

from facade.errors import RocketKafkaError
from facade.message import Message, MessageExt
from facade.names import HEADER_PREFIX, Header

_MSG_ID, _TAGS, _KEYS = Header.MSG_ID, Header.TAGS, Header.KEYS
_RECONSUME, _BORN = Header.RECONSUME_TIMES, Header.BORN_TIMESTAMP


class MalformedRecordError(RocketKafkaError):
    """A record's system headers cannot be decoded."""

    def __init__(self, topic: str, partition: int, offset: int, reason: str) -> None:
        super().__init__(f"malformed record {topic}[{partition}]@{offset}: {reason}")
        self.topic, self.partition, self.offset, self.reason = topic, partition, offset, reason


def encode_headers(msg: Message, msg_id: str, born_ms: int, system: dict[str, str] | None = None) -> list[tuple[str, bytes]]:
    """Headers of ``msg``: id, born time, tags, keys, then ``system`` extras, then user properties."""
    headers = [(Header.MSG_ID, msg_id.encode()), (Header.BORN_TIMESTAMP, str(born_ms).encode())]
    if msg.tags:
        headers.append((Header.TAGS, msg.tags.encode()))
    if msg.keys:
        headers.append((Header.KEYS, msg.keys.encode()))
    if system:
        headers.extend((k, v.encode()) for k, v in system.items())
    if msg.properties:
        headers.extend((k, v.encode()) for k, v in msg.properties.items())
    return headers


def header_map(headers: list[tuple[str, bytes | None]] | None) -> dict[str, bytes | None]:
    """Headers as a dict (the last value wins, as Kafka's ``lastHeader``)."""
    return dict(headers) if headers else {}


def decode(record: Any) -> MessageExt:
    """A confluent-kafka record as a :class:`MessageExt` (on every consumed record: kept lean).

    Raises:
        MalformedRecordError: a system header is not UTF-8 or not a number where one is needed.
    """
    headers = record.headers()
    msg_id = tags = keys = reconsume = born = None
    props: dict[str, str] = {}
    if headers:
        try:
            for name, value in headers:
                if name.startswith(HEADER_PREFIX):
                    if name == _MSG_ID:
                        msg_id = value.decode()
                    elif name == _TAGS:
                        tags = value.decode()
                    elif name == _KEYS:
                        keys = value.decode()
                    elif name == _RECONSUME:
                        reconsume = int(value)
                    elif name == _BORN:
                        born = int(value)
                    elif value is not None:
                        value.decode()  # other system headers must be UTF-8 too
                elif value is not None:
                    props[name] = value.decode("utf-8", "replace")
        except (UnicodeDecodeError, ValueError, AttributeError, TypeError) as exc:
            raise MalformedRecordError(record.topic(), record.partition(), record.offset(), f"bad system header ({exc})") from exc
    else:
        headers = []
    if msg_id is None:
        msg_id = f"{record.topic()}@{record.partition()}@{record.offset()}"
    return MessageExt.from_record(record, msg_id, tags, keys, reconsume or 0, born, props, headers)


def tags_of(record: Any) -> str | None:
    """The TAGS header of a raw record, without decoding the rest (for fast filtering)."""
    for name, value in record.headers() or ():
        if name == Header.TAGS:
            return value.decode("utf-8", "replace") if value is not None else None
    return None
