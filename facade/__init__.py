"""rocketkafka's public API: RocketMQ semantics on any Kafka-compatible broker.

RocketMQ-style door (names of Apache's rocketmq-client-python)::

    from facade import Producer, PushConsumer, Message, ConsumeStatus

Kafka-style drop-in door: ``from facade.kafka import Producer``.

``PushConsumer`` and ``TransactionMQProducer`` live in ``ordering`` and ``txn``; they
are loaded on first use so importing ``facade`` never imports those packages
(they build on ``facade``'s message model).
"""

from __future__ import annotations

import importlib
from typing import Any

from facade.admin import TopicAdmin
from facade.avro import AvroSerde
from facade.config import Settings
from facade.devstack import DevStack
from facade.errors import (
    ConfigError,
    DelayError,
    LockError,
    MessageError,
    MessageTooLargeError,
    RocketKafkaError,
    SelectorError,
    SendError,
    StackError,
    StateError,
    TagExpressionError,
    TopicNotFoundError,
)
from facade.message import (
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    Message,
    MessageExt,
    MessageModel,
    SendResult,
    SendStatus,
    Suspend,
)
from facade.producer import Producer
from facade.selectors import hash_selector, key_selector, random_selector
from facade.tags import TagFilter

_LAZY = {
    "PushConsumer": "ordering.push_consumer",
    "ConsumerOptions": "ordering.options",
    "IdempotentConsumer": "ordering.idempotent",
    "TransactionMQProducer": "txn",
    "TransactionStatus": "txn",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'facade' has no attribute {name!r}")


__all__ = sorted([
    "AvroSerde", "ConfigError", "ConsumeFromWhere", "ConsumeOrderlyStatus", "ConsumeStatus", "ConsumerOptions", "DelayError",
    "DevStack", "IdempotentConsumer", "LockError", "Message", "MessageError", "MessageExt", "MessageModel",
    "MessageTooLargeError", "Producer", "PushConsumer", "RocketKafkaError", "SelectorError", "SendError", "SendResult",
    "SendStatus", "Settings", "Suspend", "StackError", "StateError", "TagExpressionError", "TagFilter", "TopicAdmin",
    "TopicNotFoundError", "TransactionMQProducer", "TransactionStatus", "hash_selector", "key_selector",
    "random_selector",
])
