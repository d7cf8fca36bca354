"""The opt-in message index in Redis: message id -> location, (topic, key) -> locations (``queryMsgByKey``).

RocketMQ's broker keeps an IndexFile of keys and unique ids; Kafka keeps none, so a
producer built with ``message_index=True`` writes, once the broker acked a message:

- ``RedisKeys.msg_index(msg_id)`` = ``topic@partition@offset`` (expires after the retention);
- for each of the message's keys, ``RedisKeys.key_index(topic, key)``: a sorted set of
  ``partition@offset`` scored by store time, trimmed to the retention on every write.

Writes go to every Redis node from a background thread in pipelines (a node that fails
is skipped); the send path only queues them. Reads take the union over the nodes. A
message sent while the index was off, or older than the retention, is not in it:
``rocketkafka admin query-msg`` then falls back to a bounded scan.
"""

from __future__ import annotations

import logging
import time
from typing import NamedTuple, cast

import redis

from rocketkafka.background import BackgroundQueue
from rocketkafka.names import RedisKeys

log = logging.getLogger(__name__)

#: How long index entries live by default (ms): RocketMQ keeps its index files 3 days (fileReservedTime 72 h).
DEFAULT_RETENTION_MS = 3 * 24 * 3600 * 1000


class Location(NamedTuple):
    """Where a message is stored."""

    topic: str
    partition: int
    offset: int
    stored_ms: int | None = None

    def __str__(self) -> str:
        return f"{self.topic}@{self.partition}@{self.offset}"


class MessageIndex:
    """Writes and reads the message index on every Redis node.

    Parameters:
        redis_urls: the Redis nodes.
        keys: key names (``msg_index``, ``key_index``).
        retention_ms: how long an entry lives.
    """

    def __init__(self, redis_urls: list[str], keys: RedisKeys, retention_ms: int = DEFAULT_RETENTION_MS) -> None:
        if retention_ms <= 0:
            raise ValueError(f"retention_ms must be > 0, got {retention_ms}")
        self.keys, self.retention_ms = keys, retention_ms
        self._nodes = [redis.Redis.from_url(u, socket_timeout=2, socket_connect_timeout=2) for u in redis_urls]
        self._queue: BackgroundQueue[tuple[Location, str, str | None]] | None = None

    # -- writing (producers) -------------------------------------------------------------
    def add(self, location: Location, msg_id: str, keys: str | None) -> None:
        """Index a stored message (returns at once; written in the background)."""
        if self._queue is None:
            self._queue = BackgroundQueue("message-index", self._write)
        self._queue.put((location, msg_id, keys))

    def flush(self, timeout: float = 10.0) -> None:
        if self._queue is not None:
            self._queue.flush(timeout)

    def close(self) -> None:
        if self._queue is not None:
            self._queue.close()
        for node in self._nodes:
            node.close()

    def _write(self, items: list[tuple[Location, str, str | None]]) -> None:
        if not items:
            return
        now = int(time.time() * 1000)
        for node in self._nodes:
            try:
                pipe = node.pipeline(transaction=False)
                trimmed = set()
                for location, msg_id, keys in items:
                    pipe.set(self.keys.msg_index(msg_id), str(location), px=self.retention_ms)
                    for key in (keys or "").split():
                        name = self.keys.key_index(location.topic, key)
                        pipe.zadd(name, {f"{location.partition}@{location.offset}": location.stored_ms or now})
                        if name not in trimmed:
                            trimmed.add(name)
                            pipe.zremrangebyscore(name, "-inf", now - self.retention_ms)
                            pipe.pexpire(name, self.retention_ms)
                pipe.execute()
            except redis.RedisError as exc:
                log.debug("message index: a Redis node failed: %s", exc)

    # -- reading (admin) -------------------------------------------------------------------
    def location(self, msg_id: str) -> Location | None:
        """Where ``msg_id`` is stored, if the index knows it."""
        for node in self._nodes:
            try:
                value = node.get(self.keys.msg_index(msg_id))
            except redis.RedisError:
                continue
            if value:
                assert isinstance(value, bytes)  # no decode_responses: Redis answers bytes
                topic, partition, offset = value.decode().rsplit("@", 2)
                return Location(topic, int(partition), int(offset))
        return None

    def by_key(self, topic: str, key: str) -> list[Location]:
        """Messages of ``topic`` with ``key`` the index knows, oldest first."""
        found: dict[tuple[int, int], int] = {}
        for node in self._nodes:
            try:
                entries = node.zrange(self.keys.key_index(topic, key), 0, -1, withscores=True)
            except redis.RedisError:
                continue
            for member, score in cast(list[tuple[bytes, float]], entries):  # withscores, no decode_responses
                partition, offset = member.decode().split("@")
                found[(int(partition), int(offset))] = int(score)
        return [Location(topic, p, o, ms) for (p, o), ms in sorted(found.items(), key=lambda kv: (kv[1], kv[0]))]
