"""Topic provisioning through the Kafka AdminClient.

Topics are created explicitly. Existence is checked with ``list_topics()`` and no
topic argument, because asking a broker about one topic by name may auto-create
it (Tansu does, with 4 partitions).
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from facade.config import Settings
from facade.errors import ConfigError, TopicNotFoundError
from facade.names import is_valid_topic_name

log = logging.getLogger(__name__)


class TopicAdmin:
    """Create topics and look up partition counts without auto-creating anything.

    Parameters:
        settings: where the broker is.
        metadata_ttl: seconds a cached partition count stays fresh.
    """

    def __init__(self, settings: Settings, metadata_ttl: float = 30.0) -> None:
        self.settings = settings
        self._client = AdminClient(settings.kafka_config())
        self._ttl = metadata_ttl
        self._cache: dict[str, tuple[float, int]] = {}

    def create(self, topic: str, partitions: int = 8, replication: int = 1, config: dict[str, str] | None = None,
               exist_ok: bool = True, timeout: float = 30.0) -> None:
        """Create ``topic``; with ``exist_ok`` an existing topic is fine (its partition count is kept)."""
        self.create_many({topic: partitions}, replication=replication, config=config, exist_ok=exist_ok, timeout=timeout)

    def create_many(self, topics: dict[str, int], replication: int = 1, config: dict[str, str] | None = None,
                    exist_ok: bool = True, timeout: float = 30.0) -> None:
        """Create several topics in one request: ``{name: partitions}``."""
        for name, partitions in topics.items():
            if not is_valid_topic_name(name):
                raise ConfigError(f"{name!r} is not a valid Kafka topic name (allowed: A-Z a-z 0-9 . _ -)")
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
                if exist_ok and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                raise
        self._await_metadata(list(topics), timeout)

    def exists(self, topic: str) -> bool:
        """True when the broker lists ``topic`` (never creates it)."""
        return topic in self._client.list_topics(timeout=10).topics

    def partitions(self, topic: str) -> int:
        """Partition count of ``topic`` (cached).

        Raises:
            TopicNotFoundError: the topic does not exist.
        """
        now = time.monotonic()
        cached = self._cache.get(topic)
        if cached and now - cached[0] < self._ttl:
            return cached[1]
        meta = self._client.list_topics(timeout=10).topics.get(topic)
        if meta is None or meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise TopicNotFoundError(topic)
        count = len(meta.partitions)
        self._cache[topic] = (now, count)
        return count

    def delete(self, topics: list[str], timeout: float = 30.0) -> None:
        """Delete topics (best effort; used by tests and the demo)."""
        for future in self._client.delete_topics(topics, operation_timeout=timeout).values():
            try:
                future.result()
            except KafkaException as exc:
                log.warning("delete failed: %s", exc)
        for t in topics:
            self._cache.pop(t, None)

    def _await_metadata(self, topics: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            listed = self._client.list_topics(timeout=10).topics
            if all(t in listed and listed[t].partitions for t in topics):
                return
            time.sleep(0.05)
