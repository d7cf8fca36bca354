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
from datetime import datetime, timezone
from typing import Any

from facade.names import Header

#: The environment variable choosing the format when ``--log-format`` is not given.
LOG_FORMAT_ENV = "ROCKETKAFKA_LOG_FORMAT"
LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Attributes every LogRecord has: anything else on a record came from ``extra=``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}

_chosen = {"format": None}  # the format the CLI picked; sub-commands re-configuring levels keep it


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
