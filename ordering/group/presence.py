"""Services announce themselves in Redis, so clients that need one can tell whether any is alive.

A running instance keeps its name in a sorted set with the time its announcement expires
(epoch ms), renewed well before that; a stopped one takes its name out, a crashed one
expires. Clients count the unexpired names. Announcing and asking are best effort: they
go to every Redis node, and an answer from any node counts (the set is no lock; a missing
announcement only makes a client warn).

The delay forwarder announces itself here (:data:`DELAY_FORWARDER`, scoped by topic prefix);
a push consumer whose retries back off through the delay levels asks at start.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import cast
from collections.abc import Sequence

import redis

from rocketkafka.names import RedisKeys

log = logging.getLogger(__name__)

#: The delay forwarder's service name.
DELAY_FORWARDER = "delay-forwarder"
#: How long an announcement lasts, and how often it is renewed (ms).
ANNOUNCE_TTL_MS = 15_000
ANNOUNCE_INTERVAL_MS = 3_000


class Presence:
    """The announcements of one ``service`` for one ``scope`` on the Redis nodes ``urls``."""

    def __init__(self, urls: Sequence[str], keys: RedisKeys, service: str, scope: str,
                 socket_timeout: float = 1.0) -> None:
        self.key = keys.alive(service, scope)
        self.service = service
        self._nodes = [redis.Redis.from_url(u, socket_timeout=socket_timeout,
                                            socket_connect_timeout=socket_timeout)
                       for u in urls]

    def announce(self, instance: str, ttl_ms: int = ANNOUNCE_TTL_MS) -> int:
        """Announce ``instance`` alive for ``ttl_ms``; returns how many nodes took it."""
        now = int(time.time() * 1000)
        took = 0
        for node in self._nodes:
            try:
                pipe = node.pipeline(transaction=False)
                pipe.zadd(self.key, {instance: now + ttl_ms})
                pipe.zremrangebyscore(self.key, "-inf", now)
                pipe.pexpire(self.key, ttl_ms * 4)
                pipe.execute()
                took += 1
            except redis.RedisError as exc:
                log.debug("announcing %s on a Redis node failed: %s", self.service, exc)
        return took

    def withdraw(self, instance: str) -> None:
        """Take ``instance`` out (a graceful stop)."""
        for node in self._nodes:
            try:
                node.zrem(self.key, instance)
            except redis.RedisError:
                pass

    def alive(self) -> list[str] | None:
        """Names of the instances alive now (the largest answer of any node); ``None`` when no node
        answered."""
        now = int(time.time() * 1000)
        best: list[str] | None = None
        for node in self._nodes:
            try:
                names = [n.decode() for n in cast(list[bytes], node.zrangebyscore(self.key, now, "+inf"))]
            except redis.RedisError:
                continue
            if best is None or len(names) > len(best):
                best = names
        return best

    def close(self) -> None:
        for node in self._nodes:
            node.close()


class Announcer:
    """A thread that keeps ``instance`` announced until :meth:`stop` (which withdraws it)."""

    def __init__(self, presence: Presence, instance: str, interval_ms: int = ANNOUNCE_INTERVAL_MS,
                 ttl_ms: int = ANNOUNCE_TTL_MS) -> None:
        self.presence, self.instance = presence, instance
        self._interval, self._ttl = interval_ms / 1000, ttl_ms
        self._stop = threading.Event()
        presence.announce(instance, ttl_ms)  # alive from the moment start() returns
        self._thread = threading.Thread(target=self._run, name=f"rk-announce-{presence.service}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.presence.announce(self.instance, self._ttl)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.presence.withdraw(self.instance)
        self.presence.close()
