"""Offset resets asked for by an operator while the group runs (RocketMQ's ``resetOffsetByTime``).

An operator (``rocketkafka admin reset-offset``) writes the wanted offset of each
partition into the group's reset hash on every Redis node (``RedisKeys.offset_reset``,
field ``topic:partition``) and announces it on the membership channel. The member
holding a partition's lock applies it (:class:`~rocketkafka.ordering.engine.engine.OwnershipEngine`):
it leaves the partition as on a rebalance -- what was handed out finishes, nothing new
starts -- then, still under the lock, commits the requested offset instead of its own
position, marks the request done and unlocks; its next rebalance takes the partition
again and reads from the committed offset, i.e. from the requested point. A partition
nobody holds is reset by the operator itself, under the lock.

The hash is read at every rebalance (join/leave announcements and the safety interval),
never per message. The holder's side: :func:`leave_for_resets` at a rebalance, :func:`commit_reset`
once the partition drained.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Container, Iterable, Mapping
from typing import Any

import redis
from confluent_kafka import KafkaException
from redis.typing import EncodableT, FieldT

from rocketkafka.names import RedisKeys
from rocketkafka.ordering.engine.commits import commit_offsets, fenced
from rocketkafka.ordering.locks import LockTable
from rocketkafka.ordering.engine.owned import OwnedLock
from rocketkafka.topic_partition import TP

log = logging.getLogger(__name__)


def _field(tp: TP) -> str:
    return f"{tp[0]}:{tp[1]}"


def _parse_field(raw: bytes) -> TP | None:
    topic, _, partition = raw.decode("utf-8", "replace").rpartition(":")
    return (topic, int(partition)) if topic and partition.isdigit() else None


class OffsetResets:
    """The reset hash of one group on every Redis node.

    Parameters:
        redis_urls: the lock table's nodes (the request is written to all; a reader takes the union).
        group: the consumer group.
        keys: Redis key names.
    """

    def __init__(self, redis_urls: list[str], group: str, keys: RedisKeys) -> None:
        self.group = group
        self._key = keys.offset_reset(group)
        self._channel = keys.membership_channel(group)
        self._clients = [redis.Redis.from_url(u, socket_timeout=1, socket_connect_timeout=1)
                         for u in redis_urls]

    def request(self, offsets: Mapping[TP, int]) -> int:
        """Ask for ``offsets`` (replacing older requests of those partitions); returns the nodes that
        stored it.

        Raises:
            redis.ConnectionError: no node stored it.
        """
        mapping: dict[FieldT, EncodableT] = {_field(tp): str(offset) for tp, offset in offsets.items()}
        stored = 0
        for client in self._clients:
            try:
                client.hset(self._key, mapping=mapping)
                stored += 1
            except redis.RedisError as exc:
                log.warning("storing the offset reset on a Redis node failed: %s", exc)
        if not stored:
            raise redis.ConnectionError(f"no Redis node stored the offset reset of group {self.group!r}")
        self.announce()
        return stored

    def announce(self) -> None:
        """Wake the members: they rebalance now, and look at the reset hash while doing so."""
        payload = json.dumps({"event": "reset", "member": "rocketkafka-admin"})
        for client in self._clients:
            try:
                client.publish(self._channel, payload)
            except redis.RedisError:
                pass

    def pending(self, among: Iterable[TP] | None = None) -> dict[TP, int]:
        """Requests not done yet (of the partitions ``among``, else all), the union over answering nodes."""
        wanted = set(among) if among is not None else None
        if wanted is not None and not wanted:
            return {}
        found: dict[TP, int] = {}
        for client in self._clients:
            try:
                entries = client.hgetall(self._key)
            except redis.RedisError:
                continue
            for raw, value in entries.items():
                assert isinstance(raw, bytes)  # no decode_responses: Redis answers bytes
                tp = _parse_field(raw)
                if tp is None or (wanted is not None and tp not in wanted):
                    continue
                try:
                    found[tp] = int(value)
                except ValueError:
                    log.warning("ignoring a garbled offset reset %r=%r of group %s", raw, value, self.group)
        return found

    def done(self, tps: Iterable[TP], offsets: Mapping[TP, int] | None = None) -> None:
        """Mark requests done on every node; with ``offsets``, only where the request still asks for that
        offset."""
        for tp in tps:
            for client in self._clients:
                try:
                    if offsets is None:
                        client.hdel(self._key, _field(tp))
                    else:
                        client.eval(_DONE_IF_UNCHANGED, 1, self._key, _field(tp), str(offsets[tp]))
                except redis.RedisError:
                    pass  # that node keeps a stale request; applying it again re-commits the same offset

    def close(self) -> None:
        for client in self._clients:
            client.close()


# KEYS[1] reset hash; ARGV[1] field, ARGV[2] the offset applied. Deletes the field only when it still
# asks for that offset (a newer request for the partition stays); returns 1 when deleted.
_DONE_IF_UNCHANGED = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""


def leave_for_resets(resets: OffsetResets, by_tp: Mapping[TP, OwnedLock], owned: Container[TP],
                     release: Callable[[list[TP]], None], name: str) -> None:
    """Leave every ``owned`` lock one of whose partitions (``by_tp``) an operator asked to reset.

    ``release`` starts the leave; the lock leaves with :attr:`OwnedLock.reset_to` set, so that
    :func:`commit_reset` commits the requested offsets once it drained.
    """
    try:
        requests = resets.pending(by_tp)
    except Exception as exc:  # Redis trouble: the request waits for the next rebalance
        log.warning("%s: reading offset resets failed: %s", name, exc)
        return
    for tp, offset in requests.items():
        held = by_tp.get(tp)
        if held is None or held.leaving or held.lock not in owned:
            continue
        log.info("%s: resetting %s to offset %d (drain, commit, re-read)", name, tp, offset)
        held.reset_to = {t: o for t, o in requests.items() if t in held.partitions}
        release([held.lock])


def commit_reset(kafka: Any, owned: OwnedLock, resets: OffsetResets, locks: LockTable | None,
                 name: str) -> bool:
    """Commit an operator's reset offsets (the rest of the claim as usual) under the lock, then unlock.

    Returns ``False`` when the lock was lost while draining: the next owner applies the request.
    """
    assert owned.reset_to is not None
    if locks is not None and not locks.is_held(owned.lock):
        return False
    positions = {**owned.claim.positions(), **owned.reset_to}
    try:
        commit_offsets(kafka, [fenced(tp, offset, owned.fencing_token) for tp, offset in positions.items()
                               if offset >= 0], asynchronous=False)
    except KafkaException as exc:  # the request stays: applied again once the partition is taken back
        log.warning("%s: committing the offset reset of %s failed: %s", name, owned.lock, exc)
    else:
        resets.done(owned.reset_to, owned.reset_to)
    if locks is not None:
        locks.unlock_batch([owned.lock])
    return True
