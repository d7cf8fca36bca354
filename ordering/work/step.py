"""The seam between the ownership engine and what runs on owned partitions.

The engine (:mod:`rocketkafka.ordering.engine.engine`) owns partitions: membership,
allocation, the lock table, fetching, flow control and commits. A :class:`Step` says
what is done with them -- the push consumer's listener step, the delay forwarder's,
the transaction checker's, the drop-in consumer's hand-over to the application.
For every lock the engine wins it asks the step for a :class:`Claim`: the work on
that lock's partitions, fed with fetched records and asked for safe offsets.

A lock names one partition; a claim may cover more (the checker reads half partition
``p`` and op partition ``p`` under the lock of half partition ``p``).

Every method here runs on the engine's poll thread unless it says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rocketkafka.topic_partition import TP


@dataclass(frozen=True, eq=False)
class ClaimContext:
    """What a claim is given when its lock is won.

    Attributes:
        lock: the partition whose lock this is.
        partitions: every partition the claim covers (``lock`` first).
        fencing_token: the lock's fencing token (``None`` without locks: broadcasting).
        offsets: where each partition starts (committed, else the step's initial offset).
        valid_until: monotonic time until which the lock is ours; any thread, lock-free. A claim
            checks it before every message it hands out: a process that stalled past it stops.
        seek: ``seek(tp, offset)`` re-reads a partition from ``offset`` (poll thread).
        commit_soon: asks the engine to commit at its next loop rather than at the next interval
            (the checker commits after every step of decided halves).
    """

    lock: TP
    partitions: tuple[TP, ...]
    fencing_token: int | None
    offsets: Mapping[TP, int]
    valid_until: Callable[[], float]
    seek: Callable[[TP, int], None]
    commit_soon: Callable[[], None] = lambda: None


class Claim(Protocol):
    """The work on the partitions of one held lock."""

    def take(self, tp: TP, records: Sequence[Any]) -> None:
        """Fetched records of ``tp``, in offset order, none before what the claim has seen."""

    def positions(self) -> Mapping[TP, int]:
        """Per partition, the offset up to which everything is done: safe to commit now."""

    def progress(self) -> tuple[int, int] | None:
        """``(delivered, acked)`` of the lock's partition for the lock entry (DeFiBus), or ``None``.

        Called from the engine's keeper thread: read, never change.
        """

    def backlog(self) -> Mapping[TP, int]:
        """Records taken and not finished, per partition that flow control may pause."""

    def finished(self) -> int:
        """Records finished since the claim began (metrics)."""

    def leave(self) -> None:
        """Leave gracefully: what was handed out finishes, nothing new starts."""

    def revoke(self) -> None:
        """The lock is lost: stop at once; nothing more is committed."""

    def drained(self) -> bool:
        """True once nothing runs any more (after :meth:`leave` or :meth:`revoke`)."""


class Step(Protocol):
    """What the engine runs on owned partitions.

    A step whose work runs on other threads may also have ``awaited_posts() -> threading.Event | None``: the
    event its workers' posts set while work is out (``None`` when none is). The poll loop then waits on that
    event rather than on Kafka, so a post wakes it (:mod:`~rocketkafka.ordering.engine.poll_loop`). A step
    whose ``initial_offset`` asks the broker may also have ``initial_offsets(tps, kafka) -> dict``: the same for
    many partitions in one request, used when locks are taken.
    """

    def provision(self, admin: Any) -> None:
        """Create the internal topics the step needs (``admin``: a :class:`~rocketkafka.admin.TopicAdmin`).

        Called once at start, after Redis answered and before any topic is checked.
        """

    def topics(self) -> Sequence[str]:
        """The topics whose partitions the group splits (each partition is one lock)."""

    def partitions_of(self, lock: TP) -> tuple[TP, ...]:
        """The partitions a claim on ``lock`` covers, ``lock`` first (most steps: just ``(lock,)``)."""

    def initial_offset(self, tp: TP, kafka: Any) -> int:
        """Where ``tp`` starts when the group never committed it (``kafka``: the engine's consumer)."""

    def fence(self, locks: Sequence[TP]) -> None:
        """Locks just won, before their committed offsets are read: a step whose handler commits offsets
        in Kafka transactions fences the previous owners' producers here (most steps: nothing).

        Raises:
            KafkaException: the broker did not answer; the locks are taken later.
        """

    def claim(self, context: ClaimContext) -> Claim:
        """The work on a lock just won."""

    def tick(self) -> float | None:
        """Once per loop, after the fetched records were handed out (timers, delivery reports).

        Returns how soon (s) the step wants the loop back (work out on other threads, a pause
        ending), or ``None`` when it does not mind.
        """

    def close(self) -> None:
        """The engine stopped (every claim drained and released): close what the step opened."""
