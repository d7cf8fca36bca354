"""The drop-in consumer's ``commit`` and ``store_offsets`` arguments, checked as confluent-kafka checks them.

An application that moves from confluent-kafka's ``Consumer`` to ours must meet the same
errors, with the same types and words, before anything of ours reads the arguments.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Message, TopicPartition


def position_of(message: Message) -> tuple[str, int, int]:
    """A consumed record's topic, partition and offset (an error event has none: a clear TypeError)."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    if topic is None or partition is None or offset is None:
        raise TypeError("expected a consumed record (with topic, partition and offset), got an event "
                        "without them")
    return topic, partition, offset


def check_message_or_offsets(message: Any, offsets: Any) -> None:
    """``commit``'s and ``store_offsets``' argument errors, confluent-kafka's types and words."""
    if message is not None and offsets is not None:
        raise ValueError("message and offsets are mutually exclusive")
    if message is not None and not isinstance(message, Message):
        raise TypeError("expected confluent_kafka.cimpl.Message")
    if offsets is not None:
        if not isinstance(offsets, list):
            raise TypeError("requires list of TopicPartition")
        if not all(isinstance(tp, TopicPartition) for tp in offsets):
            raise TypeError("expected cimpl.TopicPartition")
