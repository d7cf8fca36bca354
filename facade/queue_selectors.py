"""Message queue selectors: which partition an ordered send goes to.

A selector is any callable ``(partitions: int, msg: Message, arg) -> int``, as
RocketMQ's ``MessageQueueSelector.select(mqs, msg, arg)``. The result is checked
at the call: anything but an int in ``range(partitions)`` raises
:class:`SelectorError` and nothing is sent.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from rocketkafka.errors import SelectorError
from rocketkafka.message import Message
from rocketkafka.murmur2 import murmur2_partition

Selector = Callable[[int, Message, Any], int]


def sharding_key_bytes(arg: Any) -> bytes:
    """A sharding key as the record key: bytes as given, ``str`` and ``int`` as UTF-8 text."""
    if isinstance(arg, bool):
        raise SelectorError("sharding key must be str, int or bytes, got bool")
    if isinstance(arg, bytes):
        return arg
    if isinstance(arg, (str, int)):
        return str(arg).encode()
    raise SelectorError(f"sharding key must be str, int or bytes, got {type(arg).__name__}")


def hash_selector(partitions: int, msg: Message, arg: Any) -> int:
    """RocketMQ's ``SelectMessageQueueByHash``, with Kafka's murmur2 so Kafka clients agree on the partition."""
    return murmur2_partition(sharding_key_bytes(arg), partitions)


def random_selector(partitions: int, msg: Message, arg: Any) -> int:
    """RocketMQ's ``SelectMessageQueueByRandom``."""
    return random.randrange(partitions)


def key_selector(partitions: int, msg: Message, arg: Any) -> int:
    """Partition by the message's first key (``arg`` unused)."""
    if not msg.keys:
        raise SelectorError("key_selector needs a message with keys")
    return murmur2_partition(msg.keys.split()[0].encode(), partitions)


def select_partition(selector: Selector, partitions: int, msg: Message, arg: Any) -> int:
    """Run ``selector`` and check its answer."""
    result = selector(partitions, msg, arg)
    if isinstance(result, bool) or not isinstance(result, int) or not 0 <= result < partitions:
        raise SelectorError(f"selector {getattr(selector, '__name__', selector)!r} returned {result!r} "
                            f"for topic {msg.topic!r} with {partitions} partitions")
    return result
