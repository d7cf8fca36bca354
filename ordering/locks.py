"""The partition lock table: RocketMQ's broker-side queue locks over N independent Redis nodes.

RocketMQ's ``RebalanceLockManager`` keeps one lock per (consumer group, message
queue) for 60 s; the client re-locks every 20 s (``lockAll``) with one
``lockBatchMQ`` request for all its queues, and in strict mode a queue counts as
locked only when a quorum of replicas locked it. Here the replicas are N
independent Redis nodes (Redlock style, quorum ``N // 2 + 1``), the queue is a
Kafka partition, and the batch is one Lua call per node, all nodes in parallel.

The lock entry also carries DeFiBus' transition state: the owner's delivered
and acked offsets, written with every renewal, so a new owner can see what the
old one left unfinished (:meth:`LockTable.describe`).

>>> table = LockTable(["redis://127.0.0.1:6379"], "orders", "host@123", RedisKeys())  # doctest: +SKIP
>>> won = table.lock_batch([("orders", 0), ("orders", 1)])                              # doctest: +SKIP
>>> won[("orders", 0)].fencing_token                                                    # doctest: +SKIP
7
>>> table.renew_batch()            # every renew_interval_ms; returns the locks now lost  # doctest: +SKIP
set()
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisError
from redis.retry import Retry

from facade.errors import ConfigError, LockError, StateError
from facade.names import RedisKeys
from ordering import lock_scripts

__all__ = ["Held", "LockRenewer", "LockSettings", "LockTable", "TopicPartition", "agree", "bench_renew",
           "issue_token", "quorum", "quorum_ttl", "valid_until"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

#: Redlock's minimal clock drift (ms), added to ``lease_ms * drift_factor``.
MIN_DRIFT_MS = 2


# -- settings and pure logic ---------------------------------------------------------------------
@dataclass(frozen=True)
class LockSettings:
    """Timings of the lock table; every duration is in milliseconds.

    Parameters:
        lease_ms: server-side TTL of a lock entry (RocketMQ: 60 s). A crashed owner's
            partitions are free again this long after its last renewal.
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
                f"LockSettings.socket_timeout_ms ({self.socket_timeout_ms}) leaves no room for an acquisition "
                f"(two rounds) within client_expiry_ms - drift ({self.validity_ms:g})")

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


def _bulk(value: str | bytes) -> bytes:
    """``value`` as a RESP bulk string."""
    data = value.encode() if isinstance(value, str) else value
    return b"$%d\r\n%s\r\n" % (len(data), data)


_NO_PROGRESS = _bulk("") + _bulk("")


# -- what the table holds ----------------------------------------------------------------------------
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
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass
class _Lease:
    """Private state of one held lock: the public view plus token, progress and encoded arguments.

    Keys and the (token, fence) pair are RESP-encoded once, so a round over a thousand
    locks is a join of prepared bytes.
    """

    held: Held
    token: str
    lock_key: bytes
    fence_key: bytes
    renewed_at: float = 0.0
    delivered: int | None = None
    acked: int | None = None
    written: tuple[int, int] | None = None  # progress a quorum has stored
    stamp: bytes = b""  # bulk(token) + bulk(fence)

    def __post_init__(self) -> None:
        self.set_fence(self.held.fencing_token)

    def set_fence(self, fence: int) -> None:
        self.held.fencing_token = fence
        self.stamp = _bulk(self.token) + _bulk(str(fence))

    def progress(self) -> tuple[int, int] | None:
        """Progress to write in the next round: recorded and not yet stored by a quorum."""
        if self.delivered is None or self.acked is None or (self.delivered, self.acked) == self.written:
            return None
        return (self.delivered, self.acked)

    def claim_args(self, progress: tuple[int, int] | None) -> bytes:
        """The four CLAIM arguments of this lock: token, fence, delivered, acked."""
        if progress is None:
            return self.stamp + _NO_PROGRESS
        return self.stamp + _bulk(str(progress[0])) + _bulk(str(progress[1]))


