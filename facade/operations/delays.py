"""The delay backlog: per delay level (and internal step), what waits and when it is due.

A tier's partition is FIFO by due time (:mod:`rocketkafka.schedule.tiers`), so its head
-- the record at the forwarders' committed offset -- says when the forwarder next acts;
everything from the committed offset to the log end waits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rocketkafka.config import Settings
from rocketkafka.delay import DEFAULT_GROUP
from rocketkafka.names import Header
from rocketkafka.operations.groups import lock_views
from rocketkafka.operations.reading import LogReader
from rocketkafka.schedule.tiers import Tiers


@dataclass(frozen=True)
class LevelBacklog:
    """One delay topic: records waiting, the earliest due time among the partition heads, and who forwards it.

    Attributes:
        level: the delay level (``None`` for an internal step topic).
        delay_ms: how long a record waits on this topic.
        waiting: records between the forwarders' committed offsets and the log ends.
        oldest_due_ms: the earliest final due time (epoch ms) among the partition heads (``None``: none wait).
        next_due_ms: the earliest time a head leaves this topic (delivered or moved on), epoch ms.
        owners: forwarder instances holding this topic's partition locks.
    """

    topic: str
    level: int | None
    delay_ms: int
    waiting: int
    oldest_due_ms: int | None
    next_due_ms: int | None
    owners: list[str] = field(default_factory=list)


def delay_backlog(settings: Settings, forwarder_group: str = DEFAULT_GROUP) -> list[LevelBacklog]:
    """The backlog of every delay topic of ``settings``' prefix that exists (levels first, then steps)."""
    tiers = Tiers(settings.topics, settings.delay)
    out = []
    with LogReader(settings) as reader:
        for tier in [*tiers.levels, *tiers.steps]:
            if not reader.exists(tier.topic):  # hidden from this principal: its refusal, named
                continue
            tps = reader.partitions(tier.topic)
            ends = reader.ends(tps)
            committed = reader.committed(forwarder_group, tps)
            waiting, dues, hops = 0, [], []
            for tp in tps:
                low, high = ends[tp]
                start = committed.get(tp)
                start = low if start is None else max(start, low)
                waiting += max(0, high - start)
                head = reader.record_at(tp, start) if start < high else None
                if head is None:
                    continue
                raw = dict(head.headers() or []).get(Header.DELIVER_AT)
                if raw is not None and raw.isdigit():
                    due = int(raw)
                    dues.append(due)
                    hops.append(tier.hop_due(head.timestamp()[1], due))
            owners = sorted({v.owner for v in lock_views(settings, forwarder_group, tps) if v.owner})
            out.append(LevelBacklog(tier.topic, tier.level, tier.ms, waiting, min(dues, default=None),
                                    min(hops, default=None), owners))
    return out
