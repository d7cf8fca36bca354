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


def over_threshold(owned: OwnedLock, per_partition: int) -> list[TP]:
    """``owned``'s partitions that just went over ``per_partition``; marked paused (call right after a
    take)."""
    over = [tp for tp, n in owned.claim.backlog().items() if n > per_partition and tp not in owned.paused]
    owned.paused.update(over)
    return over


def over_total(owned: Iterable[OwnedLock], per_partition: int, partitions: int, total: int) -> bool:
    """Whether the claims together may hold more than ``total``: they can only when ``per_partition`` times
    the partitions exceeds it (rare), and then the backlogs are added up."""
    return per_partition * partitions > total and sum(n for o in owned
                                                      for n in o.claim.backlog().values()) > total


def pauses_and_resumes(owned: Iterable[OwnedLock], per_partition: int,
                       total: int) -> tuple[list[TP], list[TP]]:
    """The partitions to pause and to resume now; :attr:`OwnedLock.paused` is updated to match."""
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
    return pause, resume


def throttle(kafka: Any, owned: OwnedLock, every: Collection[OwnedLock], partitions: int, per_partition: int,
             total: int) -> None:
    """Pause ``owned``'s partitions over their threshold right after it took records: one fetch over at most.

    ``every`` is every owned claim, covering ``partitions`` partitions: the total is checked here too, not
    only at the next :func:`pause_and_resume`, as together they can exceed it while each sits under its own.
    """
    over = over_threshold(owned, per_partition)
    if over:
        kafka.pause([TopicPartition(*tp) for tp in over])
    if over_total(every, per_partition, partitions, total):
        pause_and_resume(kafka, every, per_partition, total)


def pause_and_resume(kafka: Any, owned: Iterable[OwnedLock], per_partition: int, total: int) -> None:
    """Pause and resume on ``kafka`` what :func:`pauses_and_resumes` says."""
    pause, resume = pauses_and_resumes(owned, per_partition, total)
    if pause:
        kafka.pause([TopicPartition(*tp) for tp in pause])
    if resume:
        kafka.resume([TopicPartition(*tp) for tp in resume])