def _evalsha(sha: str, keys: Sequence[bytes], args: Sequence[bytes], nargs: int) -> bytes:
    """One ``EVALSHA`` in RESP from encoded parts: ``keys`` one bulk string each, ``args``
    chunks of bulk strings holding ``nargs`` arguments in all.

    Packed once per round and sent to every node as is: packing 6000 arguments with
    redis-py's generic packer, once per node, would alone take the 20 ms a renewal of a
    thousand locks on three nodes may take.
    """
    head = b"*%d\r\n" % (3 + len(keys) + nargs) + _bulk("EVALSHA") + _bulk(sha) + _bulk(str(len(keys)))
    return b"".join([head, *keys, *args])


class _Node:
    """One Redis node: a client with the scripts registered on it and a thread of its own.

    One thread per node runs its calls in order, so a slow node delays only itself; a call
    that would start after its round's deadline is skipped.
    """

    def __init__(self, index: int, url: str, settings: LockSettings) -> None:
        self.index, self.url = index, url
        timeout = settings.socket_timeout_ms / 1000
        try:
            self.client = redis.Redis.from_url(
                url, socket_timeout=timeout, socket_connect_timeout=timeout, health_check_interval=0,
                retry=Retry(NoBackoff(), 0))
        except ValueError as exc:
            raise ConfigError(f"bad Redis URL {url!r}: {exc}") from exc
        self.scripts = {name: self.client.register_script(getattr(lock_scripts, name))
                        for name in ("CLAIM", "FENCE", "RELEASE", "DESCRIBE")}
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"rk-lock-node{index}")
        self.answering = True  # for logging changes only

    def sha(self, script: str) -> str:
        return self.scripts[script].sha

    def call(self, script: str, command: bytes, deadline: float) -> Any:
        """Send a packed ``EVALSHA`` of ``script``; loads the script once if the node lost it."""
        if time.monotonic() >= deadline:
            raise TimeoutError(f"redis node {self.url}: round deadline passed before the call started")
        pool = self.client.connection_pool
        conn = pool.get_connection()
        try:
            try:
                conn.send_packed_command([command])
                return conn.read_response()
            except NoScriptError:  # a restarted node: its script cache is empty
                conn.send_packed_command([_bulk_command("SCRIPT", "LOAD", self.scripts[script].script)])
                conn.read_response()
                conn.send_packed_command([command])
                return conn.read_response()
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)
        self.client.close()


def _bulk_command(*args: str) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(map(_bulk, args))


