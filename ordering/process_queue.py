"""Per-partition consumption state (RocketMQ's ``ProcessQueue``).

The poll thread appends fetched records as *batches* (contiguous offsets of one
partition); worker threads handle a batch front to back, advancing its
``position`` after each message. The commit point is the lowest unfinished
offset: the ``position`` of the oldest unfinished batch, or the next offset to
fetch when nothing is unfinished. It never passes a message still in a handler.

Leaving a partition gracefully must not re-deliver anything, yet in concurrent
mode later batches may already run while earlier ones wait in the pool. So
:meth:`ProcessQueue.drop` draws a *cut* after the last batch that was admitted:
batches before the cut still run to their end, batches after it never start,
and the commit point lands exactly on the cut. A ``serial`` queue (orderly modes)
has one batch in flight, so it simply stops after the message in its handler. :meth:`ProcessQueue.revoke` (the
lock was lost) stops everything at once instead, and nothing is committed.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Batch:
    """Contiguous records of one partition, handled by one worker in offset order."""

    queue: ProcessQueue
    records: list[Any]
    start: int  # offset of records[0]
    end: int  # offset after the last record
    position: int = -1  # next offset to handle; == end when done
    admitted: bool = False
    running: bool = False

    def __post_init__(self) -> None:
        self.position = self.start

    @property
    def done(self) -> bool:
        return self.position >= self.end


@dataclass(eq=False)
class ProcessQueue:
    """One owned partition."""

    topic: str
    partition: int
    next_offset: int  # the offset after the last fetched record (negative: a logical start, nothing fetched)
    fencing_token: int | None = None
    serial: bool = False  # orderly: batches run one at a time
    committed: int = -1  # last offset committed to Kafka
    paused: bool = False
    dropped: bool = False  # leaving: no batch after the cut starts
    revoked: bool = False  # lock lost: nothing more runs, nothing is committed
    cut: int | None = None
    batches: deque[Batch] = field(default_factory=deque)
    consume_lock: threading.Lock = field(default_factory=threading.Lock)  # orderly: one handler at a time
    suspended_until: float = 0.0  # orderly: monotonic time before which nothing is dispatched
    _admission: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    def add(self, records: list[Any]) -> Batch:
        """Append fetched records (after ``next_offset``, in offset order) as one batch."""
        batch = Batch(self, records, records[0].offset(), records[-1].offset() + 1)
        self.batches.append(batch)
        self.next_offset = batch.end
        return batch

    # -- worker side -----------------------------------------------------------------
    def admit(self, batch: Batch) -> bool:
        """A worker asks to run ``batch``: refused when revoked or when the batch lies after the cut."""
        with self._admission:
            if self.revoked or (self.dropped and (self.serial or batch.start >= self.cut)):
                return False
            batch.admitted = batch.running = True
            return True

    # -- poll thread side ------------------------------------------------------------
    def drop(self) -> None:
        """Leave gracefully: admitted batches (and any before them) finish; later ones never start."""
        with self._admission:
            self.dropped = True
            handled = [b.end if b.running else b.position for b in self.batches if b.admitted]
            self.cut = max(handled) if handled and not self.serial else self.commit_point()

    def revoke(self) -> None:
        """The lock was lost: stop at once (running handlers stop before their next message)."""
        with self._admission:
            self.dropped = self.revoked = True

    def drained(self) -> bool:
        """True when leaving can complete: every batch before the cut is done (or, revoked, none runs)."""
        if self.revoked or self.serial or self.cut is None:
            return not any(b.running for b in self.batches)
        return all(b.done or b.start >= self.cut for b in self.batches) and not any(b.running for b in self.batches)

    def commit_point(self) -> int:
        """The lowest offset not yet handled (drops finished batches from the front)."""
        while self.batches and self.batches[0].done:
            self.batches.popleft()
        return self.batches[0].position if self.batches else self.next_offset

    def buffered(self) -> int:
        """Messages fetched and not yet handled (for flow control)."""
        return sum(b.end - b.position for b in self.batches)
