"""Log output for the command line and services: plain text, or one JSON object per line.

``rocketkafka --log-format json`` (or ``ROCKETKAFKA_LOG_FORMAT=json``) makes every line a
JSON object with ``ts``, ``level``, ``logger`` and ``message``, plus the ``extra=`` fields
of the call -- lines about one message carry ``msg_id``, ``topic``, ``partition`` and
``offset`` as keys (see :func:`message_fields`, :func:`record_fields`), so a log
pipeline can follow a message without parsing text.

>>> import io, json
>>> stream = io.StringIO(); handler = logging.StreamHandler(stream); handler.setFormatter(JsonFormatter())
>>> log = logging.getLogger("doc"); log.addHandler(handler); log.propagate = False
>>> log.warning("dead-lettering %s", "M1", extra={"msg_id": "M1"})
>>> json.loads(stream.getvalue())["msg_id"]
'M1'
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from rocketkafka.names import Header
from rocketkafka.redaction import REDACTED, redact_url

#: The environment variable choosing the format when ``--log-format`` is not given.
LOG_FORMAT_ENV = "ROCKETKAFKA_LOG_FORMAT"
LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Attributes every LogRecord has: anything else on a record came from ``extra=``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}

_chosen: dict[str, str | None] = {"format": None}  # the format the CLI picked; sub-commands re-configuring levels keep it


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``ts`` (UTC ISO 8601), ``level``, ``logger``, ``message``, extras, ``exc``."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def log_format(chosen: str | None = None) -> str:
    """``chosen``, else the one configured before, else ``ROCKETKAFKA_LOG_FORMAT``, else ``text``.

    Raises:
        ValueError: the format is neither ``text`` nor ``json``.
    """
    fmt = (chosen or _chosen["format"] or os.environ.get(LOG_FORMAT_ENV) or "text").strip().lower()
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {', '.join(LOG_FORMATS)}")
    return fmt


def configure_logging(level: int = logging.WARNING, fmt: str | None = None) -> None:
    """Route the root logger to stderr at ``level`` in ``fmt`` (see :func:`log_format`); replaces earlier setup."""
    fmt = log_format(fmt)
    _chosen["format"] = fmt
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)


def message_fields(msg: Any) -> dict[str, Any]:
    """``extra=`` fields naming a decoded message: ``msg_id``, ``topic``, ``partition``, ``offset``."""
    return {"msg_id": msg.id, "topic": msg.topic, "partition": msg.queue_id, "offset": msg.queue_offset}


def record_fields(record: Any, msg_id: str | None = None) -> dict[str, Any]:
    """``extra=`` fields naming a raw confluent-kafka record; ``msg_id`` from its header when not given."""
    if msg_id is None:
        for name, value in record.headers() or ():
            if name == Header.MSG_ID and value is not None:
                msg_id = value.decode("utf-8", "replace")
                break
    return {"msg_id": msg_id, "topic": record.topic(), "partition": record.partition(), "offset": record.offset()}


class RepeatFilter(logging.Filter):
    """Lets a log line through once per ``window_s``; the repeats in between are counted, not written.

    librdkafka reports a broker it cannot reach on every reconnect attempt, from every client
    (admin, producer, consumer): without this an unreachable broker writes dozens of identical
    ERROR lines per send. Lines are compared without the client name and the ``after N ms``
    timing; the first line after a window says how many were held back.
    """

    _VARYING = re.compile(r"\[rdkafka#[\w-]+\] |\(after \d+ms[^)]*\)|\d+ms")

    def __init__(self, window_s: float = 60.0) -> None:
        super().__init__()
        self.window_s = window_s
        self._seen: dict[tuple[int, str], list[float]] = {}  # line -> [last written at, repeats held back]
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.levelno, self._VARYING.sub("", record.getMessage()))
        now = record.created
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and now - seen[0] < self.window_s:
                seen[1] += 1
                return False
            held = int(seen[1]) if seen is not None else 0
            self._seen[key] = [now, 0]
            if len(self._seen) > 1000:  # bounded: forget the oldest lines
                for old in sorted(self._seen, key=lambda k: self._seen[k][0])[:500]:
                    del self._seen[old]
        if held:
            record.msg, record.args = f"{record.getMessage()} ({held} like it held back in the last {self.window_s:g} s)", None
        return True


class SampledWarning:
    """A stream of like warnings (one per bad record, say): the first in each ``window_s`` at WARNING, saying how
    many came since the last one, the others at DEBUG, so a flood of bad input cannot flood the log."""

    def __init__(self, logger: logging.Logger, window_s: float = 60.0) -> None:
        self.logger, self.window_s = logger, window_s
        self._since, self._told_at = 0, -window_s
        self._lock = threading.Lock()

    def __call__(self, msg: str, *args: Any, **kwargs: Any) -> None:
        now = time.monotonic()
        with self._lock:
            self._since += 1
            if now - self._told_at < self.window_s:
                level, more = logging.DEBUG, ""
            else:
                level = logging.WARNING
                more = f" ({self._since - 1} more like it since the last warning)" if self._since > 1 else ""
                self._since, self._told_at = 0, now
        self.logger.log(level, msg + more, *args, stacklevel=2, **kwargs)


#: Kafka client settings whose values are secrets (librdkafka's sensitive properties and their kin).
SECRET_SETTING = re.compile(r"password|secret|jaas|token|credential|key\.pem|keystore|oauthbearer\.config", re.I)


def redact_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with the value of every secret setting (:data:`SECRET_SETTING`) replaced by ``***``
    and passwords of URLs in the other values hidden (:func:`redact_url`).

    >>> redact_config({"sasl.username": "app", "sasl.password": "pw", "url": "redis://:pw@h"})
    {'sasl.username': 'app', 'sasl.password': '***', 'url': 'redis://:***@h'}
    """
    return {key: REDACTED if SECRET_SETTING.search(str(key)) else redact_url(value) if isinstance(value, str) else value
            for key, value in config.items()}
