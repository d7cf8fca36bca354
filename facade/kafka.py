"""Kafka-style drop-in: ``from facade.kafka import Producer`` instead of ``confluent_kafka``.

Same config dict and calls (``produce``, ``poll``, ``flush``), plus keyword
arguments for RocketMQ features: ``tags``, ``keys``, ``properties``,
``delay_level``, ``delay``, ``deliver_at``. Records get a message id and born
time in headers, and unknown topics raise instead of being auto-created.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from facade.config import Settings
from facade.errors import MessageError
from facade.message import Message
from facade.sender import Record, Sender


class Producer:
    """``confluent_kafka.Producer`` with RocketMQ message properties.

    Parameters:
        config: the confluent-kafka config dict; ``rocketkafka.redis.urls``, ``rocketkafka.topic.prefix``
            and ``rocketkafka.producer.group`` are read and removed from it.

    >>> p = Producer({"bootstrap.servers": "127.0.0.1:9092"})            # doctest: +SKIP
    >>> p.produce("orders", b"hi", key=b"order-1", tags="created"); p.flush()
    """

    def __init__(self, config: dict[str, Any]) -> None:
        config = dict(config)
        redis_urls = config.pop("rocketkafka.redis.urls", None)
        prefix = config.pop("rocketkafka.topic.prefix", None)
        group = config.pop("rocketkafka.producer.group", None)
        self.settings = Settings.load({"bootstrap.servers": config.pop("bootstrap.servers", None)} if "bootstrap.servers" in config else None,
                                      redis_urls, topic_prefix=prefix)
        self._sender = Sender(self.settings, config, group)

    def produce(self, topic: str, value: bytes | None = None, key: bytes | str | None = None, partition: int = -1,
                on_delivery: Callable[[Any, Any], None] | None = None, timestamp: int = 0,
                headers: dict[str, bytes] | list[tuple[str, bytes]] | None = None, *, callback: Callable | None = None,
                tags: str | None = None, keys: str | Iterable[str] | None = None, properties: dict[str, str] | None = None,
                delay_level: int = 0, delay: timedelta | float | None = None, deliver_at: datetime | float | None = None) -> None:
        """Queue one record, like ``confluent_kafka.Producer.produce``; raises on bad input before queuing."""
        props = dict(properties or {})
        for name, val in (headers.items() if isinstance(headers, dict) else headers or []):
            props[name] = val.decode() if isinstance(val, (bytes, bytearray)) else str(val)
        msg = Message(topic, b"" if value is None else (value.encode() if isinstance(value, str) else value), tags=tags,
                      keys=keys, properties=props, delay_time_level=delay_level, deliver_at=deliver_at, delay=delay)
        prepared = self._sender.prepare(msg)
        if partition != -1:
            if not isinstance(partition, int) or not 0 <= partition < self._sender.partitions(topic):
                raise MessageError(f"partition {partition!r} does not exist in topic {topic!r}")
            if prepared.topic == topic:
                prepared = _with(prepared, partition=partition)
        if key is not None:
            prepared = _with(prepared, key=key.encode() if isinstance(key, str) else key)
        self._sender.produce(prepared, on_delivery or callback)

    def poll(self, timeout: float = 0) -> int:
        return self._sender.kafka.poll(timeout)

    def flush(self, timeout: float = -1) -> int:
        return self._sender.kafka.flush(timeout) if timeout >= 0 else self._sender.kafka.flush()

    def __len__(self) -> int:
        return len(self._sender.kafka)

    def close(self) -> None:
        self._sender.close()


def _with(record: Record, **changes: Any) -> Record:
    from dataclasses import replace

    return replace(record, **changes)
