"""Allocation strategies: which partitions a member takes (RocketMQ's ``AllocateMessageQueueStrategy``).

Every member runs the same pure function over the same sorted inputs, so the
group agrees on an assignment without talking to Kafka's group coordinator.

``allocate(group, current, partitions, members)`` gets the topic's partitions as
sorted ``(topic, partition)`` pairs and the live members sorted by id, and returns
the current member's share.
"""

from __future__ import annotations

import bisect
import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from rocketkafka.topic_partition import TP


@dataclass(frozen=True, order=True)
class Member:
    """A live member of a consumer group."""

    id: str
    room: str = ""  # machine room / availability zone


class AllocationStrategy(ABC):
    """Decides the current member's partitions; must be deterministic."""

    name: str = "abstract"

    @abstractmethod
    def allocate(self, group: str, current: str, partitions: Sequence[TP],
                 members: Sequence[Member]) -> list[TP]:
        """The share of ``current`` among ``members`` (empty when it is not a member)."""


def _index(current: str, members: Sequence[Member]) -> int:
    for i, m in enumerate(members):
        if m.id == current:
            return i
    return -1


class Averagely(AllocationStrategy):
    """Contiguous, near-equal ranges (``AllocateMessageQueueAveragely``, RocketMQ's default)."""

    name = "averagely"

    def allocate(self, group, current, partitions, members):
        index, n, m = _index(current, members), len(partitions), len(members)
        if index < 0 or n == 0:
            return []
        mod = n % m
        size = 1 if n <= m else (n // m + 1 if mod > 0 and index < mod else n // m)
        start = index * size if mod > 0 and index < mod else index * size + mod
        return [partitions[(start + i) % n] for i in range(min(size, n - start))]


class AveragelyByCircle(AllocationStrategy):
    """Round robin: member ``i`` takes partitions ``i, i+m, i+2m, ...``."""

    name = "circle"

    def allocate(self, group, current, partitions, members):
        index = _index(current, members)
        return [] if index < 0 else list(partitions[index::len(members)])


class ByConfig(AllocationStrategy):
    """A fixed list per member (``AllocateMessageQueueByConfig``); unlisted members take nothing.

    Parameters:
        table: member id -> partitions it owns, e.g. ``{"c1": [("orders", 0), ("orders", 1)]}``.
    """

    name = "config"

    def __init__(self, table: Mapping[str, Iterable[TP]]) -> None:
        self.table = {member: {tuple(tp) for tp in tps} for member, tps in table.items()}

    def allocate(self, group, current, partitions, members):
        mine = self.table.get(current, set())
        return [tp for tp in partitions if tp in mine]


class ConsistentHash(AllocationStrategy):
    """A hash ring with virtual nodes: a join or leave moves only about 1/m of the partitions.

    Parameters:
        virtual_nodes: ring points per member (RocketMQ's default is 10).
    """

    name = "consistent-hash"

    def __init__(self, virtual_nodes: int = 10) -> None:
        if virtual_nodes < 1:
            raise ValueError("virtual_nodes must be >= 1")
        self.virtual_nodes = virtual_nodes

    @staticmethod
    def _hash(text: str) -> int:
        return int.from_bytes(hashlib.md5(text.encode()).digest()[:8], "big")

    def allocate(self, group, current, partitions, members):
        if _index(current, members) < 0:
            return []
        ring = sorted((self._hash(f"{m.id}-{v}"), m.id) for m in members for v in range(self.virtual_nodes))
        points = [h for h, _ in ring]
        mine = []
        for tp in partitions:
            i = bisect.bisect_left(points, self._hash(f"{tp[0]}-{tp[1]}")) % len(ring)
            if ring[i][1] == current:
                mine.append(tp)
        return mine


class MachineRoomNearby(AllocationStrategy):
    """Prefer partitions of the member's own room (``AllocateMachineRoomNearby``).

    Partitions of a room with live members go to those members (by ``inner``);
    partitions of a room with none are shared by every member.

    Parameters:
        room_of: ``(topic, partition) -> room``.
        inner: the strategy used inside a room (default :class:`Averagely`).
    """

    name = "machine-room"

    def __init__(self, room_of: Callable[[TP], str], inner: AllocationStrategy | None = None) -> None:
        self.room_of = room_of
        self.inner = inner or Averagely()

    def allocate(self, group, current, partitions, members):
        me = next((m for m in members if m.id == current), None)
        if me is None:
            return []
        rooms_with_members = {m.room for m in members}
        local = [tp for tp in partitions if self.room_of(tp) == me.room]
        orphans = [tp for tp in partitions if self.room_of(tp) not in rooms_with_members]
        same_room = [m for m in members if m.room == me.room]
        return (self.inner.allocate(group, current, local, same_room)
                + self.inner.allocate(group, current, orphans, members))


_BY_NAME: dict[str, Callable[[], AllocationStrategy]] = {
    Averagely.name: Averagely,
    AveragelyByCircle.name: AveragelyByCircle,
    ConsistentHash.name: ConsistentHash,
}


def strategy_named(name: str) -> AllocationStrategy:
    """A parameterless strategy by name (``averagely``, ``circle``, ``consistent-hash``)."""
    try:
        return _BY_NAME[name]()
    except KeyError:
        raise ValueError(f"unknown allocation strategy {name!r}; choose from {sorted(_BY_NAME)}") from None
