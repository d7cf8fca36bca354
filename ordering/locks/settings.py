"""The lock table's settings and its pure quorum logic: timings, votes, fencing tokens, agreed entries.

Everything here is arithmetic over answers already received, so it is tested without Redis.

>>> [quorum(n) for n in (1, 2, 3, 4, 5)]
[1, 2, 2, 3, 3]
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rocketkafka.errors import ConfigError
from rocketkafka.topic_partition import TP

log = logging.getLogger(__name__)


#: Redlock's minimal clock drift (ms), added to ``lease_ms * drift_factor``.
MIN_DRIFT_MS = 2


@dataclass(frozen=True)
class LockSettings:
    """Timings of the lock table; every duration is in milliseconds.

    Parameters:
        lease_ms: server-side TTL of the owner's session, which holds its locks (RocketMQ: 60 s).
            A crashed owner's partitions are free again this long after its last renewal.
        renew_interval_ms: how often the owner renews all its locks (RocketMQ: 20 s).
        client_expiry_ms: the owner treats a lock as lost this long after the start of its
            last successful quorum round, whatever happened since. Shorter than the lease by
            more than the clock drift, so the owner stops before anyone else can win.
        drift_factor: clock drift allowance as a fraction of the lease (Redlock's 0.01);
            the drift is ``lease_ms * drift_factor + 2`` ms.
        socket_timeout_ms: longest wait for one node in one round; a node slower than this,
            or down, is a no-vote.

    Raises:
        ConfigError: a value is not a positive integer, or the timings contradict each
            other (the message says which rule).

    >>> LockSettings(lease_ms=3000, renew_interval_ms=1000, client_expiry_ms=2000).drift_ms
    32.0
    """

    lease_ms: int = 60_000
    renew_interval_ms: int = 20_000
    client_expiry_ms: int = 30_000
    drift_factor: float = 0.01
    socket_timeout_ms: int = 200

    def __post_init__(self) -> None:
        for name in ("lease_ms", "renew_interval_ms", "client_expiry_ms", "socket_timeout_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"LockSettings.{name} must be a positive integer (ms), got {value!r}")
        factor = self.drift_factor
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 <= factor < 0.5:
            raise ConfigError(f"LockSettings.drift_factor must be a number in [0, 0.5), got {factor!r}")
        if self.client_expiry_ms >= self.lease_ms - self.drift_ms:
            raise ConfigError(
                f"LockSettings.client_expiry_ms ({self.client_expiry_ms}) must be below lease_ms - drift "
                f"({self.lease_ms} - {self.drift_ms:g}): the owner must give a lock up before Redis frees it")
        if self.renew_interval_ms + self.socket_timeout_ms >= self.validity_ms:
            raise ConfigError(
                f"LockSettings: renew_interval_ms + socket_timeout_ms ({self.renew_interval_ms} + "
                f"{self.socket_timeout_ms}) must be below client_expiry_ms - drift ({self.validity_ms:g}): "
                "a renewal started on time must end before the lock expires at the client")
        if 2 * self.socket_timeout_ms >= self.validity_ms:
            raise ConfigError(
                f"LockSettings.socket_timeout_ms ({self.socket_timeout_ms}) leaves no room for an "
                f"acquisition (two rounds) within client_expiry_ms - drift ({self.validity_ms:g})")

    @property
    def drift_ms(self) -> float:
        """Clock drift allowance (ms): ``lease_ms * drift_factor + 2``."""
        return self.lease_ms * self.drift_factor + MIN_DRIFT_MS

    @property
    def validity_ms(self) -> float:
        """How long a successful round keeps a lock valid at the client (ms), counted from its start."""
        return self.client_expiry_ms - self.drift_ms


def quorum(nodes: int) -> int:
    """Votes a lock needs among ``nodes`` Redis nodes: a strict majority, ``nodes // 2 + 1``.

    >>> [quorum(n) for n in (1, 2, 3, 4, 5)]
    [1, 2, 2, 3, 3]
    """
    if nodes < 1:
        raise ValueError("a lock table needs at least one Redis node")
    return nodes // 2 + 1


def valid_until(started: float, settings: LockSettings) -> float:
    """Monotonic time (s) until which a round that started at ``started`` keeps its locks valid.

    Like Redlock's ``validity = ttl - elapsed - drift``, but counted against the client
    expiry, which is shorter than the lease: a round that ends after this instant wins
    nothing, and a won lock is valid exactly until this instant unless renewed.
    """
    return started + settings.validity_ms / 1000


def issue_token(node_fences: Iterable[int], floor: int = 0) -> int:
    """The fencing token of a new acquisition: one above everything the answering nodes know.

    ``node_fences`` are the highest tokens each answering node knows for the lock (its
    counter or the fence in its entry); ``floor`` is the highest token this process has
    seen for it.

    >>> issue_token([4, 0, 7])
    8
    >>> issue_token([], floor=3)
    4
    """
    return max(max(node_fences, default=0), floor) + 1


def quorum_ttl(ttls: Sequence[int], needed: int) -> int:
    """How long (ms) at least ``needed`` of the nodes with these TTLs still hold an entry.

    >>> quorum_ttl([5000, 50000, 60000], 2)
    50000
    """
    if len(ttls) < needed:
        return 0
    return sorted(ttls, reverse=True)[needed - 1]


def agree(entries: Sequence[dict[str, Any] | None], needed: int) -> dict[str, Any] | None:
    """The lock entry a quorum of nodes agrees on (same owner and token), merged, or ``None``.

    ``entries`` holds one decoded entry per node (``None``: no answer or no entry). Progress
    and fence only grow, so the merge takes their maximum among the agreeing nodes; the
    TTL is the one a quorum still holds (:func:`quorum_ttl`).
    """
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for entry in entries:
        if entry is not None and entry.get("owner"):
            groups.setdefault((entry["owner"], entry["token"]), []).append(entry)
    for (owner, _token), group in groups.items():
        if len(group) >= needed:
            def top(name: str) -> int | None:
                values = [e[name] for e in group if e.get(name) is not None]
                return max(values) if values else None
            return {
                "owner": owner,
                "fencing_token": top("fence") or 0,
                "delivered": top("delivered"),
                "acked": top("acked"),
                "ttl_ms": quorum_ttl([e["ttl_ms"] for e in group], needed),
                "votes": len(group),
            }
    return None


@dataclass
class Held:
    """One lock this table holds.

    Parameters:
        topic, partition: the locked partition.
        fencing_token: strictly larger than the token of every earlier acquisition of the same
            lock; writers attach it so a stale owner's late writes can be refused.
        acquired_at: monotonic time (s) at the start of the acquiring round.
        valid_until: monotonic time (s) after which the holder must treat the lock as lost
            unless a renewal succeeded (client-side expiry, before the server-side lease ends).
    """

    topic: str
    partition: int
    fencing_token: int
    acquired_at: float
    valid_until: float

    @property
    def tp(self) -> TP:
        """The locked partition as a ``(topic, partition)`` pair."""
        return (self.topic, self.partition)


def grants(answers: Sequence[Any], count: int) -> list[int]:
    """Per lock, the nodes that hold it for us, as a bit mask (bit ``j``: node ``j``).

    ``answers`` holds one answer per node: a flag string (``b"1"`` = ours on that node) or
    ``None`` (no answer). A malformed answer grants nothing.
    """
    masks = [0] * count
    for node, flags in enumerate(answers):
        if flags is None:
            continue
        if not isinstance(flags, bytes) or len(flags) != count:
            log.error("a lock script answered %s for %d locks; ignoring that node", repr(flags)[:40], count)
            continue
        bit = 1 << node
        for i, flag in enumerate(flags):
            if flag == 49:  # ord("1")
                masks[i] |= bit
    return masks



def reported_fences(results: Sequence[Any], fresh: Sequence[TP]) -> dict[TP, list[int]]:
    """The highest fencing token each answering node reported per newly claimed lock."""
    reported: dict[TP, list[int]] = {tp: [] for tp in fresh}
    for result in results:
        if result is None:
            continue
        values = result[1].split()
        if len(values) != len(fresh):
            log.error("a lock script reported %d fences for %d locks; ignoring that node", len(values),
                      len(fresh))
            continue
        for tp, value in zip(fresh, values):
            reported[tp].append(int(value))
    return reported


def decode_entry(result: Any) -> dict[str, Any] | None:
    """One node's DESCRIBE answer as a dict, ``None`` when it did not answer or has no entry."""
    if result is None or result[0] is None:
        return None
    owner, token, fence, delivered, acked, pttl, _counter = result

    def number(raw: bytes | None) -> int | None:
        return None if raw is None else int(raw)

    return {"owner": owner.decode(), "token": token.decode() if token else "", "fence": number(fence),
            "delivered": number(delivered), "acked": number(acked), "ttl_ms": max(int(pttl), 0)}


def partition_pairs(partitions: Iterable[TP]) -> list[TP]:
    """Validated ``(topic, partition)`` pairs, duplicates dropped, order kept."""
    out: dict[TP, None] = {}
    for item in partitions:
        try:
            topic, partition = item
        except (TypeError, ValueError):
            raise ValueError(f"expected a (topic, partition) pair, got {item!r}") from None
        if not isinstance(topic, str) or not topic or isinstance(partition, bool) \
                or not isinstance(partition, int) or partition < 0:
            raise ValueError(f"expected a (topic: str, partition: int >= 0) pair, got {item!r}")
        out[(topic, partition)] = None
    return list(out)
