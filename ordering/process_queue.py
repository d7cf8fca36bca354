"""Per-partition consumption state (RocketMQ's ``ProcessQueue``).

The poll thread appends fetched records as *batches*; a worker handles a batch
front to back, calling :meth:`Batch.advance` after each message, so a batch's
``position`` is always the offset of its first unhandled record. The commit point
is the lowest unfinished offset: the least ``position`` of the unfinished batches,
or the next offset to fetch when nothing is unfinished. It never passes a message
still in a handler or not yet run.

Three shapes of consumption share this queue:

- **concurrent** (RocketMQ's concurrent mode): contiguous batches run in parallel,
  admitted whole (:meth:`ProcessQueue.admit`);
- **serial** (orderly): contiguous batches, one at a time, in offset order;
- **keyed** (key-ordered mode): a batch holds records of *one* order key, so its
  offsets are not contiguous; batches of different keys run in parallel, and every
  record is admitted on its own (:meth:`ProcessQueue.admit_record`) so that the
  highest offset given to a handler is known exactly.

Leaving a partition gracefully must not re-deliver anything: when it is done, every
offset below the commit point was handled and none at or above it. So
:meth:`ProcessQueue.drop` draws a *cut*:

- concurrent: after the last admitted batch; batches before the cut still run to
  their end, batches after it never start, and the commit point lands on the cut;
- serial: at the commit point; the message in the handler is the last one;
- keyed: after the highest record admitted to a handler. Records below the cut
  still run (in key order: a key's records below the cut never wait for one above
  it), records at or above it never start; when all below it are done the handled
  set is exactly ``[start, cut)`` and the commit point is the cut. A key suspended
  on a failure below the cut is retried (or dead-lettered) before the drop
  completes, since committing below it would re-deliver the later keys' work.

:meth:`ProcessQueue.revoke` (the lock was lost) stops everything at once instead,
and nothing is committed.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Batch:
    """Records of one partition in offset order, handled by one worker front to back.

    Contiguous in concurrent and serial mode; in keyed mode the records of one order
    ``key`` (other keys' records lie in between).
    """

    queue: ProcessQueue
    records: list[Any]
    start: int  # offset of records[0]
    end: int  # offset after the last record
    key: Hashable | None = None  # keyed mode: the order key of every record
    position: int = -1  # offset of the first unhandled record; == end when done
    index: int = 0  # index of the first unhandled record
    admitted: bool = False
    running: bool = False

    def __post_init__(self) -> None:
        self.position = self.start

    @property
    def done(self) -> bool:
        return self.position >= self.end

    @property
    def remaining(self) -> int:
        return len(self.records) - self.index

    def advance(self, index: int) -> None:
        """``records[index]`` was handled (or filtered, or dead-lettered): move past it."""
        self.index = index + 1
        self.position = self.records[self.index].offset() if self.index < len(self.records) else self.end


@dataclass(eq=False)
class ProcessQueue:
    """One owned partition."""

    topic: str
    partition: int
    next_offset: int  # the offset after the last fetched record (negative: a logical start, nothing fetched)
    fencing_token: int | None = None
    serial: bool = False  # orderly: batches run one at a time
    keyed: bool = False  # key-ordered: one key's batches one at a time, keys in parallel, records admitted singly
    committed: int = -1  # last offset committed to Kafka
    paused: bool = False
    dropped: bool = False  # leaving: nothing at or after the cut starts
    revoked: bool = False  # lock lost: nothing more runs, nothing is committed
    cut: int | None = None
    batches: deque[Batch] = field(default_factory=deque)
    consume_lock: threading.Lock = field(default_factory=threading.Lock)  # orderly: one handler at a time
    suspended_until: float = 0.0  # orderly: monotonic time before which nothing is dispatched
    high: int = -1  # keyed: the offset after the highest record admitted to a handler
    finished: int = 0  # records of finished batches (counted per batch as they leave, for metrics)
    _admission: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.serial and self.keyed:
            raise ValueError("a process queue is serial or keyed, not both")

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    def add(self, records: list[Any], key: Hashable | None = None) -> Batch:
        """Append fetched records (after ``next_offset``, in offset order) as one batch.

        In keyed mode one fetch becomes several batches (one per key) whose offsets
        interleave; add them all before computing the commit point.
        """
        batch = Batch(self, records, records[0].offset(), records[-1].offset() + 1, key)
        self.batches.append(batch)
        self.next_offset = max(self.next_offset, batch.end)
        return batch

    # -- worker side -----------------------------------------------------------------
    def admit(self, batch: Batch) -> bool:
        """A worker asks to run ``batch``: refused when revoked or when the batch lies after the cut."""
        with self._admission:
            if self.revoked or (self.dropped and (self.serial or batch.position >= self.cut)):
                return False
            batch.admitted = batch.running = True
            return True

    def admit_record(self, offset: int) -> bool:
        """Keyed mode: a worker asks to hand the record at ``offset`` to its handler.

        Refused when revoked or at or after the cut; otherwise the record counts as
        delivered to a handler, so a later :meth:`drop` cuts after it.
        """
        with self._admission:
            if self.revoked or (self.dropped and offset >= self.cut):
                return False
            if offset >= self.high:
                self.high = offset + 1
            return True

    def may_start(self, offset: int) -> bool:
        """Whether the record at ``offset`` may still start (dispatchers ask before scheduling it)."""
        return not self.revoked and (not self.dropped or (not self.serial and offset < self.cut))

    # -- poll thread side ------------------------------------------------------------
    def drop(self) -> None:
        """Leave gracefully: records before the cut finish; later ones never start."""
        with self._admission:
            self.dropped = True
            if self.serial:
                self.cut = self.commit_point()
            elif self.keyed:  # high < 0: nothing was handed to a handler (perhaps nothing fetched yet)
                self.cut = max(self.high, self.commit_point()) if self.high >= 0 else self.commit_point()
            else:
                handled = [b.end if b.running else b.position for b in self.batches if b.admitted]
                self.cut = max(handled) if handled else self.commit_point()

    def revoke(self) -> None:
        """The lock was lost: stop at once (running handlers stop before their next message)."""
        with self._admission:
            self.dropped = self.revoked = True

    def drained(self) -> bool:
        """True when leaving can complete: every record before the cut is done (or, revoked, none runs)."""
        if any(b.running for b in self.batches):
            return False
        if self.revoked or self.serial or self.cut is None:
            return True
        return self.commit_point() >= self.cut

    def commit_point(self) -> int:
        """The lowest offset not yet handled (drops finished batches from the front)."""
        while self.batches and self.batches[0].done:
            self.finished += _handled(self.batches.popleft())
        if not self.batches:
            return self.next_offset
        if not self.keyed:  # contiguous batches: the front one holds the lowest unfinished offset
            return self.batches[0].position
        return min(b.position for b in self.batches if not b.done)

    def delivered(self) -> int:
        """The offset after the last record this owner has taken on: fetched, or up to the cut once leaving."""
        return self.cut if self.dropped and self.cut is not None else self.next_offset

    def buffered(self) -> int:
        """About how many fetched messages are not yet handled (for flow control): offsets since the commit point.

        Contiguous (unkeyed) queues count offsets since the commit point, O(1) on the poll
        thread's every loop; gaps in offsets only make it err towards pausing a little early.
        """
        if self.keyed:  # keys finish out of order: count what is really left
            return sum(b.remaining for b in self.batches)
        return max(0, self.next_offset - self.commit_point())


def _handled(batch: Batch) -> int:
    """How many records a finished batch covered (a pull consumer's leave may have cut its end short)."""
    records = batch.records
    if not records or records[-1].offset() < batch.end:
        return len(records)
    return sum(1 for r in records if r.offset() < batch.end)
