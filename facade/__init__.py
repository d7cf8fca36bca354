"""rocketkafka: RocketMQ semantics on any Kafka-compatible broker.

The RocketMQ-style door (names of Apache's rocketmq-client-python)::

    from rocketkafka import Producer, PushConsumer, Message, ConsumeStatus
    from rocketkafka import AsyncProducer   # the producer for asyncio: ``await producer.send(msg)``

The Kafka-style drop-in door is :mod:`rocketkafka.kafka`; the subpackages
:mod:`rocketkafka.ordering`, :mod:`rocketkafka.delay`, :mod:`rocketkafka.txn`,
:mod:`rocketkafka.spark` and :mod:`rocketkafka.testing` hold the rest.

This module is the package's face, above every layer: the core names are imported
at once, the consumer and transaction classes (which live in the layers above the
core) on first use, so ``import rocketkafka`` stays light and never imports a layer
it does not need. Type checkers see every name.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from rocketkafka.admin import TopicAdmin
from rocketkafka.aio import AsyncProducer
from rocketkafka.avro import AvroSerde, RegistryAvroSerde
from rocketkafka.config import Settings
from rocketkafka.errors import (
    AuthenticationError,
    AuthorizationError,
    ConfigError,
    DelayError,
    InvalidTopicNameError,
    LockError,
    MessageError,
    MessageTooLargeError,
    RedisAuthError,
    RedisUnavailableError,
    RocketKafkaError,
    SelectorError,
    SelectorSyntaxError,
    SendError,
    StackError,
    StateError,
    TagExpressionError,
    TopicNotFoundError,
)
from rocketkafka.message import (
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
from rocketkafka.producer import Producer
from rocketkafka.schedule.levels import DelayConfig
from rocketkafka.message_selector import MessageSelector
from rocketkafka.queue_selectors import hash_selector, key_selector, random_selector
from rocketkafka.tags import TagFilter

if TYPE_CHECKING:
    from rocketkafka.ordering.consumers.idempotent import IdempotentConsumer
    from rocketkafka.ordering.engine.options import ConsumerOptions
    from rocketkafka.ordering.consumers.push_consumer import PushConsumer
    from rocketkafka.txn.producer import TransactionMQProducer
    from rocketkafka.txn.status import TransactionStatus

try:
    __version__ = version("rocketkafka")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

#: Names of the layers above the core, imported on first use: name -> module.
_UPPER = {
    "PushConsumer": "rocketkafka.ordering.consumers.push_consumer",
    "ConsumerOptions": "rocketkafka.ordering.engine.options",
    "IdempotentConsumer": "rocketkafka.ordering.consumers.idempotent",
    "TransactionMQProducer": "rocketkafka.txn.producer",
    "TransactionStatus": "rocketkafka.txn.status",
}


def __getattr__(name: str) -> Any:
    if name in _UPPER:
        value = getattr(importlib.import_module(_UPPER[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rocketkafka' has no attribute {name!r}")


__all__ = [
    "AsyncProducer",
    "AuthenticationError",
    "AuthorizationError",
    "AvroSerde",
    "ConfigError",
    "ConsumeFromWhere",
    "ConsumeOrderlyStatus",
    "ConsumeStatus",
    "ConsumerOptions",
    "DelayConfig",
    "DelayError",
    "IdempotentConsumer",
    "InvalidTopicNameError",
    "LockError",
    "Message",
    "MessageError",
    "MessageExt",
    "MessageModel",
    "MessageSelector",
    "MessageTooLargeError",
    "Producer",
    "PushConsumer",
    "RedisAuthError",
    "RedisUnavailableError",
    "RegistryAvroSerde",
    "RocketKafkaError",
    "SelectorError",
    "SelectorSyntaxError",
    "SendError",
    "SendResult",
    "SendStatus",
    "Settings",
    "StackError",
    "StateError",
    "Suspend",
    "TagExpressionError",
    "TagFilter",
    "TopicAdmin",
    "TopicNotFoundError",
    "TransactionMQProducer",
    "TransactionStatus",
    "__version__",
    "hash_selector",
    "key_selector",
    "random_selector",
]
