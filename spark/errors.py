"""Exceptions of the Spark pipeline, rooted in :mod:`rocketkafka.errors`.

::

    RocketKafkaError
    ├── ConfigError
    │   ├── SourceOptionError      an option of the Kafka source is unknown or malformed
    │   └── EngineUnavailableError the forced reader engine cannot run in this session
    ├── TopicNotFoundError         (from facade) a subscribed topic does not exist
    ├── KafkaReadError             the broker did not answer, or records are missing
    │   ├── DataLossError          requested offsets are gone (``failOnDataLoss``)
    │   └── KafkaAuthorizationError the broker refused the reader's user an ACL (also an AuthorizationError)
    ├── AuthenticationError        (from facade) the broker refused the login (credentials, TLS, protocol)
    └── AuditEmptyError            an audit found nothing to report on (no topics, an empty join)

Inside Spark workers these surface wrapped by Spark (``AnalysisException``,
``StreamingQueryException``, ``PythonException``) with the message text kept;
:func:`spark.read_messages` and :func:`spark.read_message_stream` validate on the
driver first, so the same errors arrive unwrapped before any job starts; the
sessions of :func:`spark.spark_session` hide worker tracebacks, so a wrapped error
is one line, and :func:`spark_error_line` pulls that line out of a Spark exception.
"""

from __future__ import annotations

import re
from typing import Any

from rocketkafka.errors import AuthorizationError, ConfigError, RocketKafkaError, TopicNotFoundError
from rocketkafka.refusals import GRANT_HINT

__all__ = ["AuditEmptyError", "DataLossError", "EngineUnavailableError", "KafkaAuthorizationError", "KafkaReadError",
           "SourceOptionError", "TopicNotFoundError"]


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


class KafkaAuthorizationError(AuthorizationError, KafkaReadError):
    """The broker refused the reader's Kafka user an operation on a topic (an ACL is missing); the read ends at once.

    An :class:`~rocketkafka.errors.AuthorizationError` (``resource_type`` ``topic``, ``resource``, ``operation``
    ``READ`` or ``DESCRIBE``, ``principal``) and a :class:`KafkaReadError`::

        Kafka refused READ on topic 'orders' to User:etl (TOPIC_AUTHORIZATION_FAILED); a Spark reader needs ...
    """

    def __init__(self, topic: str, operation: str = "READ", user: str | None = None, error: Any = None) -> None:
        AuthorizationError.__init__(
            self, "kafka", "TOPIC_AUTHORIZATION_FAILED", "topic", topic, operation, f"User:{user}" if user else None,
            hint=f"a Spark reader needs ACL Topic READ (which includes DESCRIBE) on each topic it reads; {GRANT_HINT}",
            error=error)


class AuditEmptyError(RocketKafkaError):
    """An audit would have reported on nothing: no topics under the prefix, or a join or filter left no rows.

    The message says what was read and which step came up empty; pass ``allow_empty=True``
    (``--allow-empty``) when an empty result is expected.
    """


#: The last ``module.Type: message`` line of a worker error (hideTraceback or a full traceback).
_WORKER_ERROR = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception)): (.+)$")


def spark_error_line(exc: BaseException) -> str | None:
    """The one line that matters in a Spark exception raised by a rocketkafka error in a Python worker.

    ``AnalysisException [PYTHON_DATA_SOURCE_ERROR]``, ``PythonException`` and
    ``StreamingQueryException`` carry the worker's error as text; this returns
    ``"SourceOptionError: Kafka source option 'x': ..."`` (the last error line naming a
    rocketkafka error), or ``None`` when the exception is not one of ours.

    Spark's JVM source raises the Java client's errors instead; a refused login or a missing ACL
    (``TopicAuthorizationException``, ``GroupAuthorizationException``, ``SaslAuthenticationException``)
    is one of ours too: its line, with the ACLs a Spark reader needs where one is missing.
    """
    text = str(exc)
    found = None
    for line in text.splitlines():
        line = line.strip()
        for part in re.split(r": (?=(?:[\w]+\.)*\w+(?:Error|Exception): )", line):
            match = _WORKER_ERROR.match(part.strip())
            if match and ("rocketkafka." in part or match.group(1) in _OURS):
                message = _SQLSTATE.sub("", match.group(2)).strip()
                found = f"{match.group(1)}: {message}"
    if found is None:
        java = _KAFKA_JAVA_ERROR.search(text)
        if java is not None:
            found = f"{java.group(1)}: {java.group(2).strip()}{_JAVA_HINTS.get(java.group(1), '')}"
    return found


#: The Java Kafka client's refusals, as Spark's JVM source raises them.
_KAFKA_JAVA_ERROR = re.compile(r"org\.apache\.kafka\.common\.errors\."
                               r"(\w+AuthorizationException|SaslAuthenticationException): ([^\n]+)")
_JAVA_HINTS = {
    "TopicAuthorizationException": " (a Spark reader needs ACL Topic READ, which includes DESCRIBE, on each topic it reads)",
    "GroupAuthorizationException": " (grant ACL Group DESCRIBE on the reader's group ids: prefix 'spark-kafka-source', "
                                   "or its groupIdPrefix / kafka.group.id)",
}


_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+$")
_OURS = frozenset({"SourceOptionError", "EngineUnavailableError", "KafkaReadError", "DataLossError",
                   "KafkaAuthorizationError", "TopicNotFoundError", "AuditEmptyError", "ConfigError",
                   "AuthorizationError", "AuthenticationError"})
