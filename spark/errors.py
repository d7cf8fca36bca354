"""Exceptions of the Spark pipeline, rooted in :mod:`rocketkafka.errors`.

::

    RocketKafkaError
    ├── ConfigError
    │   ├── SourceOptionError      an option of the Kafka source is unknown or malformed
    │   └── EngineUnavailableError the forced reader engine cannot run in this session
    ├── TopicNotFoundError         (from facade) a subscribed topic does not exist
    ├── KafkaReadError             the broker did not answer, or records are missing
    │   └── DataLossError          requested offsets are gone (``failOnDataLoss``)
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

from rocketkafka.errors import ConfigError, RocketKafkaError, TopicNotFoundError

__all__ = ["AuditEmptyError", "DataLossError", "EngineUnavailableError", "KafkaReadError", "SourceOptionError", "TopicNotFoundError"]


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
    return found


_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+$")
_OURS = frozenset({"SourceOptionError", "EngineUnavailableError", "KafkaReadError", "DataLossError",
                   "TopicNotFoundError", "AuditEmptyError", "ConfigError"})
