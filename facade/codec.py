"""The header codec's writing side: a :class:`~rocketkafka.message.Message` as Kafka record headers.

System properties travel as ``rk.*`` headers with UTF-8 values, user properties as
plain headers, in this order: id, born time, tags, keys, system extras, properties.
Reading them back is :mod:`rocketkafka.headers` (validated) and
:class:`~rocketkafka.message.MessageExt` (lazy).
"""

from __future__ import annotations

from rocketkafka.message import Message
from rocketkafka.names import Header


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
