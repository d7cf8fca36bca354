"""Flow control: which partitions stop fetching and which fetch again, so memory stays bounded.

A partition stops fetching while its claim holds more than ``per_partition`` records, and all
of them stop while together they hold more than ``total``. A paused one fetches again once it
is down to half its threshold and the total to half of its own, so a partition at the edge
does not flap between the two. Only pauses made here are in :attr:`OwnedLock.paused`; a user's
own ``pause()`` on the drop-in consumer is never undone (its claims report no backlog).
:func:`throttle` and :func:`pause_and_resume` tell the Kafka client; the rest only decides.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from confluent_kafka import TopicPartition

from rocketkafka.ordering.engine.owned import OwnedLock
from rocketkafka.topic_partition import TP


def over_threshold(owned: OwnedLock, per_partition: int, gauge: FlowGauge | None = None) -> list[TP]:
    """``owned``'s partitions that just went over ``per_partition``; marked paused (call right after a
    take)."""
    over = [tp for tp, n in owned.claim.backlog().items() if n > per_partition and tp not in owned.paused]
    owned.paused.update(over)
    if over and gauge is not None:
        gauge.paused = True
    return over


class FlowGauge:
    """What flow control knows without reading every claim: an upper bound of the records all claims hold (their
    sum when last added up, plus every record taken since: workers only lower it), and whether a partition may
    be paused. Records are added up, and the claims passed over, only when one of the two says it may matter:
    once per need, not at every take or every few ms (2,048 one-record takes were 4 million backlog reads). Poll
    thread."""

    def __init__(self) -> None:
        self._bound = 0
        self.paused = False  # some partition may be paused by flow control

    def took(self, records: int) -> None:
        self._bound += records

    def counted(self, held: int, paused: bool) -> None:
        """The exact sum and whether any partition stays paused, just found by a pass over the claims."""
        self._bound, self.paused = held, paused

    def over(self, owned: Iterable[OwnedLock], total: int) -> bool:
        """Whether the claims hold more than ``total``; adds them up only when the bound says they might."""
        if self._bound <= total:
            return False
        self._bound = sum(n for o in owned for n in o.claim.backlog().values())
        return self._bound > total

    def pass_due(self, total: int) -> bool:
        """Whether :func:`pauses_and_resumes` may find something to do: a partition to resume, or the total passed."""
        return self.paused or self._bound > total


def pauses_and_resumes(owned: Iterable[OwnedLock], per_partition: int, total: int,
                       gauge: FlowGauge | None = None) -> tuple[list[TP], list[TP]]:
    """The partitions to pause and to resume now; :attr:`OwnedLock.paused` is updated to match (and ``gauge``)."""
    owned = list(owned)
    backlogs = [(o, tp, n) for o in owned for tp, n in o.claim.backlog().items()]
    held = sum(n for _, _, n in backlogs)
    pause, resume = [], []
    for o, tp, n in backlogs:
        paused = tp in o.paused
        # over the total: every partition waits, none gains
        if not paused and (n > per_partition or held > total):
            o.paused.add(tp)
            pause.append(tp)
        elif paused and n <= per_partition // 2 and held <= total // 2:
            o.paused.discard(tp)
            resume.append(tp)
    if gauge is not None:
        gauge.counted(held, any(o.paused for o in owned))
    return pause, resume


def throttle(kafka: Any, owned: OwnedLock, taken: int, every: Collection[OwnedLock], gauge: FlowGauge,
             per_partition: int, total: int) -> None:
    """Pause ``owned``'s partitions over their threshold right after it took ``taken`` records: one fetch over at
    most.

    ``every`` is every owned claim: the total is checked here too (through ``gauge``), not only at the next
    :func:`pause_and_resume`, as together they can exceed it while each sits under its own.
    """
    over = over_threshold(owned, per_partition, gauge)
    if over:
        kafka.pause([TopicPartition(*tp) for tp in over])
    gauge.took(taken)
    if gauge.over(every, total):
        pause_and_resume(kafka, every, per_partition, total, gauge)


def pause_and_resume(kafka: Any, owned: Iterable[OwnedLock], per_partition: int, total: int,
                     gauge: FlowGauge | None = None) -> None:
    """Pause and resume on ``kafka`` what :func:`pauses_and_resumes` says; with a ``gauge``, only when it says a
    pass may find something (a pause is made at the take that needs it, :func:`throttle`)."""
    if gauge is not None and not gauge.pass_due(total):
        return
    pause, resume = pauses_and_resumes(owned, per_partition, total, gauge)
    if pause:
        kafka.pause([TopicPartition(*tp) for tp in pause])
    if resume:
        kafka.resume([TopicPartition(*tp) for tp in resume])