# -- the table ----------------------------------------------------------------------------------------
class LockTable:
    """Partition locks of one consumer (``owner``) of one group, over N Redis nodes.

    The race it prevents, as a timeline (two members of a group, A and B, and 3 nodes)::

        t=0   A: lock_batch([p]) -> 3 of 3 nodes: p is A's, fencing token 7, valid 30 s
        t=5   A's process stalls (GC, swap, SIGSTOP) while handling p's messages
        t=30  A would have renewed at t=20; its client expiry passes: p is lost for A
        t=60  the lease ends on the nodes; B: lock_batch([p]) -> p is B's, token 8
        t=61  A wakes up: is_held(p) is False (monotonic clock), so A stops before it
              commits; a write A already had in flight carries token 7 < 8 and the
              store that checks fencing tokens refuses it

    Without the client expiry A would keep going on a lock B owns; without the fencing
    token a write in flight at the stall would still land.

    **Quorum and validity.** Every round asks all nodes in parallel and waits at most
    ``socket_timeout_ms``; a node that is down, slow or refusing is a no-vote. A lock is
    won or renewed when ``N // 2 + 1`` nodes say it is ours *and* the round ended before
    :func:`valid_until` of its start (client expiry minus drift). Locks that miss the
    quorum are released again on every node (token check in Lua), including nodes that
    did not answer in time and may have taken them late.

    **Fencing tokens.** Each lock has a counter per node (``RedisKeys.fence``, no expiry).
    Acquiring takes two rounds: (1) claim the entry; every answering node also reports the
    highest token it knows, ``max(counter, entry.fence)``; (2) with a quorum won, the
    token is ``issue_token(reported, floor)`` = one above the maximum over *all*
    answering nodes and over the highest token this process has seen (``floor``), and it
    is written to every answering node as ``counter = max(counter, token)`` and into our
    entry. The acquisition counts only when a quorum confirms step 2, so an issued token
    is stored on a majority before anyone uses it. Why the next token is larger, even if
    a node lost its data:

    - any two majorities share a node; the next acquirer's step 1 reads from a majority
      (it must win one), so it reads at least one node that stored our token in step 2,
      unless that node lost its data since;
    - node data loss is repaired while the lock is held: every renewal re-writes a missing
      entry and raises the counter to the token (CLAIM), so a node that restarted empty
      holds the token again after the owner's next renewal, and a second node may then
      fail as well;
    - plain ``INCR`` per node would not do: a node that restarted empty starts from 1, and
      a quorum made of that node and one that never saw the last token would hand out a
      smaller token. Taking the maximum over all answers and writing it back makes every
      answering node catch up;
    - tokens can go backwards only if a majority of nodes lost the token between two
      renewals (or between the last release and the next acquisition) -- the same
      fault that breaks mutual exclusion itself, Redlock's assumption.

    **Re-entrance.** ``lock_batch`` on a lock this table holds renews it and keeps its token
    and fencing token. An entry of the same owner that the table does not hold (an earlier
    acquisition that failed or was lost) is taken over with a new token. Owner ids must be
    unique per consumer instance (RocketMQ: ``host@pid@random``).

    Parameters:
        redis_urls: the independent Redis nodes, ``redis://host:port/db``; 1 or an odd number.
        group: the consumer group the locks belong to.
        owner: this consumer's id, unique in the group.
        keys: Redis key names (``RedisKeys.lock`` and ``RedisKeys.fence`` are used).
        settings: timings, see :class:`LockSettings`.

    Raises:
        ConfigError: no nodes, an empty group or owner, or a bad URL.

    Thread safety: the query methods and :meth:`record_progress` may be called from any
    thread; the rounds (lock, renew, unlock, describe) run one at a time.
    """

    def __init__(self, redis_urls: list[str], group: str, owner: str, keys: RedisKeys,
                 settings: LockSettings = LockSettings()) -> None:
        if isinstance(redis_urls, str) or not redis_urls:
            raise ConfigError("LockTable needs a list of at least one Redis URL")
        if not group or not isinstance(group, str):
            raise ConfigError("LockTable needs a consumer group name")
        if not owner or not isinstance(owner, str):
            raise ConfigError("LockTable needs an owner id")
        if not isinstance(settings, LockSettings):
            raise ConfigError(f"settings must be a LockSettings, got {type(settings).__name__}")
        self.group, self.owner, self.keys, self.settings = group, owner, keys, settings
        self.quorum = quorum(len(redis_urls))
        self._nodes: list[_Node] = []
        try:
            for i, url in enumerate(redis_urls):
                self._nodes.append(_Node(i, url, settings))
        except BaseException:
            self._close_nodes()
            raise
        self._leases: dict[TopicPartition, _Lease] = {}
        self._floor: dict[TopicPartition, int] = {}  # highest fencing token seen per lock
        self.lost_total = 0  # held locks lost since start: renewal failed or came too late (metrics)
        self._state = threading.Lock()  # guards _leases and _floor
        self._rounds = threading.Lock()  # one round at a time
        self._closed = False

    # -- queries ----------------------------------------------------------------------------------
    def is_held(self, tp: TopicPartition) -> bool:
        """True when ``tp`` is held and its client-side validity has not passed (monotonic clock)."""
        with self._state:
            lease = self._leases.get(tp)
            return lease is not None and time.monotonic() < lease.held.valid_until

    def valid_until(self, tp: TopicPartition) -> float:
        """Monotonic time until which ``tp`` is ours (0.0 when not held); lock-free, for per-message checks."""
        lease = self._leases.get(tp)  # one dict read: atomic under the GIL, no need for the state lock
        return lease.held.valid_until if lease is not None else 0.0

    def held(self) -> dict[TopicPartition, Held]:
        """Copies of the locks held and still valid."""
        now = time.monotonic()
        with self._state:
            return {tp: dataclasses.replace(lease.held) for tp, lease in self._leases.items()
                    if now < lease.held.valid_until}

    def fencing_token(self, tp: TopicPartition) -> int | None:
        """The fencing token of ``tp`` while it is held and valid, else ``None``."""
        with self._state:
            lease = self._leases.get(tp)
            if lease is None or time.monotonic() >= lease.held.valid_until:
                return None
            return lease.held.fencing_token

    def renew_due(self) -> bool:
        """True when some held lock's last successful round began ``renew_interval_ms`` ago or more."""
        now = time.monotonic()
        interval = self.settings.renew_interval_ms / 1000
        with self._state:
            return any(now - lease.renewed_at >= interval for lease in self._leases.values())

    def record_progress(self, tp: TopicPartition, delivered: int, acked: int) -> None:
        """Record the owner's delivered and acked offsets of ``tp`` (DeFiBus transition state).

        Written to the lock entry by the next renewal, in the same round trip. Ignored
        when ``tp`` is not held (a lost lock has no entry of ours to write to).

        Raises:
            TypeError: an offset is not an integer.
        """
        for name, value in (("delivered", delivered), ("acked", acked)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"record_progress: {name} must be an int offset, got {value!r}")
        with self._state:
            lease = self._leases.get(tp)
            if lease is not None:
                lease.delivered, lease.acked = delivered, acked

    # -- rounds -----------------------------------------------------------------------------------
    def lock_batch(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Held]:
        """Lock many partitions at once (RocketMQ ``lockBatchMQ``); returns those won.

        One round per node for all partitions, plus a second round (fencing tokens) when
        some are newly won. Partitions already held are renewed (re-entrant). A partition
        is won when a quorum took it within the validity; the others are released again
        where they may have been taken. A held partition whose renewal fails here is lost.

        Raises:
            StateError: the table is closed.
            ValueError: a partition is not a ``(topic, partition)`` pair.
        """
        wanted = _partitions(partitions)
        if not wanted:
            return {}
        with self._rounds:
            self._check_open()
            now = time.monotonic()
            with self._state:
                renewing = {tp: self._leases[tp] for tp in wanted
                            if tp in self._leases and now < self._leases[tp].held.valid_until}
            fresh = [tp for tp in wanted if tp not in renewing]
            attempts = {tp: self._new_lease(tp) for tp in fresh}
            started = time.monotonic()
            order = list(renewing) + fresh
            leases = {**renewing, **attempts}
            results, sent = self._claim([leases[tp] for tp in order])
            deadline = valid_until(started, self.settings)
            votes = _tally([r[0] if r else None for r in results], len(order))
            renewed, lost = self._settle(renewing, votes[:len(renewing)], sent, started, deadline)

            candidates = [tp for i, tp in enumerate(fresh) if votes[len(renewing) + i] >= self.quorum]
            won = self._issue_tokens(attempts, candidates, _fences(results, fresh), deadline) if candidates else {}
            failed = [attempts[tp] for tp in fresh if tp not in won]
            with self._state:
                for tp, lease in won.items():
                    lease.held.acquired_at = lease.renewed_at = started
                    lease.held.valid_until = deadline
                    self._leases[tp] = lease
                for tp in lost:
                    self._leases.pop(tp, None)
                self.lost_total += len(lost)
            self._release(failed + [renewing[tp] for tp in lost])
            if lost:
                log.warning("%s lost %d lock(s) of group %s while re-locking: %s",
                            self.owner, len(lost), self.group, sorted(lost))
            with self._state:
                return {tp: dataclasses.replace(leases[tp].held) for tp in order if tp in won or tp in renewed}

    def renew_batch(self) -> set[TopicPartition]:
        """Renew every held lock in one round per node; returns the locks now lost.

        A lock is lost when its client expiry passed before this call, or this round did
        not renew it on a quorum of nodes before the round's validity ended. Lost locks are
        dropped from the table and released where they are still ours. Progress recorded
        with :meth:`record_progress` is written in the same round.

        Raises:
            StateError: the table is closed.
        """
        with self._rounds:
            self._check_open()
            now = time.monotonic()
            with self._state:
                expired = {tp: lease for tp, lease in self._leases.items() if now >= lease.held.valid_until}
                live = {tp: lease for tp, lease in self._leases.items() if tp not in expired}
            lost: set[TopicPartition] = set(expired)
            if live:
                started = time.monotonic()
                results, sent = self._claim(list(live.values()))
                votes = _tally([r[0] if r else None for r in results], len(live))
                _, failed = self._settle(live, votes, sent, started, valid_until(started, self.settings))
                lost |= failed
            if lost:
                with self._state:
                    released = [self._leases.pop(tp) for tp in lost]
                    self.lost_total += len(lost)
                log.warning("%s lost %d lock(s) of group %s: %s", self.owner, len(lost), self.group, sorted(lost))
                self._release(released)
            return lost

    def unlock_batch(self, partitions: Iterable[TopicPartition]) -> None:
        """Release partitions on every node, each only where the entry is still ours.

        The table forgets them first, so :meth:`is_held` is False at once. Partitions not
        held are ignored; nodes that do not answer let the entry expire with its lease.

        Raises:
            StateError: the table is closed.
        """
        wanted = _partitions(partitions)
        with self._rounds:
            self._check_open()
            with self._state:
                leases = [self._leases.pop(tp) for tp in wanted if tp in self._leases]
            self._release(leases)

    def describe(self, tp: TopicPartition) -> dict[str, Any] | None:
        """The lock entry of ``tp`` as a quorum of nodes sees it, or ``None`` when no quorum agrees.

        Returns a dict with ``owner``, ``fencing_token``, ``delivered`` and ``acked`` (``None``
        until recorded), ``ttl_ms`` (how long a quorum still holds it) and ``votes`` (how many
        nodes agree). A new owner reads it to decide whether the old one left work unacked.

        Raises:
            StateError: the table is closed.
        """
        (tp,) = _partitions([tp])
        keys = [_bulk(self.keys.lock(self.group, *tp)), _bulk(self.keys.fence(self.group, *tp))]
        with self._rounds:
            self._check_open()
            results = self._round("DESCRIBE", lambda sha: _evalsha(sha, keys, [], 0))
        return agree([_decode_entry(r) for r in results], self.quorum)

    def close(self, release: bool = True) -> None:
        """Release every held lock (unless ``release`` is False) and close the node clients. Idempotent."""
        with self._rounds:
            if self._closed:
                return
            self._closed = True
            with self._state:
                leases = list(self._leases.values())
                self._leases.clear()
            try:
                if release and leases:
                    self._release(leases)
            finally:
                self._close_nodes()

    def __enter__(self) -> LockTable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LockTable(group={self.group!r}, owner={self.owner!r}, nodes={len(self._nodes)}, held={len(self._leases)})"

    # -- internals --------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise StateError(f"lock table of {self.owner!r} in group {self.group!r} is closed")

    def _close_nodes(self) -> None:
        for node in self._nodes:
            try:
                node.close()
            except Exception:  # closing is best effort
                log.debug("closing redis node %s failed", node.url, exc_info=True)

    def _new_lease(self, tp: TopicPartition) -> _Lease:
        held = Held(tp[0], tp[1], fencing_token=0, acquired_at=0.0, valid_until=0.0)
        return _Lease(held, secrets.token_hex(16), _bulk(self.keys.lock(self.group, *tp)),
                      _bulk(self.keys.fence(self.group, *tp)))

    def _issue_tokens(self, attempts: dict[TopicPartition, _Lease], candidates: Sequence[TopicPartition],
                      reported: dict[TopicPartition, list[int]], deadline: float) -> dict[TopicPartition, _Lease]:
        """Second acquisition step for locks a quorum granted: issue and store fencing tokens.

        Returns the acquisitions a quorum confirmed before ``deadline``: those are won.
        """
        with self._state:
            for tp in candidates:
                token = issue_token(reported[tp], self._floor.get(tp, 0))
                attempts[tp].set_fence(token)
                self._floor[tp] = token
        confirmed = self._fence([attempts[tp] for tp in candidates])
        if time.monotonic() >= deadline:
            return {}
        return {tp: attempts[tp] for tp, n in zip(candidates, confirmed) if n >= self.quorum}

    def _settle(self, leases: dict[TopicPartition, _Lease], votes: Sequence[int],
                sent: Sequence[tuple[int, int] | None], started: float,
                deadline: float) -> tuple[set[TopicPartition], set[TopicPartition]]:
        """Apply a renewal round's votes: (renewed, lost). ``sent``: the progress each lease wrote."""
        in_time = time.monotonic() < deadline
        renewed, lost = set(), set()
        with self._state:
            for (tp, lease), n, progress in zip(leases.items(), votes, sent):
                if n >= self.quorum and in_time:
                    lease.held.valid_until, lease.renewed_at = deadline, started
                    if progress is not None:
                        lease.written = progress
                    renewed.add(tp)
                else:
                    lost.add(tp)
        return renewed, lost

    def _claim(self, leases: Sequence[_Lease]) -> tuple[list[Any], list[tuple[int, int] | None]]:
        """CLAIM round: (per node results, the progress sent per lease)."""
        with self._state:  # progress may change under us
            sent = [lease.progress() for lease in leases]
            args = [lease.claim_args(progress) for lease, progress in zip(leases, sent)]
        keys = [k for lease in leases for k in (lease.lock_key, lease.fence_key)]
        head = [_bulk(self.owner), _bulk(str(self.settings.lease_ms))]
        results = self._round("CLAIM", lambda sha: _evalsha(sha, keys, head + args, 2 + 4 * len(leases)))
        return results, sent

    def _fence(self, leases: Sequence[_Lease]) -> list[int]:
        """Second acquisition step: store the issued tokens; returns per lock how many nodes confirmed."""
        keys = [k for lease in leases for k in (lease.lock_key, lease.fence_key)]
        args = [_bulk(self.owner), *(lease.stamp for lease in leases)]
        results = self._round("FENCE", lambda sha: _evalsha(sha, keys, args, 1 + 2 * len(leases)))
        return _tally(results, len(leases))

    def _release(self, leases: Sequence[_Lease]) -> None:
        if not leases:
            return
        keys = [lease.lock_key for lease in leases]
        args = [_bulk(self.owner), *(_bulk(lease.token) for lease in leases)]
        self._round("RELEASE", lambda sha: _evalsha(sha, keys, args, 1 + len(leases)))

    def _round(self, script: str, pack: Callable[[str], bytes]) -> list[Any]:
        """Run one script on every node in parallel; ``None`` for nodes that failed or were too slow."""
        deadline = time.monotonic() + self.settings.socket_timeout_ms / 1000
        command = pack(self._nodes[0].sha(script))  # same text, same sha on every node
        futures: list[Future] = [node.executor.submit(node.call, script, command, deadline) for node in self._nodes]
        wait(futures, timeout=max(0.0, deadline - time.monotonic()))
        results: list[Any] = []
        for node, future in zip(self._nodes, futures):
            if not future.done():
                problem: BaseException | str | None = f"no answer within {self.settings.socket_timeout_ms} ms"
            else:
                problem = future.exception()
                if problem is not None and not isinstance(problem, (RedisError, OSError)):
                    log.error("redis node %s: %s failed", node.url, script, exc_info=problem)
            results.append(None if problem is not None else future.result())
            if problem is not None and node.answering:
                log.warning("redis node %s stopped answering the lock table (%s): %s", node.url, script, problem)
            elif problem is None and not node.answering:
                log.info("redis node %s answers the lock table again", node.url)
            node.answering = problem is None
        return results


