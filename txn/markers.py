"""End markers: Redis remembers how each transaction ended, so no path writes its real message twice.

A committed transaction can reach the end-transaction writer more than once: the
producer's own end-transaction arrives late while a check-back answer for a
re-written copy of the half is already on its way, or the checker re-writes a half
twice after a crash and both copies are answered. Each path would write the real
message again. The marker closes that gap::

    end COMMIT:    real message acked  ->  SET end:T C   ->  op record
    end ROLLBACK:                          SET end:T R NX ->  op record
    any COMMIT:    GET end:T == C  ->  skip the real message, write only the op
    checker:       GET end:T set   ->  the copy is closed, no check-back

``C`` is written only after the real message is durable, so a marker never hides a
message that does not exist; a crash between the real message and the marker costs at
most one duplicate with the same message id, which consumers' idempotent helper drops.

Markers are a hint written to every Redis node and read from every node (any node's
answer counts); a node that fails is skipped for a few seconds. Losing markers costs
duplicates (same message id), never messages.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import redis

from rocketkafka.names import RedisKeys

log = logging.getLogger(__name__)

COMMITTED, ROLLED_BACK = "C", "R"
_CHUNK = 1000
_SKIP_FAILED_NODE_S = 5.0

Txn = tuple[str, str]  # (producer group, transaction id)


class EndMarkers:
    """Read and write end markers on every Redis node.

    Parameters:
        redis_urls: the Redis nodes.
        keys: key names (``RedisKeys.transaction_end``).
        ttl_ms: how long a marker lives.
    """

    def __init__(self, redis_urls: list[str], keys: RedisKeys, ttl_ms: int) -> None:
        self.keys, self.ttl_ms = keys, ttl_ms
        self._nodes = [redis.Redis.from_url(u, socket_timeout=0.5, socket_connect_timeout=0.5) for u in redis_urls]
        self._skip_until = [0.0] * len(self._nodes)

    def lookup(self, txns: Iterable[Txn]) -> dict[Txn, str]:
        """The markers found for ``txns`` (absent: no marker); ``C`` wins over ``R``."""
        wanted = list(dict.fromkeys(txns))
        found: dict[Txn, str] = {}
        if not wanted:
            return found
        names = [self.keys.transaction_end(g, t) for g, t in wanted]
        for i, node in self._live():
            try:
                for start in range(0, len(names), _CHUNK):
                    values = node.mget(names[start:start + _CHUNK])
                    for txn, value in zip(wanted[start:start + _CHUNK], values):
                        if value is not None and found.get(txn) != COMMITTED:
                            assert isinstance(value, bytes)  # no decode_responses: Redis answers bytes
                            found[txn] = value.decode()
            except redis.RedisError as exc:
                self._failed(i, exc)
        return found

    def mark(self, committed: Iterable[Txn] = (), rolled_back: Iterable[Txn] = ()) -> None:
        """Record ends: ``committed`` (their real messages are durable) and ``rolled_back`` (never overwrites C)."""
        commits, rollbacks = list(committed), list(rolled_back)
        if not commits and not rollbacks:
            return
        for i, node in self._live():
            try:
                pipe = node.pipeline(transaction=False)
                for g, t in commits:
                    pipe.set(self.keys.transaction_end(g, t), COMMITTED, px=self.ttl_ms)
                for g, t in rollbacks:
                    pipe.set(self.keys.transaction_end(g, t), ROLLED_BACK, px=self.ttl_ms, nx=True)
                pipe.execute()
            except redis.RedisError as exc:
                self._failed(i, exc)

    def close(self) -> None:
        for node in self._nodes:
            node.close()

    def _live(self) -> list[tuple[int, redis.Redis]]:
        now = time.monotonic()
        return [(i, n) for i, n in enumerate(self._nodes) if self._skip_until[i] <= now]

    def _failed(self, index: int, exc: Exception) -> None:
        log.warning("end markers: Redis node %d failed (%s); skipping it for %.0f s", index, exc, _SKIP_FAILED_NODE_S)
        self._skip_until[index] = time.monotonic() + _SKIP_FAILED_NODE_S
