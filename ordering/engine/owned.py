"""What the engine holds per lock (:class:`OwnedLock`) and shows per partition (:class:`PartitionState`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from rocketkafka.ordering.work.step import Claim
from rocketkafka.topic_partition import TP


@dataclass(eq=False)
class OwnedLock:
    """A held lock and the claim working on its partitions (poll thread)."""

    lock: TP
    claim: Claim
    partitions: tuple[TP, ...]
    fencing_token: int | None
    committed: dict[TP, int] = field(default_factory=dict)  # what Kafka has (as far as we know)
    leaving: bool = False  # draining: commit and unlock once drained
    reset_to: dict[TP, int] | None = None  # leaving for an operator's offset reset: commit these instead
    revoked: bool = False  # lost: never commit, unlock nothing (it is not ours)
    paused: set[TP] = field(default_factory=set)  # paused by flow control (never a user's own pause)
    # where fetching goes on: after the last record routed
    commit_again_at: float = 0.0  # leaving: when to retry a last commit that failed (monotonic s)
    fetch_from: dict[TP, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PartitionState:
    """One partition as the engine sees it, for metrics and admin views."""

    lock: TP
    tp: TP
    position: int | None  # committed-or-committable offset
    backlog: int
    held: bool
    finished: int


def shared_numbers(partitions: Iterable[TP]) -> set[int]:
    """Partition numbers that more than one topic among ``partitions`` has."""
    seen: dict[int, str] = {}
    shared = set()
    for topic, number in partitions:
        if seen.setdefault(number, topic) != topic:
            shared.add(number)
    return shared