def _partitions(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    """Validated ``(topic, partition)`` pairs, duplicates dropped, order kept."""
    out: dict[TopicPartition, None] = {}
    for item in partitions:
        try:
            topic, partition = item
        except (TypeError, ValueError):
            raise ValueError(f"expected a (topic, partition) pair, got {item!r}") from None
        if not isinstance(topic, str) or not topic or isinstance(partition, bool) or not isinstance(partition, int) \
                or partition < 0:
            raise ValueError(f"expected a (topic: str, partition: int >= 0) pair, got {item!r}")
        out[(topic, partition)] = None
    return list(out)


def _tally(flag_strings: Sequence[bytes | None], count: int) -> list[int]:
    """Votes per lock from each node's flag string (``b"1"`` = ours on that node; ``None`` = no answer)."""
    votes = [0] * count
    for flags in flag_strings:
        if flags is None:
            continue
        if len(flags) != count:
            log.error("a lock script answered %d flags for %d locks; ignoring that node", len(flags), count)
            continue
        for i, flag in enumerate(flags):
            if flag == 49:  # ord("1")
                votes[i] += 1
    return votes


def _fences(results: Sequence[Any], fresh: Sequence[TopicPartition]) -> dict[TopicPartition, list[int]]:
    """The highest fencing token each answering node reported per newly claimed lock."""
    reported: dict[TopicPartition, list[int]] = {tp: [] for tp in fresh}
    for result in results:
        if result is None:
            continue
        values = result[1].split()
        if len(values) != len(fresh):
            log.error("a lock script reported %d fences for %d locks; ignoring that node", len(values), len(fresh))
            continue
        for tp, value in zip(fresh, values):
            reported[tp].append(int(value))
    return reported


def _decode_entry(result: Any) -> dict[str, Any] | None:
    """One node's DESCRIBE answer as a dict, ``None`` when it did not answer or has no entry."""
    if result is None or result[0] is None:
        return None
    owner, token, fence, delivered, acked, pttl, _counter = result

    def number(raw: bytes | None) -> int | None:
        return None if raw is None else int(raw)

    return {"owner": owner.decode(), "token": token.decode() if token else "", "fence": number(fence),
            "delivered": number(delivered), "acked": number(acked), "ttl_ms": max(int(pttl), 0)}


# -- renewal thread and benchmark -------------------------------------------------------------------
class LockRenewer:
    """A daemon thread that calls :meth:`LockTable.renew_batch` whenever :meth:`~LockTable.renew_due`.

    For callers without a loop of their own; a consumer's rebalance thread calls
    ``renew_batch`` itself instead.

    Parameters:
        table: the lock table to keep renewed.
        on_lost: called (in the renewer thread) with the set of locks a renewal reported lost.
        tick_ms: how often to check whether a renewal is due (default: a tenth of the interval,
            between 10 ms and 1 s).

    >>> with LockRenewer(table, on_lost=print):   # doctest: +SKIP
    ...     consume()
    """

    def __init__(self, table: LockTable, on_lost: Callable[[set[TopicPartition]], None] | None = None,
                 tick_ms: int | None = None) -> None:
        self.table, self.on_lost = table, on_lost
        self.tick = (tick_ms if tick_ms is not None else min(max(table.settings.renew_interval_ms // 10, 10), 1000)) / 1000
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rk-lock-renew-{table.owner}", daemon=True)

    def start(self) -> LockRenewer:
        self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Stop the thread (it finishes a round in flight) and wait for it."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def __enter__(self) -> LockRenewer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.tick):
            try:
                if not self.table.renew_due():
                    continue
                lost = self.table.renew_batch()
            except StateError:
                return  # the table was closed under us
            except Exception:
                log.exception("lock renewal of %s failed", self.table.owner)
                continue
            if lost and self.on_lost is not None:
                try:
                    self.on_lost(lost)
                except Exception:
                    log.exception("on_lost callback of %s failed", self.table.owner)


def bench_renew(redis_urls: list[str], n_locks: int = 1000, rounds: int = 5) -> float:
    """Seconds one ``renew_batch`` of ``n_locks`` locks takes on these nodes (median of ``rounds``).

    Locks ``n_locks`` partitions of a throw-away group under a unique key prefix, renews
    them ``rounds`` times, then unlocks them and deletes their fence counters.

    Raises:
        LockError: the locks could not all be taken (nodes down or slow).
    """
    if n_locks < 1 or rounds < 1:
        raise ValueError("bench_renew needs n_locks >= 1 and rounds >= 1")
    keys = RedisKeys(f"rkbench-{uuid.uuid4().hex[:8]}")
    group, topic = "bench", "bench"
    partitions = [(topic, p) for p in range(n_locks)]
    with LockTable(redis_urls, group, f"bench@{os.getpid()}", keys) as table:
        try:
            won = table.lock_batch(partitions)
            if len(won) != n_locks:
                raise LockError(keys.lock(group, topic, 0), f"bench took only {len(won)} of {n_locks} locks")
            times = []
            for _ in range(rounds):
                started = time.perf_counter()
                lost = table.renew_batch()
                times.append(time.perf_counter() - started)
                if lost:
                    raise LockError(keys.lock(group, topic, 0), f"bench lost {len(lost)} locks while renewing")
        finally:
            table.unlock_batch(partitions)
            _delete_fences(redis_urls, [keys.fence(group, topic, p) for p in range(n_locks)])
    return statistics.median(times)


def _delete_fences(redis_urls: list[str], names: list[str]) -> None:
    for url in redis_urls:
        client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
        try:
            for i in range(0, len(names), 1000):
                client.delete(*names[i:i + 1000])
        except RedisError as exc:
            log.debug("bench cleanup on %s failed: %s", url, exc)
        finally:
            client.close()
