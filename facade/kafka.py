"""Kafka-style drop-in: ``from facade.kafka import Producer, Consumer`` instead of ``confluent_kafka``.

Same config dict and calls (``produce``, ``poll``, ``flush``), plus keyword
arguments for RocketMQ features: ``tags``, ``keys``, ``properties``,
``delay_level``, ``delay``, ``deliver_at``. A call with such extras gets a message
id and born time in headers; a plain call sends the record unchanged. Unknown
topics raise instead of being auto-created.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from facade.config import Settings
from facade.errors import MessageError
from facade.message import Message
from facade.sender import Sender


def __getattr__(name: str) -> Any:
    # the drop-in Consumer runs on the ordering package's engine, which builds on facade: load it on use
    if name == "Consumer":
        from ordering.pull_consumer import Consumer

        return Consumer
    raise AttributeError(f"module 'facade.kafka' has no attribute {name!r}")


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
        servers = config.pop("bootstrap.servers", None)
        self.settings = Settings.load({"bootstrap.servers": servers} if servers else None, redis_urls, topic_prefix=prefix)
        self._sender = Sender(self.settings, config, group)
        self._partitioner = str(config.get("partitioner", self.settings.kafka.get("partitioner", "consistent_random")))
        self._kafka = self._sender.kafka
        self._plain_limit = self._sender.max_bytes // 2  # below this a plain record needs no size check
        self._known_topics: set[str] = set()

    def produce(self, topic: str, value: bytes | None = None, key: bytes | str | None = None, partition: int = -1,
                on_delivery: Callable[[Any, Any], None] | None = None, timestamp: int = 0,
                headers: dict[str, bytes] | list[tuple[str, bytes]] | None = None, *, callback: Callable | None = None,
                tags: str | None = None, keys: str | Iterable[str] | None = None, properties: dict[str, str] | None = None,
                delay_level: int = 0, delay: timedelta | float | None = None, deliver_at: datetime | float | None = None) -> None:
        """Queue one record, like ``confluent_kafka.Producer.produce``; raises on bad input before queuing."""
        on_delivery = on_delivery or callback
        if (type(value) is bytes and len(value) < self._plain_limit and partition == -1 and not timestamp and headers is None
                and tags is None and keys is None and properties is None and not delay_level and delay is None
                and deliver_at is None):
            self._produce_plain(topic, value, key, on_delivery)
            return
        props = dict(properties or {})
        for name, val in (headers.items() if isinstance(headers, dict) else headers or []):
            props[name] = val.decode() if isinstance(val, (bytes, bytearray)) else str(val)
        msg = Message(topic, b"" if value is None else (value.encode() if isinstance(value, str) else value), tags=tags,
                      keys=keys, properties=props, delay_time_level=delay_level, deliver_at=deliver_at, delay=delay)
        if partition != -1 and (not isinstance(partition, int) or not 0 <= partition < self._sender.partitions(topic)):
            raise MessageError(f"partition {partition!r} does not exist in topic {topic!r}")
        key = key.encode() if isinstance(key, str) else key
        if partition == -1 and key is not None and (delay_level or delay is not None or deliver_at is not None):
            from delay.routing import key_partition  # narrow seam: a delayed record's partition is fixed at send

            partition = key_partition(key, self._sender.partitions(topic), self._partitioner)
        record = self._sender.prepare(msg, (lambda n, m, a: partition) if partition != -1 else None)
        if key is not None:
            record.key = key  # a delayed record carries it to its real topic
        self._sender.produce(record, on_delivery)

    def _produce_plain(self, topic: str, value: bytes, key: bytes | str | None, on_delivery: Callable | None) -> None:
        """The hot path of a call without RocketMQ extras: the record goes out exactly as confluent-kafka would send it.

        Consumers give such a record the id ``topic@partition@offset`` (stable across re-deliveries,
        which is what idempotent consumption needs); calls with tags, keys, properties or a delay
        get a producer-made message id header as well.
        """
        if topic not in self._known_topics:
            self._sender.partitions(topic)  # raises TopicNotFoundError instead of auto-creating
            self._known_topics.add(topic)
        try:
            if on_delivery is None:
                self._kafka.produce(topic, value, key)
            else:
                self._kafka.produce(topic, value, key, on_delivery=on_delivery)
        except BufferError:
            self._kafka.poll(0.05)
            self._produce_plain(topic, value, key, on_delivery)

    def poll(self, timeout: float = 0) -> int:
        return self._kafka.poll(timeout)

    def flush(self, timeout: float = -1) -> int:
        return self._kafka.flush(timeout) if timeout >= 0 else self._kafka.flush()

    def __len__(self) -> int:
        return len(self._kafka)

    def close(self) -> None:
        self._sender.close()
