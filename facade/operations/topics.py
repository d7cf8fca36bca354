"""The health of the internal topics: how many replicas each has, how many are in sync, and what is wrong.

Delayed messages and open transactions live only in internal topics, so an operator
needs to see that they are as durable as wanted (``rocketkafka admin topics``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.errors import TopicNotFoundError
from rocketkafka.refusals import secured
from rocketkafka.replication import PartitionReplicas, replication_problem

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InternalTopicHealth:
    """One internal topic's replication.

    Attributes:
        replication_factor: the fewest replicas any partition has.
        smallest_isr: the fewest in-sync replicas any partition has.
        min_insync_replicas: the topic's ``min.insync.replicas`` (None where the broker does not say).
        wanted: the replication factor it should have (the setting, else the broker's default; None: unknown).
        under_replicated: partitions whose ISR is smaller than their replicas, or without a leader.
        problem: what is wrong, in words (None: nothing).
        placement: leader, replicas and ISR of every partition.
    """

    topic: str
    partitions: int
    replication_factor: int
    smallest_isr: int
    min_insync_replicas: int | None
    wanted: int | None
    under_replicated: list[int]
    problem: str | None
    placement: list[PartitionReplicas]


def internal_topics(settings: Settings) -> list[InternalTopicHealth]:
    """Every existing topic under ``settings``' prefix, by name, with its replication and ISR.

    What Kafka refuses to describe is not judged, and said at WARNING (the broker's default replication factor
    without DESCRIBE_CONFIGS on the cluster, ``min.insync.replicas`` without it on the topics).

    Raises:
        AuthorizationError: a secured cluster hides the internal topics from this principal (no READ under
            the prefix, which implies DESCRIBE): the listing would be empty, not the truth.
    """
    with TopicAdmin(settings) as admin:
        placement = {t: p for t, p in admin.replication().items() if settings.topics.is_internal(t)}
        if not placement and secured(settings.kafka):
            try:  # none listed: none exist, or they are hidden from us (asked by name, a delay topic)
                admin.partitions(settings.topics.delay_level(1))
            except TopicNotFoundError:
                pass
        wanted, source = admin.wanted_replication() if placement else (None, "")
        min_isrs = admin.topic_configs(sorted(placement), "min.insync.replicas", timeout=5.0)
        warn_not_judged(admin)
        out = []
        for name in sorted(placement):
            topic = placement[name]
            min_isr = min_isrs[name]
            out.append(InternalTopicHealth(
                name, len(topic.partitions), topic.replication_factor,
                min((len(set(p.isr)) for p in topic.partitions), default=0),
                int(min_isr) if min_isr and min_isr.isdigit() else None, wanted,
                [p.partition for p in topic.under_replicated], replication_problem(topic, wanted, source),
                list(topic.partitions)))
        return out


def warn_not_judged(admin: TopicAdmin) -> None:
    """Say at WARNING what ``admin`` could not judge because Kafka refused to describe a config (one line each)."""
    told: set[str] = set()
    for refusal in admin.refused_configs:
        what = "the broker's default replication factor" if refusal.resource_type == "cluster" else \
            "min.insync.replicas"
        if what not in told:
            told.add(what)
            log.warning("%s not judged: %s", what, refusal)
