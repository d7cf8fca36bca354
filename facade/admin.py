"""Topic provisioning through the Kafka AdminClient.

Topics are created explicitly. Existence is checked with ``list_topics()`` and no
topic argument, because asking a broker about one topic by name may auto-create
it (Tansu does, with 4 partitions).
"""

from __future__ import annotations

import builtins  # the method TopicAdmin.list shadows the type in the class body
import logging
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from rocketkafka.config import Settings, kafka_client
from rocketkafka.errors import BrokerUnavailableError, ConfigError, StateError, TopicNotFoundError
from rocketkafka.names import check_topic_name

log = logging.getLogger(__name__)


class TopicAdmin:
    """Create topics and look up partition counts without auto-creating anything.

    Parameters:
        settings: where the broker is.
        metadata_ttl: seconds a cached partition count stays fresh.
    """

    def __init__(self, settings: Settings, metadata_ttl: float = 30.0) -> None:
        self.settings = settings
        self._admin: AdminClient | None = kafka_client(AdminClient, settings.kafka_config())
        self._ttl = metadata_ttl
        self._cache: dict[str, tuple[float, int]] = {}

    @property
    def _client(self) -> AdminClient:
        if self._admin is None:
            raise StateError("this TopicAdmin is closed")
        return self._admin

    def close(self) -> None:
        """Let the AdminClient go now (idempotent); later calls raise :class:`StateError`.

        confluent-kafka has no ``AdminClient.close()``: a client is destroyed with its last
        reference. Dropped here, it goes in the caller's thread. Left inside a reference cycle,
        it would go in a later garbage collection, in whatever thread that pass runs, and a
        librdkafka destroy can block that thread for a second (a lock keeper missing its renewal).
        """
        self._admin = None

    def __enter__(self) -> TopicAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create(self, topic: str, partitions: int = 8, replication: int = 1, config: dict[str, str] | None = None,
               exist_ok: bool = True, timeout: float = 30.0) -> None:
        """Create ``topic``; with ``exist_ok`` an existing topic is fine (its partition count is kept)."""
        self.create_many({topic: partitions}, replication=replication, config=config, exist_ok=exist_ok, timeout=timeout)

    def create_many(self, topics: dict[str, int], replication: int = 1, config: dict[str, str] | None = None,
                    exist_ok: bool = True, timeout: float = 30.0) -> None:
        """Create several topics in one request: ``{name: partitions}``.

        Raises:
            InvalidTopicNameError: a name breaks a Kafka rule (the error names it); nothing is created.
            ConfigError: a partition count is below 1.
            BrokerUnavailableError: no broker answered within ``timeout`` s.
        """
        for name, partitions in topics.items():
            check_topic_name(name)
            if partitions < 1:
                raise ConfigError(f"topic {name!r}: partitions must be >= 1, got {partitions}")
        new = [NewTopic(n, num_partitions=p, replication_factor=replication, config=config or {}) for n, p in topics.items()]
        if not new:
            return
        for name, future in self._client.create_topics(new, operation_timeout=timeout, request_timeout=timeout).items():
            try:
                future.result()
                log.info("created topic %s", name)
            except KafkaException as exc:
                code = exc.args[0].code()
                if exist_ok and code == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                if code in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
                    raise BrokerUnavailableError(self.settings.bootstrap_servers, timeout, exc) from exc
                raise
        self._await_metadata(list(topics), timeout)

    def exists(self, topic: str) -> bool:
        """True when the broker lists ``topic`` (never creates it)."""
        return topic in self._list(10.0)

    def list(self, timeout: float = 10.0) -> dict[str, int]:
        """Every topic the broker lists, with its partition count."""
        return {name: len(meta.partitions) for name, meta in self._list(timeout).items()}

    def _list(self, timeout: float) -> dict[str, Any]:
        """``list_topics()`` without a topic argument (asking for one by name may auto-create it)."""
        try:
            return self._client.list_topics(timeout=timeout).topics
        except KafkaException as exc:
            raise BrokerUnavailableError(self.settings.bootstrap_servers, timeout, exc) from exc

    def partitions(self, topic: str, timeout: float = 10.0) -> int:
        """Partition count of ``topic`` (cached); a look-up waits at most ``timeout`` s for the broker.

        Raises:
            InvalidTopicNameError: ``topic`` breaks a Kafka rule, so it can never exist (the error names the rule).
            TopicNotFoundError: the topic does not exist.
            BrokerUnavailableError: no broker answered within ``timeout`` s.
        """
        now = time.monotonic()
        cached = self._cache.get(topic)
        if cached and now - cached[0] < self._ttl:
            return cached[1]
        check_topic_name(topic)
        meta = self._list(timeout).get(topic)
        if meta is None or meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise TopicNotFoundError(topic)
        count = len(meta.partitions)
        self._cache[topic] = (now, count)
        return count

    def delete(self, topics: builtins.list[str], timeout: float = 30.0) -> None:
        """Delete topics (best effort; used by tests and the demo)."""
        for future in self._client.delete_topics(topics, operation_timeout=timeout).values():
            try:
                future.result()
            except KafkaException as exc:
                log.warning("delete failed: %s", exc)
        for t in topics:
            self._cache.pop(t, None)

    def _await_metadata(self, topics: builtins.list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            listed = self._list(10.0)
            if all(t in listed and listed[t].partitions for t in topics):
                return
            time.sleep(0.05)
