"""The partition lock table: RocketMQ's broker-side queue locks over N independent Redis nodes.

RocketMQ's ``RebalanceLockManager`` keeps one lock per (consumer group, message
queue) for 60 s; the client re-locks every 20 s (``lockAll``) with one
``lockBatchMQ`` request for all its queues, and in strict mode a queue counts as
locked only when a quorum of replicas locked it. Here the replicas are N
independent Redis nodes (Redlock style, quorum ``N // 2 + 1``), the queue is a
Kafka partition, and the batch is one Lua call per node, all nodes in parallel
(:mod:`~rocketkafka.ordering.locks.nodes`).

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

import contextlib
import dataclasses
import logging
import secrets
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from rocketkafka.errors import ConfigError, StateError
from rocketkafka.names import RedisKeys
from rocketkafka.ordering.locks.nodes import LockNodes
from rocketkafka.ordering.locks.rounds import Lease, LockRounds
from rocketkafka.ordering.locks.settings import (
    Held,
    LockSettings,
    agree,
    decode_entry,
    issue_token,
    partition_pairs,
    quorum,
    reported_fences,
    valid_until,
)
from rocketkafka.topic_partition import TP

log = logging.getLogger(__name__)

#: Most locks one lock or unlock round carries: a node answers a round of 1,024 in tens of ms, while one of
#: 8,192 (packed in Python, run by one script) outlasted the socket timeout every time, so none was won.
ROUND_LOCKS = 1024


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
    - node data loss is repaired while the lock is held: a renewal finds a node that lost
      data by its session stamp and claims every lock there again, which re-writes a missing
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

    **Session leases.** The lease is the owner's, not each lock's: each node keeps one session
    hash per owner listing the locks it holds there, and a lock entry is live while its owner's
    session lists it (:mod:`~rocketkafka.ordering.locks.scripts`). A renewal extends that one key
    on every node that saw all earlier rounds and holds every lock for us; the others are asked to
    claim them all. Each lock remembers which nodes hold it (their last answer), so a renewal counts
    a node's vote only for the locks that node granted.

    **Re-entrance.** ``lock_batch`` on a lock this table holds renews it and keeps its token
    and fencing token. An entry of the same owner that the table does not hold (an earlier
    acquisition that failed or was lost) is taken over with a new token. Owner ids must be
    unique per consumer instance (RocketMQ: ``host@pid@random``).

    Parameters:
        redis_urls: the independent Redis nodes, ``redis://host:port/db``; 1 or an odd number.
        group: the consumer group the locks belong to.
        owner: this consumer's id, unique in the group.
        keys: Redis key names (``RedisKeys.lock``, ``RedisKeys.fence`` and ``RedisKeys.session`` are used).
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
        self._nodes = LockNodes(redis_urls, settings.socket_timeout_ms)
        self._leases: dict[TP, Lease] = {}
        self._floor: dict[TP, int] = {}  # highest fencing token seen per lock
        self.lost_total = 0  # held locks lost since start: renewal failed or came too late (metrics)
        self._state = threading.Lock()  # guards _leases, _floor and the leases' fields
        self._calls = LockRounds(self._nodes, group, owner, keys, settings.lease_ms, self._state)
        self._rounds = threading.Lock()  # one round at a time
        self._closed = False

    # -- queries ----------------------------------------------------------------------------------
    def is_held(self, tp: TP) -> bool:
        """True when ``tp`` is held and its client-side validity has not passed (monotonic clock)."""
        with self._state:
            lease = self._leases.get(tp)
            return lease is not None and time.monotonic() < lease.held.valid_until

    def valid_until(self, tp: TP) -> float:
        """Monotonic time until which ``tp`` is ours (0.0 when not held); lock-free, for per-message
        checks."""
        lease = self._leases.get(tp)  # one dict read: atomic under the GIL, no need for the state lock
        return lease.held.valid_until if lease is not None else 0.0

    def held(self) -> dict[TP, Held]:
        """Copies of the locks held and still valid."""
        now = time.monotonic()
        with self._state:
            return {tp: dataclasses.replace(lease.held) for tp, lease in self._leases.items()
                    if now < lease.held.valid_until}

    def fencing_token(self, tp: TP) -> int | None:
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

    def record_progress(self, tp: TP, delivered: int, acked: int) -> None:
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
    def lock_batch(self, partitions: Iterable[TP]) -> dict[TP, Held]:
        """Lock many partitions at once (RocketMQ ``lockBatchMQ``); returns those won.

        One round per node for all partitions, plus a second round (fencing tokens) when
        some are newly won. Partitions already held are renewed (re-entrant). A partition
        is won when a quorum took it within the validity; the others are released again
        where they may have been taken. A held partition whose renewal fails here is lost.

        Raises:
            StateError: the table is closed.
            ValueError: a partition is not a ``(topic, partition)`` pair.
            RedisPermissionError: so many nodes answered ``NOPERM`` that no quorum can (names the key pattern).
        """
        wanted = partition_pairs(partitions)
        if len(wanted) > ROUND_LOCKS:  # one round of 8,192 outlasted the socket timeout, every time: no quorum
            gathered: dict[TP, Held] = {}
            with self._state:
                held_before = {tp for tp in wanted if tp in self._leases}
            try:
                for i in range(0, len(wanted), ROUND_LOCKS):
                    gathered.update(self.lock_batch(wanted[i:i + ROUND_LOCKS]))
            except BaseException:  # the caller learns nothing of the earlier rounds: what they won is given back
                with contextlib.suppress(Exception):
                    self.unlock_batch([tp for tp in gathered if tp not in held_before])
                raise
            return gathered
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
            results, masks, sent = self._calls.claim([leases[tp] for tp in order])
            self._check_refused(order, list(attempts.values()))
            deadline = valid_until(started, self.settings)
            votes = [mask.bit_count() for mask in masks]  # this round's answers only
            renewed, lost = self._settle(renewing, votes[:len(renewing)], sent, started, deadline)

            candidates = [tp for i, tp in enumerate(fresh) if votes[len(renewing) + i] >= self.quorum]
            won = self._issue_tokens(attempts, candidates, reported_fences(results, fresh),
                                     deadline) if candidates else {}
            failed = [attempts[tp] for tp in fresh if tp not in won]
            with self._state:
                for tp, lease in won.items():
                    lease.held.acquired_at = lease.renewed_at = started
                    lease.held.valid_until = deadline
                    self._leases[tp] = lease
                for tp in lost:
                    self._leases.pop(tp, None)
                self.lost_total += len(lost)
            self._calls.release(failed + [renewing[tp] for tp in lost])
            if lost:
                log.warning("%s lost %d lock(s) of group %s while re-locking: %s",
                            self.owner, len(lost), self.group, sorted(lost))
            with self._state:
                return {tp: dataclasses.replace(leases[tp].held)
                        for tp in order if tp in won or tp in renewed}

    def renew_batch(self) -> set[TP]:
        """Renew every held lock in one round per node; returns the locks now lost.

        A node that saw every earlier round extends our session, one key whatever the number
        of locks (``RENEW``); any other node, or one that refused some lock before, is asked
        to claim them all again, which rewrites what it lost (``CLAIM``).

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
            lost: set[TP] = set(expired)
            failed: set[TP] = set()
            round_ms = 0.0
            if live:
                started = time.monotonic()
                votes, sent = self._calls.renew(list(live.values()))
                round_ms = (time.monotonic() - started) * 1000
                _, failed = self._settle(live, votes, sent, started, valid_until(started, self.settings))
                lost |= failed
            if lost:
                with self._state:
                    released = [self._leases.pop(tp) for tp in lost]
                    self.lost_total += len(lost)
                # which criterion fired, and how late: a stalled caller and a failing quorum read differently
                late_ms = max(((now - lease.held.valid_until) * 1000 for lease in expired.values()),
                              default=0.0)
                log.warning("%s lost %d lock(s) of group %s: %s (%d past their client expiry before the "
                            "round, by up to %.0f ms; %d without a quorum in time, round %.0f ms)",
                            self.owner, len(lost), self.group, sorted(lost), len(expired), late_ms,
                            len(failed), round_ms)
                self._calls.release(released)
            return lost

    def unlock_batch(self, partitions: Iterable[TP]) -> None:
        """Release partitions on every node, each only where the entry is still ours.

        The table forgets them first, so :meth:`is_held` is False at once. Partitions not
        held are ignored; a node that does not answer keeps the lock listed until our session there
        expires or a full claim there drops it.

        Raises:
            StateError: the table is closed.
        """
        wanted = partition_pairs(partitions)
        with self._rounds:
            self._check_open()
            with self._state:
                leases = [self._leases.pop(tp) for tp in wanted if tp in self._leases]
            for i in range(0, len(leases), ROUND_LOCKS):
                self._calls.release(leases[i:i + ROUND_LOCKS])

    def describe(self, tp: TP) -> dict[str, Any] | None:
        """The lock entry of ``tp`` as a quorum of nodes sees it, or ``None`` when no quorum agrees.

        Returns a dict with ``owner``, ``fencing_token``, ``delivered`` and ``acked`` (``None``
        until recorded), ``ttl_ms`` (how long a quorum still holds it) and ``votes`` (how many
        nodes agree). A new owner reads it to decide whether the old one left work unacked.

        Raises:
            StateError: the table is closed.
        """
        (tp,) = partition_pairs([tp])
        keys = [self.keys.lock(self.group, *tp), self.keys.fence(self.group, *tp)]
        with self._rounds:
            self._check_open()
            results = self._calls.describe(*keys)
            self._check_refused([tp], [])
        return agree([decode_entry(r) for r in results], self.quorum)

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
                    self._calls.release(leases)
            finally:
                self._nodes.close()

    def __enter__(self) -> LockTable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"LockTable(group={self.group!r}, owner={self.owner!r}, nodes={len(self._nodes)}, "
                f"held={len(self._leases)})")

    # -- internals --------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise StateError(f"lock table of {self.owner!r} in group {self.group!r} is closed")

    def _check_refused(self, tps: Sequence[TP], attempts: Sequence[Lease]) -> None:
        """Raise when so many nodes refused the last round that no quorum can answer (a user without the key
        pattern: it gets no lock, and says why, rather than never winning one); ``attempts`` are released."""
        refusal = self._nodes.refusal(self.quorum, f"the lock table of group {self.group!r}",
                                      [self.keys.lock(self.group, *tp) for tp in tps[:1]],
                                      f"{self.keys.prefix}:{{{self.group}}}:*")
        if refusal is not None:
            self._calls.release(attempts)
            raise refusal

    def _new_lease(self, tp: TP) -> Lease:
        held = Held(tp[0], tp[1], fencing_token=0, acquired_at=0.0, valid_until=0.0)
        return Lease(held, secrets.token_hex(16), self.keys.lock(self.group, *tp),
                      self.keys.fence(self.group, *tp))

    def _issue_tokens(self, attempts: dict[TP, Lease], candidates: Sequence[TP],
                      reported: dict[TP, list[int]], deadline: float) -> dict[TP, Lease]:
        """Second acquisition step for locks a quorum granted: issue and store fencing tokens.

        Returns the acquisitions a quorum confirmed before ``deadline``: those are won.
        """
        with self._state:
            for tp in candidates:
                token = issue_token(reported[tp], self._floor.get(tp, 0))
                attempts[tp].set_fence(token)
                self._floor[tp] = token
        confirmed = self._calls.fence([attempts[tp] for tp in candidates])
        if time.monotonic() >= deadline:
            return {}
        return {tp: attempts[tp] for tp, n in zip(candidates, confirmed) if n >= self.quorum}

    def _settle(self, leases: dict[TP, Lease], votes: Sequence[int],
                sent: Sequence[tuple[int, int] | None], started: float,
                deadline: float) -> tuple[set[TP], set[TP]]:
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
