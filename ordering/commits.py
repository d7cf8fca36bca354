"""Offset commits: what each claim says is done, sent only while its lock is held, with its fencing token.

The token travels in the commit's metadata (``rk.fencing.token=N``) for auditors and brokers
that keep it. A commit that failed is forgotten, so the next interval sends it again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import TopicPartition

from rocketkafka.names import Header
from rocketkafka.ordering.owned import OwnedLock
from rocketkafka.topic_partition import TP


def due_offsets(owned: Iterable[OwnedLock], is_held: Callable[[TP], bool]) -> list[TopicPartition]:
    """Positions Kafka does not have yet, of locks still held; each is marked committed as it is listed."""
    offsets = []
    for o in owned:
        if o.revoked or not is_held(o.lock):
            continue  # only the valid lock holder commits
        for tp, position in o.claim.positions().items():
            if position >= 0 and o.committed.get(tp) != position:
                offsets.append(fenced(tp, position, o.fencing_token))
                o.committed[tp] = position
    return offsets


def fenced(tp: TP, offset: int, fencing_token: int | None) -> TopicPartition:
    """The commit of ``offset``, with the lock's fencing token as metadata (none when there is no lock)."""
    if fencing_token is None:  # broadcasting: no lock
        return TopicPartition(*tp, offset)
    return TopicPartition(*tp, offset, metadata=f"{Header.FENCING_TOKEN}={fencing_token}")


def forget(by_tp: Mapping[TP, OwnedLock], partitions: Sequence[TopicPartition]) -> None:
    """Commits that failed: no longer counted as Kafka's, so they are sent again."""
    for tp in partitions:
        owned = by_tp.get((tp.topic, tp.partition))
        if owned is not None:
            owned.committed.pop((tp.topic, tp.partition), None)


def commit_offsets(kafka: Any, offsets: list[TopicPartition], asynchronous: bool) -> None:
    """``kafka.commit(offsets=..., asynchronous=...)``: a literal each, as the stubs overload commit()
    on it."""
    if asynchronous:
        kafka.commit(offsets=offsets, asynchronous=True)
    else:
        kafka.commit(offsets=offsets, asynchronous=False)
