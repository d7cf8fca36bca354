"""The delay topics of one topic prefix and the hop plan over them.

A *tier* is one internal topic whose records all wait the same time ``ms`` from
when they were appended: the level topics (RocketMQ's ``SCHEDULE_TOPIC_XXXX``
queues, one topic per level) and the step topics (short internal hops, below the
first level). Because every record of a tier waits the same time, a tier's
partition is FIFO by due time and only its head matters.

A record in tier ``t`` appended at ``a`` (its Kafka timestamp) with absolute due
time ``D`` is due *on this hop* at ``min(D, a + t)``: a full hop when the message
has further to go, a shortened one (``D < a + t``) on its final hop. A shortened
record never holds up the records behind it; it can itself be held up by the ones
before it by at most ``t - (D - a)``, which the plan keeps small by putting final
hops on the shortest tier that covers them.

>>> from rocketkafka.names import TopicNames
>>> from rocketkafka.schedule.levels import DelayConfig
>>> tiers = Tiers(TopicNames("rk"), DelayConfig(levels="100ms 1s", steps="25ms 50ms", hop_overhead_ms=10))
>>> [t.ms for t in tiers.ascending]
[25, 50, 100, 1000]
>>> tiers.next_hop(2500).ms, tiers.next_hop(70).ms, tiers.next_hop(30).ms
(1000, 50, 50)
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from rocketkafka.schedule.levels import DelayConfig
from rocketkafka.murmur2 import murmur2
from rocketkafka.names import TopicNames


def step_topic(topics: TopicNames, index: int) -> str:
    """Topic of internal step ``index`` (1-based): ``<prefix>.delay.step.NN``, beside ``<prefix>.delay.level.NN``."""
    return f"{topics.prefix}.delay.step.{index:02d}"


@dataclass(frozen=True)
class Tier:
    """One delay topic: every record waits ``ms`` from its append time (or less, on its final hop)."""

    topic: str
    ms: int
    level: int | None  # the delay level it serves, None for a step

    def hop_due(self, appended_ms: int, due_ms: int) -> int:
        """When a record appended at ``appended_ms`` and due at ``due_ms`` leaves this tier."""
        return min(due_ms, appended_ms + self.ms)


@dataclass(frozen=True)
class Wait:
    """Not yet: pause the queue ``ms`` milliseconds, then look again."""

    ms: int


@dataclass(frozen=True)
class Hold:
    """The hop is over and only ``ms`` (at most ``hold_ms``) remain: deliver exactly then, without a hop."""

    ms: int


@dataclass(frozen=True)
class Hop:
    """The hop is over and the message is not due: re-route it to ``tier``."""

    tier: Tier


@dataclass(frozen=True)
class Deliver:
    """Due: produce it to its real topic and partition."""


DELIVER = Deliver()


class Tiers:
    """Level and step topics under one prefix, and which one a remaining delay takes next.

    Parameters:
        topics: internal topic names (the prefix).
        config: level and step durations, hop overhead.
    """

    def __init__(self, topics: TopicNames, config: DelayConfig) -> None:
        self.config = config
        self.levels = [Tier(topics.delay_level(n), ms, n) for n, ms in enumerate(config.levels, start=1)]
        self.steps = [Tier(step_topic(topics, n), ms, None) for n, ms in enumerate(config.steps, start=1)]
        self.by_topic = {t.topic: t for t in [*self.levels, *self.steps]}
        shortest: dict[int, Tier] = {}
        for tier in [*self.steps, *self.levels]:  # a level wins over a step of the same length
            shortest[tier.ms] = tier
        self.ascending = [shortest[ms] for ms in sorted(shortest)]
        self._ms = [t.ms for t in self.ascending]

    def topics(self) -> list[str]:
        """Every level and step topic (what the forwarder consumes)."""
        return list(self.by_topic)

    def level(self, level: int) -> Tier:
        """The tier of delay ``level`` (1-based); ``KeyError`` when unknown."""
        if not 1 <= level <= len(self.levels):
            raise KeyError(level)
        return self.levels[level - 1]

    def next_hop(self, remaining_ms: int) -> Tier:
        """The tier a message with ``remaining_ms`` (> 0) still to wait goes to next.

        The longest tier that still leaves ``hop_overhead_ms`` of room (a full hop), else the
        shortest tier that covers the whole remainder (the final, shortened hop).
        """
        room = remaining_ms - self.config.hop_overhead_ms
        i = bisect_right(self._ms, room)
        if i > 0:
            return self.ascending[i - 1]
        j = bisect_right(self._ms, remaining_ms - 1)  # first tier with ms >= remaining
        return self.ascending[min(j, len(self.ascending) - 1)]

    def path(self, remaining_ms: int, first: Tier | None = None) -> list[Tier]:
        """The tiers a message with ``remaining_ms`` to wait passes through when every hop is exactly on time.

        ``first``: its first tier (a level message's level), else the plan's. Forwarders re-plan
        at every hop from the real remaining time, so a late hop shortens the rest; this is the
        ideal path, used to explain and test the routing.
        """
        now = appended = 1  # any epoch: only differences matter
        due = now + remaining_ms
        hops = [first or self.next_hop(remaining_ms)]
        while True:
            action = self.decide(hops[-1], appended, due, now)
            if isinstance(action, Deliver):
                return hops
            if isinstance(action, (Wait, Hold)):
                now += action.ms
            else:
                hops.append(action.tier)
                appended = now

    def decide(self, tier: Tier, appended_ms: int, due_ms: int, now: int) -> Wait | Hold | Hop | Deliver:
        """What the forwarder does with the head record of ``tier`` at ``now`` (all epoch ms).

        ``Wait(ms)`` until its hop is over (the queue pauses: the records behind it are due
        later), ``Deliver()`` once due, ``Hold(ms)`` when at most ``hold_ms`` remain after the
        hop (the forwarder delivers it exactly then, the queue goes on), else ``Hop(tier)``.
        """
        hop_due = tier.hop_due(appended_ms, due_ms) if appended_ms > 0 else now
        if now < hop_due:
            return Wait(hop_due - now)
        remaining = due_ms - now
        if remaining <= 0:
            return DELIVER
        if remaining <= self.config.hold_ms:
            return Hold(remaining)
        return Hop(self.next_hop(remaining))

    @staticmethod
    def partition_for(real_topic: str, real_partition: int, partitions: int) -> int:
        """The tier partition of a real (topic, partition): stable, so one real partition stays FIFO.

        Partitions of one real topic spread round the tier's partitions from a hashed start.
        """
        return ((murmur2(real_topic.encode()) & 0x7FFFFFFF) + max(real_partition, 0)) % partitions
