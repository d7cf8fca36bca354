"""The drop-in consumer's step: partitions go straight to the application, which reads the client itself.

The engine never fetches for it (:meth:`DropInClaim.take` is never called); a claim's position
is what the application was given, so auto commit commits what it handled, and a partition
leaving runs the application's ``on_revoke`` / ``on_lost`` first.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import OFFSET_INVALID, Consumer, TopicPartition

from rocketkafka.ordering.work.step import ClaimContext
from rocketkafka.topic_partition import TP

#: How long a ``^regex`` subscription's topic list is reused before the broker is asked again (s).
REGEX_REFRESH_S = 5.0

RebalanceCallback = Callable[[Any, list[TopicPartition]], Any]


class Native:
    """The engine's view of the drop-in client: confluent-kafka's own methods, past the drop-in's
    overrides."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer

    def __getattr__(self, name: str) -> Any:
        return getattr(Consumer, name).__get__(self._consumer)


class DropInClaim:
    """A partition handed straight to the application: what it was given is what it handled (auto commit)."""

    def __init__(self, context: ClaimContext, step: DropInStep) -> None:
        self.tp = context.lock
        self._step = step
        # (position, committed), poll thread
        self._seen = (context.offsets[self.tp], context.offsets[self.tp])
        self._final: int | None = None  # the position when the partition began to leave

    def take(self, tp: TP, records: Sequence[Any]) -> None:  # the engine never fetches for the drop-in
        raise AssertionError("the drop-in consumer reads the client itself")

    def positions(self) -> Mapping[TP, int]:
        if not self._step.auto_commit:
            return {}  # the application commits
        position = self._final if self._final is not None else self._step.position(self.tp)
        self._seen = (position, self._seen[1] if position < 0 else position)
        return {self.tp: position} if position >= 0 else {}

    def progress(self) -> tuple[int, int] | None:
        position, committed = self._seen
        return (position, committed) if position >= 0 and committed >= 0 else None

    def backlog(self) -> Mapping[TP, int]:
        return {}  # librdkafka bounds its own prefetch queue

    def finished(self) -> int:
        return 0

    def leave(self) -> None:
        self._step.revoked([self.tp], lost=False)  # the application may commit in on_revoke
        # before the engine unassigns it: then the client forgets it
        self._final = self._step.position(self.tp)

    def revoke(self) -> None:
        self._step.revoked([self.tp], lost=True)

    def drained(self) -> bool:
        return True  # what was returned was handled


class DropInStep:
    """The drop-in's step: the subscribed topics (``^regex`` expanded), start points, rebalance callbacks.

    ``consumer`` is the drop-in :class:`~rocketkafka.ordering.consumers.drop_in_consumer.Consumer`: its
    ``auto_commit_offset`` is a partition's position, and ``_in_revoke`` counts the rebalance
    callbacks running (inside them, the application may unassign).
    """

    def __init__(self, consumer: Any, topics: Sequence[str], auto_commit: bool,
                 on_revoke: RebalanceCallback | None, on_lost: RebalanceCallback | None) -> None:
        self._consumer, self.auto_commit = consumer, auto_commit
        self._literal = [t for t in topics if not t.startswith("^")]
        self._patterns = [re.compile(t) for t in topics if t.startswith("^")]
        self._on_revoke, self._on_lost = on_revoke, on_lost
        self._admin: Any = None
        self._matched: tuple[float, list[str]] = (0.0, [])

    def provision(self, admin: Any) -> None:
        self._admin = admin

    def topics(self) -> Sequence[str]:
        if not self._patterns:
            return self._literal
        now = time.monotonic()
        if now >= self._matched[0]:
            names = sorted(self._admin.list(10.0)) if self._admin is not None else []
            matched = [n for n in names if any(p.match(n) for p in self._patterns) and n not in self._literal]
            self._matched = (now + REGEX_REFRESH_S, matched)
        return self._literal + self._matched[1]

    def partitions_of(self, lock: TP) -> tuple[TP, ...]:
        return (lock,)

    def fence(self, locks: Sequence[TP]) -> None:
        """Offsets are committed by the engine, never in a Kafka transaction: nothing to fence."""

    def initial_offset(self, tp: TP, kafka: Any) -> int:
        """No committed offset: librdkafka applies ``auto.offset.reset`` itself, as in confluent-kafka."""
        return OFFSET_INVALID

    def claim(self, context: ClaimContext) -> DropInClaim:
        return DropInClaim(context, self)

    def position(self, tp: TP) -> int:
        return self._consumer.auto_commit_offset(tp)

    def revoked(self, tps: list[TP], lost: bool) -> None:
        callback = self._on_lost if lost and self._on_lost is not None else self._on_revoke
        if callback is not None:
            self._consumer._in_revoke += 1
            try:
                callback(self._consumer, [TopicPartition(*tp) for tp in tps])
            finally:
                self._consumer._in_revoke -= 1

    def tick(self) -> None:
        pass

    def close(self) -> None:
        pass
