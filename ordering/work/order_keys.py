"""Order keys (DDMQ's ``orderKey``): what must stay in order inside a partition.

DDMQ orders by ``QID`` (the queue: RocketMQ's behaviour), by ``MsgKey``, or by a
JSON path into the body. Here the same three are spelled

=================  =============================================================
``"partition"``    the partition: one handler per partition (plain orderly mode)
``"key"``          the message key: the Kafka record key, else the first of ``KEYS``
``"$.order.id"``   a JSON path into the body: ``.name``, ``[index]``, ``['name']``
=================  =============================================================

A record without a key (no record key and no ``KEYS``, a body that is not JSON,
a path that is missing or ``null``) has no order constraint, as in DDMQ: it runs
concurrently with everything.

The JSON path is a small parser of its own rather than a library: an order key
needs exactly one value, so the wildcards, filters and multi-matches of full
JSONPath (``jsonpath-ng``) would only have to be refused again.

>>> key_of = order_key_of("$.order.id")
>>> parse_json_path("$.items[0]['sku id']")
('items', 0, 'sku id')
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Hashable
from typing import Any

from rocketkafka.names import Header

__all__ = ["PARTITION", "MESSAGE_KEY", "order_key_of", "parse_json_path", "validate_order_key"]

log = logging.getLogger(__name__)

#: Order by partition: plain orderly consumption.
PARTITION = "partition"
#: Order by message key.
MESSAGE_KEY = "key"

_SEGMENT = re.compile(r"""\.([A-Za-z_$][\w$-]*)|\[(-?\d+)\]|\[(['"])(.*?)\3\]""")
_KEYS_HEADER = Header.KEYS


def parse_json_path(path: str) -> tuple[str | int, ...]:
    """The steps of a JSON path such as ``$.order.id`` or ``$.items[0]['sku id']``.

    Raises:
        ValueError: the path does not start with ``$``, names nothing, or has a step
            that is not ``.name``, ``[index]`` or ``['name']``.
    """
    if not isinstance(path, str) or not path.startswith("$"):
        raise ValueError(f"a JSON path starts with '$', got {path!r}")
    steps: list[str | int] = []
    pos = 1
    while pos < len(path):
        m = _SEGMENT.match(path, pos)
        if m is None:
            raise ValueError(f"bad JSON path {path!r} at character {pos}: expected .name, [index] or "
                             "['name']")
        name, index, _, quoted = m.groups()
        steps.append(name if name is not None else int(index) if index is not None else quoted)
        pos = m.end()
    if not steps:
        raise ValueError(f"JSON path {path!r} names no field")
    return tuple(steps)


def validate_order_key(spec: str) -> str:
    """``spec`` when it is ``"partition"``, ``"key"`` or a valid JSON path.

    Raises:
        ValueError: anything else.
    """
    if spec in (PARTITION, MESSAGE_KEY):
        return spec
    if isinstance(spec, str) and spec.startswith("$"):
        parse_json_path(spec)
        return spec
    raise ValueError(f"order_key must be 'partition', 'key' or a JSON path like '$.order.id', got {spec!r}")


def order_key_of(spec: str) -> Callable[[Any], Hashable | None]:
    """A function from a raw (confluent-kafka) record to its order key, ``None`` for no key.

    ``"partition"`` is not a key function (the whole partition is one key); it raises.
    """
    validate_order_key(spec)
    if spec == PARTITION:
        raise ValueError("order_key 'partition' orders whole partitions; it has no per-record key")
    if spec == MESSAGE_KEY:
        return _message_key
    return _JsonPathKey(spec)


def _message_key(record: Any) -> Hashable | None:
    key = record.key()
    if key:
        return key
    for name, value in record.headers() or ():
        if name == _KEYS_HEADER and value:
            return value.split(b" ", 1)[0]
    return None


class _JsonPathKey:
    """The value at a JSON path of the body, as canonical JSON text (``1`` and ``"1"`` differ)."""

    def __init__(self, path: str) -> None:
        self.path, self.steps = path, parse_json_path(path)
        self._warned = False

    def __call__(self, record: Any) -> Hashable | None:
        try:
            value: Any = json.loads(record.value() or b"")
        except ValueError:
            self._warn(record, "body is not JSON")
            return None
        for step in self.steps:
            if isinstance(step, int) and isinstance(value, list) and -len(value) <= step < len(value):
                value = value[step]
            elif isinstance(step, str) and isinstance(value, dict) and step in value:
                value = value[step]
            else:
                self._warn(record, f"no {self.path} in the body")
                return None
        if value is None:
            return None
        return json.dumps(value, sort_keys=True, separators=(",", ":"))

    def _warn(self, record: Any, problem: str) -> None:
        level = logging.DEBUG if self._warned else logging.WARNING
        self._warned = True
        log.log(level, "%s[%d]@%d: %s; consumed without an order key", record.topic(), record.partition(),
                record.offset(), problem, extra={"topic": record.topic(), "partition": record.partition(),
                                                 "offset": record.offset()})
