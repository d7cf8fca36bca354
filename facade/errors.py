"""Exceptions of rocketkafka.

The tree::

    RocketKafkaError
    ├── ConfigError              a setting is missing or invalid
    ├── MessageError             a message cannot be sent as given (nothing is sent)
    │   ├── MessageTooLargeError
    │   └── DelayError           unknown delay level, negative or too large delay
    ├── TagExpressionError       a subscription expression does not parse
    ├── SelectorError            a queue selector returned an unusable queue
    ├── TopicNotFoundError       the topic does not exist (we never auto-create)
    ├── SendError                the broker refused or the send timed out
    ├── LockError                a partition lock could not be taken or was lost
    ├── StateError               a client used in the wrong state (not started, closed)
    └── StackError               the embedded dev stack could not start or stop
"""

from __future__ import annotations


class RocketKafkaError(Exception):
    """Root of every error this library raises on purpose."""


class ConfigError(RocketKafkaError, ValueError):
    """A setting is missing or invalid."""


class MessageError(RocketKafkaError, ValueError):
    """A message cannot be sent as given; nothing was sent."""


class MessageTooLargeError(MessageError):
    """The encoded message exceeds the producer's ``message.max.bytes``."""

    def __init__(self, topic: str, size: int, limit: int) -> None:
        super().__init__(f"message for topic {topic!r} is {size} bytes, over the limit of {limit} bytes")
        self.topic, self.size, self.limit = topic, size, limit


class DelayError(MessageError):
    """Unknown delay level, or a negative or too large delay."""


class TagExpressionError(RocketKafkaError, ValueError):
    """A subscription expression such as ``"TagA || TagB"`` does not parse."""

    def __init__(self, expression: str, reason: str) -> None:
        super().__init__(f"bad tag expression {expression!r}: {reason}")
        self.expression = expression


class SelectorError(RocketKafkaError, ValueError):
    """A queue selector returned something that is not a partition of the topic."""


class TopicNotFoundError(RocketKafkaError, LookupError):
    """The topic does not exist on the broker (rocketkafka never auto-creates)."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic!r} does not exist; create it first (rocketkafka topics create)")
        self.topic = topic


class SendError(RocketKafkaError):
    """The broker refused the message or the send timed out."""

    def __init__(self, topic: str, reason: str) -> None:
        super().__init__(f"send to topic {topic!r} failed: {reason}")
        self.topic = topic


class LockError(RocketKafkaError):
    """A partition lock could not be taken, renewed or was lost."""

    def __init__(self, lock_name: str, reason: str) -> None:
        super().__init__(f"lock {lock_name!r}: {reason}")
        self.lock_name = lock_name


class StateError(RocketKafkaError, RuntimeError):
    """A client or service was used in the wrong state (not started, closed)."""


class StackError(RocketKafkaError, RuntimeError):
    """The embedded dev stack could not start, answer or stop."""
