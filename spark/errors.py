"""Exceptions of the Spark pipeline, rooted in :mod:`facade.errors`.

::

    RocketKafkaError
    ├── ConfigError
    │   ├── SourceOptionError      an option of the Kafka source is unknown or malformed
    │   └── EngineUnavailableError the forced reader engine cannot run in this session
    ├── TopicNotFoundError         (from facade) a subscribed topic does not exist
    └── KafkaReadError             the broker did not answer, or records are missing
        └── DataLossError          requested offsets are gone (``failOnDataLoss``)

Inside Spark workers these surface wrapped by Spark (``AnalysisException``,
``StreamingQueryException``, ``PythonException``) with the message text kept;
:func:`spark.read_messages` and :func:`spark.read_message_stream` validate on the
driver first, so the same errors arrive unwrapped before any job starts.
"""

from __future__ import annotations

from facade.errors import ConfigError, RocketKafkaError, TopicNotFoundError

__all__ = ["DataLossError", "EngineUnavailableError", "KafkaReadError", "SourceOptionError", "TopicNotFoundError"]


class SourceOptionError(ConfigError):
    """An option of the Kafka source is unknown, missing, conflicting or malformed."""

    def __init__(self, option: str, reason: str) -> None:
        super().__init__(f"Kafka source option {option!r}: {reason}")
        self.option = option


class EngineUnavailableError(ConfigError):
    """The forced reader engine (``jvm``) cannot run in this Spark session."""


class KafkaReadError(RocketKafkaError):
    """The broker did not deliver what the plan asked for within the poll timeout."""


class DataLossError(KafkaReadError):
    """Offsets that a query needs are no longer (or not yet) in the log."""
