"""A consumer group as an operator sees it: progress per partition, members, locks (``mqadmin consumerProgress``).

Everything is read, nothing changed: committed offsets from Kafka, log ends from a
fetch (:mod:`~rocketkafka.operations.reading`), members from the Redis membership
table, owners from the Redis lock table as a quorum of nodes sees it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field

from rocketkafka.config import Settings
from rocketkafka.errors import ConfigError
from rocketkafka.operations.reading import LogReader
from rocketkafka.ordering.locks import LockSettings, LockTable
from rocketkafka.ordering.group.membership import MemberView, read_members
from rocketkafka.topic_partition import TP


#: The admin reads the lock table with patience: a fresh connection on a busy machine may take longer
#: than the 200 ms a consumer's round allows (a consumer renews; an operator must not see "no owner").
ADMIN_LOCK_SETTINGS = LockSettings(socket_timeout_ms=2000)


def admin_id() -> str:
    """The id the admin tools use where an owner or member id is needed (never a consumer's)."""
    return f"rocketkafka-admin@{socket.gethostname()}@{os.getpid()}"


@dataclass(frozen=True)
class LockView:
    """One partition's lock entry: who holds it, with which fencing token, for how long still."""

    topic: str
    partition: int
    owner: str | None
    fencing_token: int | None
    lease_left_ms: int | None
    delivered: int | None = None  # the owner's transition state (DeFiBus): last delivered offset
    acked: int | None = None


@dataclass(frozen=True)
class PartitionProgress:
    """One partition of a group: committed offset, log end, lag and its lock (``consumerProgress``)."""

    topic: str
    partition: int
    committed: int | None  # None: the group never committed this partition
    end: int
    lag: int  # end - committed (end - log start when never committed)
    owner: str | None
    fencing_token: int | None
    lease_left_ms: int | None


@dataclass(frozen=True)
class GroupStatus:
    """Members of a group, the allocation they use, and who owns which partition."""

    group: str
    members: list[MemberView]
    allocation: list[str]
    assignment: dict[str, list[TP]] = field(default_factory=dict)
    unowned: list[TP] = field(default_factory=list)


def group_topics(settings: Settings, group: str, reader: LogReader, topics: Iterable[str] = ()) -> list[str]:
    """The topics ``group`` consumes: what its live members subscribe, what it committed, and ``topics``.

    Raises:
        ConfigError: nothing names any topic of the group (no member, no commit, none given).
    """
    found = set(topics)
    for member in read_members(settings.require_redis(), group, settings.keys):
        found.update(t for t in member.info.get("topics", []) if isinstance(t, str))
    found.update(reader.committed_topics(group))
    found.discard(settings.topics.dead_letter(group))  # written by the group, never consumed by it
    existing = [t for t in sorted(found) if reader.exists(t)]  # one hidden from this principal: refused, named
    if not existing:
        raise ConfigError(f"group {group!r} has no live member and no committed offset; name its topics with --topic")
    return existing


def lock_views(settings: Settings, group: str, tps: Iterable[TP]) -> list[LockView]:
    """The lock entry of each partition as a quorum of the Redis nodes sees it."""
    table = LockTable(settings.require_redis(), group, admin_id(), settings.keys, ADMIN_LOCK_SETTINGS)
    try:
        out = []
        for tp in tps:
            entry = table.describe(tp) or {}
            out.append(LockView(tp[0], tp[1], entry.get("owner"), entry.get("fencing_token"), entry.get("ttl_ms"),
                                entry.get("delivered"), entry.get("acked")))
        return out
    finally:
        table.close(release=False)


def consumer_progress(settings: Settings, group: str, topics: Iterable[str] = ()) -> list[PartitionProgress]:
    """Per partition of the group's topics: committed offset, end, lag, owner, fencing token, lease left.

    Parameters:
        group: the consumer group.
        topics: topics to include besides those the group's members and commits name.
    """
    with LogReader(settings) as reader:
        tps = [tp for topic in group_topics(settings, group, reader, topics) for tp in reader.partitions(topic)]
        ends = reader.ends(tps)
        committed = reader.committed(group, tps)
    locks = {(v.topic, v.partition): v for v in lock_views(settings, group, tps)}
    out = []
    for tp in tps:
        low, high = ends[tp]
        done = committed.get(tp)
        lock = locks[tp]
        out.append(PartitionProgress(tp[0], tp[1], done, high, max(0, high - (low if done is None else done)),
                                     lock.owner, lock.fencing_token, lock.lease_left_ms))
    return out


def consumer_status(settings: Settings, group: str, topics: Iterable[str] = ()) -> GroupStatus:
    """The group's live members (what each said about itself), allocation strategies and assignment."""
    members = read_members(settings.require_redis(), group, settings.keys)
    with LogReader(settings) as reader:
        tps = [tp for topic in group_topics(settings, group, reader, topics) for tp in reader.partitions(topic)]
    assignment: dict[str, list[TP]] = {m.id: [] for m in members}
    unowned: list[TP] = []
    for view in lock_views(settings, group, tps):
        if view.owner is None:
            unowned.append((view.topic, view.partition))
        else:
            assignment.setdefault(view.owner, []).append((view.topic, view.partition))
    strategies = sorted({str(m.info.get("allocation")) for m in members if m.info.get("allocation")})
    return GroupStatus(group, members, strategies, assignment, unowned)
