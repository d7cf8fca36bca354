"""The transaction checker (RocketMQ's ``TransactionalMessageCheckService``), as a scalable sidecar.

It runs on the ownership engine like every consumer (DESIGN §2): instances of the
checker's system group split the half partitions by the allocation strategy, each
held in the Redis lock table; a claim covers half partition ``p`` and op partition
``p``, and the engine commits both as the claim's scans move them
(:mod:`~rocketkafka.txn.scanning`). On SIGTERM (:meth:`TransactionChecker.stop`) the
step in progress finishes, progress is committed, locks are released and the member
leaves, so another instance takes over at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from confluent_kafka import TopicPartition

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.errors import StateError
from rocketkafka.names import TopicNames
from rocketkafka.ordering.engine.engine import OwnershipEngine
from rocketkafka.ordering.engine.lifecycle import EngineStatus, State
from rocketkafka.ordering.work.step import ClaimContext
from rocketkafka.sender import Sender
from rocketkafka.topic_partition import TP
from rocketkafka.txn.markers import EndMarkers
from rocketkafka.txn.metrics import CheckerMetrics
from rocketkafka.txn.options import CheckerOptions
from rocketkafka.txn.records import provision
from rocketkafka.txn.scanning import HalfPartition, Scanner
from rocketkafka.txn.stats import CheckerStats

log = logging.getLogger(__name__)


class _CheckerStep:
    """The checker's step on the engine: half partitions, each with its op partition.

    Parameters:
        topics: the internal topic names.
        provisioned: given the admin once the engine opened (creates the half, op and check topics).
        serve_deliveries: serves the sender's delivery reports, once a loop.
        note_buffered: told how many halves are buffered after each loop (the peak is a stat).
    """

    def __init__(self, topics: TopicNames, provisioned: Callable[[TopicAdmin], None],
                 serve_deliveries: Callable[[], None], note_buffered: Callable[[int], None]) -> None:
        self._topics = topics
        self._provisioned, self._serve_deliveries, self._note_buffered = provisioned, serve_deliveries, note_buffered
        self.parts: dict[int, HalfPartition] = {}
        self.scanner: Scanner | None = None

    def provision(self, admin: TopicAdmin) -> None:
        self._provisioned(admin)

    def topics(self) -> Sequence[str]:
        return [self._topics.half()]

    def partitions_of(self, lock: TP) -> tuple[TP, ...]:
        return (lock, (self._topics.op(), lock[1]))

    def fence(self, locks: Sequence[TP]) -> None:
        """Offsets are committed by the engine, never in a Kafka transaction: nothing to fence."""

    def initial_offset(self, tp: TP, kafka: Any) -> int:
        return max(kafka.get_watermark_offsets(TopicPartition(*tp), timeout=10)[0], 0)  # the log's start

    def claim(self, context: ClaimContext) -> HalfPartition:
        assert self.scanner is not None
        part = HalfPartition(context, self.scanner)
        self.parts[part.index] = part
        return part

    def tick(self) -> None:
        self._serve_deliveries()
        buffered = 0
        for index, part in list(self.parts.items()):
            if part.stopped:
                del self.parts[index]
            else:
                part.advance()
                buffered += len(part.halves)
        self._note_buffered(buffered)

    def close(self) -> None:
        self.parts.clear()


class TransactionChecker(EngineStatus):
    """Checks back half messages that were not ended in time.

    Parameters:
        settings: broker, Redis nodes, topic and key prefixes.
        options: :class:`CheckerOptions`; keyword ``overrides`` replace single fields.

    >>> with TransactionChecker(Settings.load(), transaction_timeout_ms=6000) as checker:   # doctest: +SKIP
    ...     serve_forever()
    """

    def __init__(self, settings: Settings, options: CheckerOptions | None = None, **overrides: Any) -> None:
        base = options or CheckerOptions()
        self.options = CheckerOptions.model_validate({**base.model_dump(), **overrides}) if overrides else base
        self.settings = settings
        self.topics = settings.topics
        self.group = self.topics.txn_checker_group()
        self._stats = CheckerStats()
        self._partitions = 0
        self._check_topics: set[str] = set()
        self._step = _CheckerStep(self.topics, self._provisioned, self._sender_poll, self._note_buffered)
        self._start_failed = False  # the engine is made here, not in start(): EngineStatus asks its lifecycle
        self._engine: OwnershipEngine = OwnershipEngine(
            self.group, settings, self.options.ownership(), self._step,
            kafka_config={"fetch.wait.max.ms": self.options.fetch_wait_ms, "isolation.level":
                          "read_committed" if self.options.read_committed else "read_uncommitted"},
            name=f"transaction checker {self.options.instance_name}")
        self._sender: Sender | None = None
        self._markers: EndMarkers | None = None
        self._admin: TopicAdmin | None = None
        self._thread: threading.Thread | None = None
        #: Prometheus series read from :meth:`stats` at scrape time (``metrics.serve(port)`` exposes them).
        self.metrics = CheckerMetrics(self.stats, self.assignment_or_none, lambda: self._partitions)

    # -- lifecycle -------------------------------------------------------------------
    @property
    def instance_name(self) -> str:
        """This checker's id in the checker group (``host@pid@random`` unless set)."""
        return self.options.instance_name

    def start(self) -> TransactionChecker:
        """Open, then run in a background thread; returns once the checker has joined its group.

        Raises:
            StateError: started before.
        """
        self.open()
        self._engine.start_thread()
        return self

    def run(self) -> None:
        """Open and run in this thread until :meth:`stop` (the service's main loop)."""
        self.open()
        self._engine.run()
        self._close_own()

    def open(self) -> None:
        """Connect, provision the internal topics and join the checker group (no scans yet).

        Redis is asked before any topic is created; an open that fails leaves nothing behind (no
        client, thread or member entry) and the checker CLOSED.

        Raises:
            StateError: started before.
            RedisAuthError, RedisUnavailableError: no Redis node took the heartbeat (which says why).
        """
        if self._engine.lifecycle.state is not State.NEW:
            self._engine.lifecycle.starting()  # raises: start() works once
        s = self.settings
        self._sender = Sender(s)
        self._markers = EndMarkers(s.require_redis(), s.keys, 1)
        self._step.scanner = Scanner(self.topics, self._sender, self._markers, self.options, self._stats,
                                     self._committed, self._ensure_check_topics, otel=s.otel)
        try:
            self._engine.open()
        except BaseException:
            self._close_own()
            self._step.scanner = self._admin = None  # dropped: clients hold threads as long as they live
            raise
        log.info("transaction checker %s joined (%d half partitions)", self.instance_name, self._partitions)

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the step in progress, commit, release the partitions, leave the group. Idempotent."""
        if self._engine.lifecycle.state in (State.NEW, State.CLOSED):
            return
        self._engine.close(timeout)
        self._close_own()
        self.metrics.close()

    close = stop

    def __enter__(self) -> TransactionChecker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _close_own(self) -> None:
        for close in (self._sender.close if self._sender else None, self._markers.close if self._markers else None):
            if close is not None:
                try:
                    close()
                except Exception:
                    log.exception("closing the checker failed")
        self._sender = self._markers = None

    # -- state (``state`` and ``health()``: EngineStatus) -------------------------------------
    def assignment(self) -> set[int]:
        """Half partitions this instance owns right now.

        Raises:
            ConsumerFailedError: the poll thread died.
            StateError: not started.
        """
        self._engine.lifecycle.check("assignment()")
        return set(self._step.parts)

    def assignment_or_none(self) -> set[int]:
        """Like :meth:`assignment`, but empty instead of raising (for metrics)."""
        return set(self._step.parts)

    def stats(self) -> CheckerStats:
        """A snapshot of the counters and gauges."""
        snapshot = CheckerStats(**asdict(self._stats))
        parts = list(self._step.parts.values())
        snapshot.partitions_owned = len(parts)
        snapshot.buffered_halves = sum(len(p.halves) for p in parts)
        snapshot.waiting_ops = sum(p.ledger.waiting_ops for p in parts)
        snapshot.locks_lost = self._engine.locks_lost
        snapshot.commits = self._engine.commits
        return snapshot

    @property
    def half_partitions(self) -> int:
        """Partitions of the half topic (0 until the checker has opened)."""
        return self._partitions

    # -- for the step and scanner (poll thread) ------------------------------------------
    def _provisioned(self, admin: TopicAdmin) -> None:
        self._admin = admin
        self._partitions = provision(admin, self.topics, self.options.half_partitions, self.options.check_partitions)

    def _note_buffered(self, halves: int) -> None:
        if halves > self._stats.peak_buffered_halves:
            self._stats.peak_buffered_halves = halves

    def _sender_poll(self) -> None:
        if self._sender is not None:
            self._sender.poll(0)

    def _committed(self, lock: TP) -> Mapping[TP, int]:
        return self._engine.committed(lock)

    def _ensure_check_topics(self, groups: set[str]) -> None:
        if self._admin is None:
            raise StateError("the checker is not open")
        missing = {self.topics.check_request(g) for g in groups} - self._check_topics
        if missing:
            self._admin.create_internal({t: self.options.check_partitions for t in missing})
            self._check_topics |= missing
