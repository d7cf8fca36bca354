"""The engine's poll loop: maintain, fetch, hand records to their claims, tick the step.

Apart from the engine (:mod:`~rocketkafka.ordering.engine.engine`) because it is the part that
knows threads: which one polls now, how a fresh one takes over from one stuck in a
listener, how long a fetch may wait, and what a poll thread that died leaves behind. The
engine is seen through :class:`Polled`, as importing it here would be an import cycle.

**What wakes the loop.** A record does (it waits in the Kafka client's poll), and so does a
worker's or a future's post while work is out: then it waits on the event the step's
``awaited_posts()`` names instead, and looks at Kafka at least every few ms. Nothing can wake a waiting Kafka poll
(confluent-kafka has no ``wakeup()``), so an idle loop still looks at its timers and the
keeper's news every :data:`IDLE_WAIT_S`; a lock the keeper reported lost is applied before
any fetched record is handed out, however long the fetch waited.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

from rocketkafka.ordering.engine.lifecycle import Lifecycle
from rocketkafka.ordering.locks import LockTable
from rocketkafka.ordering.group.membership import Membership
from rocketkafka.ordering.engine.metrics import ConsumerMetrics
from rocketkafka.ordering.engine.owned import OwnedLock
from rocketkafka.ordering.work.step import Step
from rocketkafka.topic_partition import TP

log = logging.getLogger(__name__)

#: How long an idle loop's fetch waits for a record, owning partitions or not (s): the keeper's news (a member
#: joined or left) waits at most this long, and each pass costs ~0.2 ms of CPU (5 passes a second: 0.1% of a core).
IDLE_WAIT_S = 0.2
#: How long a fetch waits while a paused partition may drain without a post to say so (s).
PAUSED_WAIT_S = 0.005
#: How long a fetch waits while partitions allotted to this member are still held by another (s): about as
#: often as they are asked for again (``acquire_retry_ms``, 50 by default), so a join's split does not wait
#: the idle wait, and a member kept waiting (a stalled owner's lease) does not spin.
PENDING_WAIT_S = 0.05


class Polled(Protocol):
    """The engine as its poll loop sees it."""

    name: str
    group: str
    step: Step
    metrics: ConsumerMetrics | None
    lifecycle: Lifecycle
    failures: int
    _owned: dict[TP, OwnedLock]
    _by_tp: dict[TP, OwnedLock]
    _leaving: dict[TP, OwnedLock]
    _locks: LockTable | None
    _membership: Membership | None

    @property
    def pending(self) -> bool: ...

    def maintain(self) -> None: ...

    def fetch(self, timeout: float) -> int: ...

    def release_all(self) -> None: ...


class PollLoop:
    """Which thread polls an engine, and the loop it runs (see :meth:`run`)."""

    def __init__(self, engine: Polled) -> None:
        self._engine = engine
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None  # the engine's own thread polling now
        self._poller: threading.Thread | None = None  # the thread that owns the client and the claims now
        self._step_wait: float | None = None  # how soon the step wants the loop back (its last tick said)

    def take_over(self) -> None:
        """A fresh thread runs the loop and owns the client and the claims from now on.

        Not once the loop is stopping: the thread draining the partitions carries on when its listener
        returns (two threads would both release and apply outcomes).
        """
        if self._stopping.is_set():
            return
        thread = threading.Thread(target=self.run, name=f"rk-poll-{self._engine.group}", daemon=True)
        self._poller = self._thread = thread
        thread.start()

    def stop(self, timeout: float) -> bool:
        """End the loop; wait up to ``timeout`` s for a thread of its own (``False``: there is none)."""
        self._stopping.set()
        if self._thread is None:
            return False
        self._thread.join(timeout)  # the thread polling now (another may have taken over)
        return True

    def run(self) -> None:
        """The loop, until :meth:`stop` or a failure; a thread that another took over from leaves it."""
        engine, me = self._engine, threading.current_thread()
        self._poller = me
        # steps with workers say what their posts set while work is out
        awaited_posts: Callable[[], threading.Event | None] = getattr(engine.step, "awaited_posts", _nothing)
        try:
            while not self._stopping.is_set():
                engine.maintain()
                timeout = fetch_timeout(engine._owned.values(), self._step_wait, engine.pending)
                posted = awaited_posts()
                if posted is not None:
                    # work is out: its posts wake the loop; Kafka gets a look at least every `timeout`
                    if not engine.fetch(0):
                        posted.wait(timeout)
                    posted.clear()  # before the tick applies the mailbox: a later post sets it again
                else:
                    engine.fetch(timeout)
                wait = engine.step.tick()
                if self._poller is not me:
                    return  # another thread took over polling while this one was in a listener
                self._step_wait = wait
            engine.release_all()
            if engine.metrics is not None:
                engine.metrics.publish_retired()
        except BaseException as exc:  # never die silently
            self._died(exc)

    def _died(self, exc: BaseException) -> None:
        """Record, log and count the failure, and release every lock so the others take over at once."""
        engine = self._engine
        held = {**engine._owned, **engine._leaving}
        # cleared first, so the failure is never reported beside partitions still counted as owned
        engine._owned.clear()
        engine._by_tp.clear()
        engine._leaving.clear()
        engine.failures += 1
        engine.lifecycle.fail(exc)
        log.critical("%s: poll thread failed; partitions released, consumption stopped", engine.name,
                     exc_info=exc)
        for owned in held.values():
            owned.claim.revoke()
        try:
            if engine._locks is not None:
                engine._locks.unlock_batch(list(held))
            if engine._membership is not None:
                engine._membership.leave()
        except Exception:
            log.warning("%s: releasing locks after the failure failed; they expire with their lease",
                        engine.name, exc_info=True)


def _nothing() -> None:
    return None


def fetch_timeout(owned: Collection[OwnedLock], step_wait: float | None, pending: bool = False) -> float:
    """How long a fetch (or a wait for a post) may take: until something else needs the loop (``pending``:
    partitions another member still holds, asked for again soon: a join's split waits on it)."""
    if any(o.paused for o in owned):
        return PAUSED_WAIT_S  # a step without posts drains a paused partition's backlog unseen: look often
    longest = PENDING_WAIT_S if pending else IDLE_WAIT_S
    return longest if step_wait is None or step_wait >= longest else step_wait


def fetch_records(kafka: Any, batch_size: int, timeout: float) -> list[Any]:
    """Up to ``batch_size`` records: what is ready, else the first within ``timeout`` s and the rest ready."""
    records = kafka.consume(batch_size, 0)
    if not records:
        first = kafka.poll(timeout)
        if first is None:
            return []
        records = [first, *kafka.consume(batch_size - 1, 0)]
    return records


def route(records: list[Any], by_tp: Mapping[TP, OwnedLock], ambiguous: set[int],
          throttle: Callable[[OwnedLock, int], None], on_error: Callable[[Any], None]) -> None:
    """Hand runs of one partition to their claim (fetches come in per-partition runs: few lookups).

    A run is told by the partition number alone, unless two covered topics share that number
    (``ambiguous``: then the topic is compared too): one call per record less on the hot path.
    ``throttle`` gets each claim and the count right after it took records; ``on_error`` each error event
    (:func:`~rocketkafka.ordering.engine.access.fetch_error`).
    """
    start, n = 0, len(records)
    while start < n:
        first = records[start]
        if first.error() is not None:
            on_error(first)
            start += 1
            continue
        topic, partition = first.topic(), first.partition()
        end = start + 1
        if partition in ambiguous:
            while end < n and records[end].partition() == partition and records[end].topic() == topic \
                    and records[end].error() is None:
                end += 1
        else:
            while end < n and records[end].partition() == partition and records[end].error() is None:
                end += 1
        owned = by_tp.get((topic, partition))
        if owned is not None and not owned.leaving and not owned.revoked:
            owned.claim.take((topic, partition), records[start:end] if start or end < n else records)
            owned.fetch_from[(topic, partition)] = records[end - 1].offset() + 1
            throttle(owned, end - start)
        start = end

