"""Key-ordered consumption (DDMQ's order keys): same key serial, different keys of a partition in parallel.

A partition is still owned under its Redis lock, as in orderly mode; inside it,
records are routed by their order key (:mod:`ordering.order_keys`) into *chains*,
DDMQ's ``jobOrderMap``: one chain per (partition, key) holding that key's batches
in offset order. A chain has at most one worker at a time, so a key's records run
strictly one after another in offset order, while the chains of other keys run on
the rest of the pool. A record without a key is its own chain.

Progress is tracked per record, as karafka's virtual offset manager and decaton's
out-of-order commit control do: each batch's ``position`` is its first unhandled
record, and the committed offset is the lowest of them
(:meth:`ProcessQueue.commit_point <ordering.process_queue.ProcessQueue.commit_point>`),
never past an unfinished record. Memory stays bounded by the consumer's flow
control: a partition stops fetching while more than ``pull_threshold_per_partition``
of its records wait, and an empty chain is forgotten at once.

A failure suspends only its own chain (``Suspend`` / ``SUSPEND_CURRENT_QUEUE_A_MOMENT``
or an exception) and re-runs the same record after the suspend time; after
``max_reconsume_times`` the record goes to the dead-letter topic and that key moves
on. Other keys never wait for it -- unless its waiting records alone fill the
partition's buffer, which then pauses fetching.

A graceful leave cuts after the highest record handed to a handler (see
:meth:`ProcessQueue.drop <ordering.process_queue.ProcessQueue.drop>`): chains keep
running their records below the cut, nothing at or after it starts, and the
partition is committed at the cut, so the next owner re-runs nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from ordering.dispatch import DueTimers
from ordering.orderly import LOCK_RECHECK_S, consume_in_place
from ordering.process_queue import Batch, ProcessQueue

if TYPE_CHECKING:
    from ordering.push_consumer import PushConsumer

log = logging.getLogger(__name__)


class _Unkeyed:
    """The chain key of records without an order key: unique, so they wait for nothing."""

    __slots__ = ()


class _Chain:
    """One order key of one partition: its batches in offset order, run by one worker at a time."""

    __slots__ = ("pq", "key", "batches", "running", "suspended_until", "failures", "forgotten")

    def __init__(self, pq: ProcessQueue, key: Hashable) -> None:
        self.pq, self.key = pq, key
        self.batches: deque[Batch] = deque()
        self.running = False
        self.suspended_until = 0.0  # monotonic time before which the head record must not run again
        self.failures = 0  # failed tries of the head record
        self.forgotten = False


class KeyOrderedDispatch:
    """Dispatch of key-ordered mode: one worker per (partition, order key) at a time.

    Parameters:
        consumer: the push consumer (pool, options, listener calls, lock checks).
        key_of: raw record -> order key, ``None`` when the record has none
            (:func:`ordering.order_keys.order_key_of`).
    """

    def __init__(self, consumer: PushConsumer, key_of: Callable[[Any], Hashable | None]) -> None:
        self.consumer = consumer
        self.options = consumer.options
        self.key_of = key_of
        self._chains: dict[tuple[ProcessQueue, Hashable], _Chain] = {}
        self._lock = threading.Lock()
        self._timers = DueTimers(self._lock, self._schedule, "rk-keyed-scheduler")
        self._closed = False

    # -- Dispatch protocol (poll thread) --------------------------------------------
    def chunk(self, records: list[Any], size: int) -> list[tuple[Hashable, list[Any]]]:
        """One partition's fetched records grouped by order key, offset order kept, at most ``size`` a batch.

        Records without a key go into batches of their own, each under a fresh key.
        """
        batches: list[tuple[Hashable, list[Any]]] = []
        open_groups: dict[Hashable | None, list[Any]] = {}
        for record in records:
            key = self.key_of(record)
            group = open_groups.get(key)
            if group is None or len(group) >= size:
                group = open_groups[key] = []
                batches.append((key if key is not None else _Unkeyed(), group))
            group.append(record)
        return batches

    def submit(self, batch: Batch) -> None:
        with self._lock:
            ident = (batch.queue, batch.key)
            chain = self._chains.get(ident)
            if chain is None:
                chain = self._chains[ident] = _Chain(batch.queue, batch.key)
            chain.batches.append(batch)
            self._schedule(chain)

    def tick(self) -> None:
        with self._lock:
            for chain in [c for c in self._chains.values() if not c.running and c.pq.revoked]:
                self._forget(chain)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._timers.close()

    def chains(self) -> int:
        """How many (partition, key) chains hold work right now."""
        with self._lock:
            return len(self._chains)

    # -- scheduling (callers hold self._lock) ---------------------------------------
    def _schedule(self, chain: _Chain) -> None:
        if self._closed or chain.running or chain.forgotten:
            return
        if not chain.batches or not chain.pq.may_start(chain.batches[0].position):
            self._forget(chain)  # empty, or its queue left: nothing of it may start any more
            return
        if chain.suspended_until > time.monotonic():
            self._timers.add(chain.suspended_until, chain)
            return
        chain.running = True
        self.consumer._pool.submit(self._run, chain)

    def _forget(self, chain: _Chain) -> None:
        chain.forgotten = True
        self._chains.pop((chain.pq, chain.key), None)

    # -- worker ---------------------------------------------------------------------
    def _run(self, chain: _Chain) -> None:
        """Run the chain's batches in order until empty, suspended, cut off, or out of time."""
        started = time.monotonic()
        try:
            while True:
                with self._lock:
                    batch = chain.batches[0] if chain.batches else None
                if batch is None or not self._run_batch(chain, batch):
                    return
                with self._lock:
                    chain.batches.popleft()
                if time.monotonic() - started > self.options.max_continuous_consume_ms / 1000:
                    return  # let other keys have the pool
        finally:
            with self._lock:
                chain.running = False
                self._schedule(chain)

    def _run_batch(self, chain: _Chain, batch: Batch) -> bool:
        """True when the batch is finished; False when the chain must stop for now."""
        pq = chain.pq
        if batch.done:
            return True
        if not pq.admit(batch):
            return False
        try:
            for i in range(batch.index, len(batch.records)):
                record = batch.records[i]
                if not self.consumer.may_consume(pq):  # lock expired: the poll thread revokes the queue soon
                    chain.suspended_until = time.monotonic() + LOCK_RECHECK_S
                    return False
                if not pq.admit_record(record.offset()):  # at or after the cut of a graceful leave
                    return False
                pause, chain.failures = consume_in_place(self.consumer, record, chain.failures)
                if pause is not None:
                    chain.suspended_until = time.monotonic() + pause / 1000
                    return False
                batch.advance(i)
            return True
        finally:
            batch.running = False

