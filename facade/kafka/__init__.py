"""Kafka-style drop-in: ``from rocketkafka.kafka import Producer, Consumer`` instead of ``confluent_kafka``.

Both classes *are* confluent-kafka's (subclasses of ``confluent_kafka.Producer`` and
``Consumer``): every call has confluent-kafka's signature and semantics, and passes
straight through where rocketkafka adds nothing (``poll``, ``flush``, ``purge``,
``list_topics``, the transactional API, ``seek``, ``pause``, ``committed``...). What
rocketkafka adds are keyword arguments (``produce(tags=..., keys=..., properties=...,
delay_level=..., delay=..., deliver_at=...)``, ``subscribe(tags=...)``), RocketMQ's
ownership for subscribed consumers (Redis lock table instead of Kafka's group
coordinator), and the few differences docs/guides/from-confluent-kafka.md lists ("What differs").

A plain ``produce`` sends the record byte for byte as confluent-kafka does (value incl.
``None`` tombstones, key, headers as given incl. duplicates and ``None`` values, timestamp,
partition); a call with extras adds a message id, born time, tags and keys as ``rk.*``
headers before the caller's own headers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from confluent_kafka import Producer as _KafkaProducer

from rocketkafka.config import Settings
from rocketkafka.errors import MessageError
from rocketkafka.message import Message
from rocketkafka.names import HEADER_PREFIX, check_group_name, check_topic_name
from rocketkafka.ordering.consumers.drop_in_consumer import Consumer
from rocketkafka.partitioning import DEFAULT_PARTITIONER
from rocketkafka.sender import Sender

__all__ = ["Consumer", "Producer"]

#: produce()'s keyword arguments that are rocketkafka's (a call with one of them takes the extras path).
EXTRAS = frozenset({"tags", "keys", "properties", "delay_level", "delay", "deliver_at"})

_base_produce = _KafkaProducer.produce


class Producer(_KafkaProducer):
    """``confluent_kafka.Producer`` (a subclass of it) with RocketMQ message properties.

    Parameters:
        config: the confluent-kafka config dict; rocketkafka's keys (``rocketkafka.topic.prefix``,
            ``rocketkafka.delay.levels``, ``rocketkafka.producer.group``, ...: see
            :meth:`Settings.from_client_config`) are read and removed from it. ``partitioner``
            defaults to ``murmur2_random`` (the Java client's rule, :mod:`rocketkafka.partitioning`).
        **kwargs: as confluent-kafka's (``logger=...``).

    >>> p = Producer({"bootstrap.servers": "127.0.0.1:9092"})            # doctest: +SKIP
    >>> p.produce("orders", b"hi", key=b"order-1", tags="created"); p.flush()
    """

    _ready = False  # a subclass that never called __init__: produce() gets confluent-kafka's RuntimeError
    _known_topics: frozenset[str] = frozenset()  # replaced as topics are learnt (rarely: once per topic)

    def __init__(self, config: dict[str, Any] | None = None, /, **kwargs: Any) -> None:
        if not isinstance(config, dict) and not (config is None and kwargs):
            raise TypeError("expected configuration dict")  # confluent-kafka's words
        given = {**(config or {}), **kwargs}
        group = given.get("rocketkafka.producer.group")
        if group is not None:
            check_group_name(group, "rocketkafka.producer.group")
        # no broker named is fine, as with confluent-kafka: librdkafka reports it through error_cb and the log,
        # and records wait in the queue up to message.timeout.ms
        self.settings, client_config = Settings.from_client_config(given, require_broker=False)
        client_config = {"partitioner": DEFAULT_PARTITIONER, "allow.auto.create.topics": False, **client_config}
        if self.settings.bootstrap_servers:
            client_config["bootstrap.servers"] = self.settings.bootstrap_servers
        super().__init__(client_config)
        self._client_config = client_config
        self._group = group
        self._sender: Sender | None = None  # made on the first call with extras
        self._ready = True

    if TYPE_CHECKING:  # the stub names the 5th positional ``callback``; librdkafka takes both names alike
        def produce(  # type: ignore[override]
                self, topic: str, value: bytes | str | None = None, key: bytes | str | None = None,
                    partition: int = -1, on_delivery: Callable[[Any, Any], None] | None = None, timestamp: int = 0,
                    headers: dict[str, bytes | str | None] | list[tuple[str, bytes | str | None]] | None = None, *,
                    callback: Callable[[Any, Any], None] | None = None, tags: str | None = None,
                    keys: str | Iterable[str] | None = None, properties: dict[str, str] | None = None,
                    delay_level: int = 0, delay: timedelta | float | None = None,
                    deliver_at: datetime | float | None = None) -> None: ...
    else:
        def produce(self, topic, *args, **kwargs):
            """Queue one record, as ``confluent_kafka.Producer.produce`` (same arguments, same errors).

            RocketMQ extras, keyword only: ``tags``, ``keys`` (one or several business keys; the first is
            the record key unless ``key`` is given), ``properties`` (string headers), ``delay_level``,
            ``delay`` (timedelta or seconds), ``deliver_at`` (datetime or epoch seconds).

            Raises:
                TopicNotFoundError: the topic does not exist (a KafkaException, UNKNOWN_TOPIC_OR_PART).
                BufferError, KafkaException, TypeError: as confluent-kafka.
                MessageError, DelayError: bad extras; nothing is queued.
            """
            if topic not in self._known_topics:
                self._learn_topic(topic)
            if kwargs and not EXTRAS.isdisjoint(kwargs):
                return self._produce_extras(topic, *args, **kwargs)
            return _base_produce(self, topic, *args, **kwargs)

    def _learn_topic(self, topic: str) -> None:
        """Check that ``topic`` exists: we never auto-create (the listing is asked without a topic name,
        which could create it on some brokers). While no broker answers, the record is queued without
        waiting (the check runs again on the next call), as confluent-kafka queues during an outage."""
        if not isinstance(topic, str) or not self._ready:
            return  # confluent-kafka's own TypeError or RuntimeError follows
        check_topic_name(topic)  # InvalidTopicNameError names the rule: such a topic can never exist
        if self.sender.existing(topic) >= 0:  # TopicNotFoundError when the broker does not list it
            self._known_topics = self._known_topics | {topic}

    def _produce_extras(self, topic: str, value: Any = None, key: Any = None, partition: int = -1,
                        on_delivery: Callable | None = None, timestamp: int = 0, headers: Any = None, *,
                        callback: Callable | None = None, tags: str | None = None, keys: Any = None,
                        properties: dict[str, str] | None = None, delay_level: int = 0, delay: Any = None,
                        deliver_at: Any = None) -> None:
        sender = self.sender
        if (type(value) is bytes and key is None and partition == -1 and not timestamp and headers is None
                and properties is None and not delay_level and delay is None and deliver_at is None
                and (keys is None or type(keys) is str)):
            # tags and keys only: the send engine's fast path (id, born time, tags, keys), as send_oneway takes;
            # anything it does not take (an unknown topic, a bad tag) goes the general way below, checked
            if sender.produce_tagged(topic, value, tags, keys, on_delivery or callback) is not None:
                return
        user_headers = _header_list(headers)
        body = value.encode() if isinstance(value, str) else value
        if body is not None and not isinstance(body, (bytes, bytearray, memoryview)):
            raise TypeError(f"value must be bytes, str or None, got {type(value).__name__}")
        msg = Message(topic, b"" if body is None else bytes(body), tags=tags, keys=keys, properties=properties,
                      delay_time_level=delay_level, deliver_at=deliver_at, delay=delay)
        delayed = bool(delay_level) or delay is not None or deliver_at is not None
        if partition != -1 and (isinstance(partition, bool) or not isinstance(partition, int)
                                or not 0 <= partition < sender.partitions(topic)):
            raise MessageError(f"partition {partition!r} does not exist in topic {topic!r}")
        key = key.encode() if isinstance(key, str) else key
        if partition == -1 and key is not None and delayed:
            partition = sender.key_partition(key, topic)  # a delayed record's real partition is fixed at send
        record = sender.prepare(msg, (lambda n, m, a: partition) if partition != -1 else None, wait_for_route=False)
        if key is not None:
            record.key = key  # the caller's key wins over the first business key
        record.value = None if body is None else bytes(body)  # None stays a tombstone
        record.headers = [*record.headers, *user_headers]
        sender.check_size(record)
        kwargs: dict[str, Any] = {"headers": record.headers}
        if record.partition >= 0:
            kwargs["partition"] = record.partition
        if on_delivery or callback:
            kwargs["on_delivery"] = on_delivery or callback
        if timestamp:
            kwargs["timestamp"] = timestamp
        _base_produce(self, record.topic, record.value, record.key, **kwargs)

    @property
    def sender(self) -> Sender:
        """The RocketMQ send engine on this same librdkafka producer (made on first use)."""
        if self._sender is None:
            producer_config = {k: v for k, v in self._client_config.items() if k != "bootstrap.servers"}
            self._sender = Sender(self.settings, producer_config, self._group, kafka=self)
        return self._sender


def _header_list(headers: Any) -> list[tuple[str, Any]]:
    """The caller's headers as confluent-kafka takes them (a dict or a list of pairs), reserved names refused."""
    if headers is None:
        return []
    pairs = list(headers.items()) if isinstance(headers, dict) else list(headers)
    for pair in pairs:
        if not isinstance(pair, tuple) or len(pair) != 2 or not isinstance(pair[0], str):
            raise TypeError(f"headers must be a dict or a list of (str, value) tuples, got {pair!r}")
        if pair[0].startswith(HEADER_PREFIX):
            raise MessageError(f"header {pair[0]!r} uses the reserved prefix {HEADER_PREFIX!r}, "
                               "which a call with RocketMQ extras writes itself")
    return pairs
