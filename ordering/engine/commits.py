"""Offset commits: what each claim says is done, sent only while its lock is held, with its fencing token.

The token travels in the commit's metadata (``rk.fencing.token=N``) for auditors and brokers
that keep it. A commit that failed is forgotten, so the next interval sends it again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from confluent_kafka import TopicPartition

from rocketkafka.names import Header
from rocketkafka.ordering.engine.owned import OwnedLock
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


def forget(owned: Iterable[OwnedLock], partitions: Sequence[TopicPartition]) -> None:
    """Commits that failed: no longer counted as Kafka's, so they are sent again (``owned``: held and
    leaving locks alike -- a leaving lock's last commit must not count a failed one as done)."""
    failed = {(tp.topic, tp.partition) for tp in partitions}
    for o in owned:
        for tp in failed.intersection(o.partitions):
            o.committed.pop(tp, None)


def commit_offsets(kafka: Any, offsets: list[TopicPartition], asynchronous: bool) -> list[TopicPartition]:
    """``kafka.commit(offsets=..., asynchronous=...)`` (a literal each, as the stubs overload commit() on it).

    Returns the partitions a synchronous commit was refused for, each with its error (the request
    succeeds while single partitions fail); an asynchronous commit's answer comes to ``on_commit``.

    Raises:
        KafkaException: the request as a whole failed.
    """
    if asynchronous:
        kafka.commit(offsets=offsets, asynchronous=True)
        return []
    answer = kafka.commit(offsets=offsets, asynchronous=False)
    return [tp for tp in answer or () if tp.error is not None]
