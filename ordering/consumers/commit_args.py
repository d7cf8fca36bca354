"""The drop-in consumer's ``subscribe``, ``commit`` and ``store_offsets`` arguments, checked as confluent-kafka
checks them.

An application that moves from confluent-kafka's ``Consumer`` to ours must meet the same
errors, with the same types and words, before anything of ours reads the arguments. The
words are confluent-kafka's, followed by what was given and what to pass instead: a bare
"expected confluent_kafka.cimpl.Message" names neither the argument nor the way out.

What confluent-kafka accepts, ours accepts: ``message=`` any ``confluent_kafka.Message``
with a topic, partition and offset, whichever client consumed it (only those three are
read). A subscription then refuses a partition this member does not own, whichever argument
names it (:func:`require_owned`): commits stay with the lock holder.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from rocketkafka.message import MessageExt
from rocketkafka.names import check_topic_name
from rocketkafka.topic_partition import TP

#: What to pass instead, said by every refusal of a ``message=`` argument.
_HOW = ("pass a message this Consumer's poll()/consume() returned, or a position read elsewhere as "
        "offsets=[TopicPartition(topic, partition, offset + 1)]")


def position_of(message: Message, call: str = "commit") -> tuple[str, int, int]:
    """A consumed record's topic, partition and offset (an error event has none: a clear TypeError)."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    if topic is None or partition is None or offset is None:
        what = f"an error event ({message.error()})" if message.error() is not None else \
            f"a Message with topic={topic!r}, partition={partition!r}, offset={offset!r}"
        raise TypeError(f"{call}(message=...) expected a consumed record (with topic, partition and offset), "
                        f"got {what}: {_HOW}")
    return topic, partition, offset


def check_message_or_offsets(message: Any, offsets: Any, call: str = "commit", required: bool = False) -> None:
    """``commit``'s and ``store_offsets``' argument errors: confluent-kafka's types and words, then what was
    given to ``call`` and what to pass (``required``: one of the two must be given, as ``store_offsets``)."""
    if required and message is None and offsets is None:
        raise ValueError(f"{call}() expected either message or offsets: pass message=<a message poll() returned> "
                         "or offsets=[TopicPartition(topic, partition, offset)]")
    if message is not None and offsets is not None:
        raise ValueError(f"{call}(): message and offsets are mutually exclusive: pass one of them")
    if message is not None and not isinstance(message, Message):
        raise TypeError(f"{call}(message=...) expected confluent_kafka.cimpl.Message, got {_shown(message)}: "
                        f"{_instead(message)}")
    if offsets is not None:
        if not isinstance(offsets, list):
            raise TypeError(f"{call}(offsets=...) requires list of TopicPartition, got {_shown(offsets)}: "
                            "pass offsets=[TopicPartition(topic, partition, offset)]")
        for i, tp in enumerate(offsets):
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"{call}(offsets=...) expected cimpl.TopicPartition, got {_shown(tp)} at index {i}: "
                                "pass offsets=[TopicPartition(topic, partition, offset)]")


def require_owned(partitions: Sequence[TopicPartition], owned: set[TP], what: str) -> None:
    """While subscribed, ``what`` (``commit``, ``assign``) may name only partitions whose lock this member holds:
    ``KafkaException(_STATE)`` naming the first one it does not."""
    foreign = [tp for tp in partitions if (tp.topic, tp.partition) not in owned]
    if foreign:
        raise KafkaException(KafkaError(KafkaError._STATE, f"{what}: {foreign[0].topic}[{foreign[0].partition}] is "
                                                           "not owned by this member (its lock is elsewhere)"))


def _instead(message: Any) -> str:
    """What to pass instead of ``message``: a push consumer's message says where it was, so say how to use it."""
    if isinstance(message, MessageExt):
        return ("a PushConsumer's MessageExt is not this Consumer's record: pass its position as "
                "offsets=[TopicPartition(msg.topic, msg.queue_id, msg.queue_offset + 1)]")
    return _HOW


def _shown(value: Any) -> str:
    """``value``'s type and a short repr, for an error message (a repr that raises is not shown)."""
    if isinstance(value, MessageExt):  # its repr decodes the headers, which may be garbled: say where it was
        text = f"of {value.topic}[{value.queue_id}]@{value.queue_offset}"
    else:
        try:
            text = repr(value)
        except Exception:
            text = "(no repr)"
    if len(text) > 60:
        text = f"{text[:57]}..."
    kind = type(value)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return f"{name} {text}"


def check_subscription(topics: Any, **callbacks: Any) -> None:
    """``subscribe``'s topics (a list of names; ``^regex`` ones must compile) and rebalance callbacks.

    Raises:
        TypeError: not a list of names, or a callback not callable.
        KafkaException: a bad ``^regex`` (``_INVALID_ARG``), as confluent-kafka.
        InvalidTopicNameError: a literal name breaks a Kafka topic name rule.
    """
    if isinstance(topics, str) or not isinstance(topics, (list, tuple)) \
            or not all(isinstance(t, str) and t for t in topics):
        raise TypeError("topics must be a list of topic names, as in confluent-kafka")
    for name, callback in callbacks.items():
        if callback is not None and not callable(callback):
            raise TypeError(f"{name} must be callable")
    for topic in topics:
        if topic.startswith("^"):
            try:
                re.compile(topic)
            except re.error as exc:
                raise KafkaException(KafkaError(KafkaError._INVALID_ARG,
                                                f"bad topic pattern {topic!r}: {exc}")) from exc
        else:
            check_topic_name(topic)
