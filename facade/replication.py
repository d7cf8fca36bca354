"""How internal topics are replicated, and the check that existing ones are as durable as wanted.

Delayed messages and open transactions live only in rocketkafka's internal topics (delay
levels, half / op topics, retry and dead-letter topics, ...). Created with one replica, they
sit on one broker: lose it and the delays and transactions stop, or are gone with its disk.
So internal topics take the broker's ``default.replication.factor`` unless the settings say
otherwise (CreateTopics' replication factor ``-1``, KIP-464), and a client that finds one
with fewer replicas than wanted, or with replicas out of sync, says so once.

>>> p = PartitionReplicas(0, leader=1, replicas=(1, 2, 3), isr=(1, 3))
>>> replication_problem(TopicReplication("rk.txn.half", (p,)), wanted=3)
'internal topic rk.txn.half is under-replicated: partition 0 has replicas [1, 2, 3], ISR [1, 3] (leader 1)'
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

#: CreateTopics' replication factor that means "the broker's ``default.replication.factor``" (KIP-464).
BROKER_DEFAULT = -1

#: Partitions named in one warning at most (the rest are counted).
_SHOWN = 3


@dataclass(frozen=True)
class PartitionReplicas:
    """Where one partition lives: its leader (-1: none), replica brokers and in-sync replicas."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def under_replicated(self) -> bool:
        """An in-sync set smaller than the replica set (a broker is down or behind), or no leader."""
        return self.leader < 0 or len(set(self.isr)) < len(set(self.replicas))

    def describe(self) -> str:
        return (f"partition {self.partition} has replicas {list(self.replicas)}, ISR {list(self.isr)} "
                f"({'no leader' if self.leader < 0 else f'leader {self.leader}'})")


@dataclass(frozen=True)
class TopicReplication:
    """The replica placement of one topic's partitions, as the broker's metadata reports it."""

    topic: str
    partitions: tuple[PartitionReplicas, ...]

    @property
    def replication_factor(self) -> int:
        """The fewest replicas any partition has (0 for a topic without partitions)."""
        return min((len(p.replicas) for p in self.partitions), default=0)

    @property
    def under_replicated(self) -> tuple[PartitionReplicas, ...]:
        return tuple(p for p in self.partitions if p.under_replicated)

    @classmethod
    def from_metadata(cls, topic: str, metadata: Any) -> TopicReplication:
        """From confluent-kafka's ``TopicMetadata`` (``list_topics().topics[topic]``)."""
        parts = (PartitionReplicas(p.id, p.leader, tuple(p.replicas), tuple(p.isrs))
                 for p in metadata.partitions.values())
        return cls(topic, tuple(sorted(parts, key=lambda p: p.partition)))


def replication_problem(topic: TopicReplication, wanted: int | None, source: str = "") -> str | None:
    """What is wrong with ``topic``'s durability, as one warning line; None when nothing is.

    Parameters:
        topic: the topic's placement.
        wanted: the replication factor it should have (None: unknown, only the ISR is judged).
        source: where ``wanted`` comes from, for the warning (a setting's name).
    """
    problems = []
    if wanted is not None and 0 < topic.replication_factor < wanted:
        problems.append(f"has {topic.replication_factor} replica(s), fewer than the {wanted} wanted"
                        + (f" by {source}" if source else "")
                        + " (it was created before or elsewhere; kafka-reassign-partitions adds replicas)")
    lagging = topic.under_replicated
    if lagging:
        shown = "; ".join(p.describe() for p in lagging[:_SHOWN])
        more = f"; and {len(lagging) - _SHOWN} more partition(s)" if len(lagging) > _SHOWN else ""
        problems.append(f"is under-replicated: {shown}{more}")
    if not problems:
        return None
    return f"internal topic {topic.topic} " + ", and ".join(problems)


class ReplicationWarnings:
    """Logs each internal topic's replication problem once per process (clients start often; one line is enough)."""

    def __init__(self) -> None:
        self._told: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def check(self, cluster: str, topics: Iterable[TopicReplication], wanted: int | None,
              source: str = "") -> list[str]:
        """Warn about each topic of ``cluster`` with a problem not warned about yet; returns the lines logged."""
        logged = []
        for topic in topics:
            problem = replication_problem(topic, wanted, source)
            if problem is None:
                continue
            with self._lock:
                if (cluster, topic.topic) in self._told:
                    continue
                self._told.add((cluster, topic.topic))
            log.warning("%s", problem)
            logged.append(problem)
        return logged


#: The process's record of warnings given (see :class:`ReplicationWarnings`).
WARNINGS = ReplicationWarnings()


def internal_topic_config(min_insync_replicas: int | None) -> Mapping[str, str]:
    """Topic configs for a new internal topic: ``min.insync.replicas`` when set, else the broker's."""
    return {} if min_insync_replicas is None else {"min.insync.replicas": str(min_insync_replicas)}
