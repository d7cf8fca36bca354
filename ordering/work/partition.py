"""One owned partition of a listener step (RocketMQ's ``ProcessQueue``): fetched records as batches, and
where to commit.

Fetched records become :class:`Batch` es -- contiguous runs, or the records of one
order key -- that the scheduler (:mod:`~rocketkafka.ordering.work.scheduler`) hands to a
handler, front to back. A batch knows the next record to hand (``index``) and how
many from its front are finished (``done``: handled, and settled where a handler
returned a future). The commit point is the lowest unfinished offset of the
partition, so it never passes a record still in a handler, not yet run, or not yet
durable. Everything here runs on the poll thread: workers only read what they were
handed and post what they did (:mod:`~rocketkafka.ordering.work.lanes`).

**Leaving without re-delivery.** When the partition leaves gracefully every offset
below the committed point must be handled and none at or above it. :meth:`PartitionWork.leave`
first takes back what no worker has begun, then draws a *cut* after the last record of
every batch a worker holds, and after the last record handed of every other batch:
records below the cut still run (in their order), records at or above it never start,
and once everything handed out came back and all below the cut are done, the commit
point is the cut. One rule serves
every mode; a batch handed out is finished (at most ``consume_batch_size`` records), so
the hot loop checks nothing per record for it, and no lock is needed: dispatch, outcomes
and the cut all happen on one thread.

:meth:`PartitionWork.revoke` (the lock was lost) stops everything at once instead;
nothing is committed.
"""


from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from rocketkafka.ordering.work.step import ClaimContext
from rocketkafka.topic_partition import TP

class Chunker(Protocol):
    """How a consumption mode cuts a partition's fetched records into batches, and which shard runs each.

    A shard runs one batch at a time, in order (orderly: the partition; key mode: the
    partition and the order key); ``None`` means the batch runs on its own (concurrent).
    ``contiguous``: every batch is a run of consecutive records, so the front batch holds
    the partition's lowest unfinished offset.
    """

    contiguous: bool

    def __call__(self, work: PartitionWork,
                 records: Sequence[Any]) -> Iterator[tuple[Hashable, list[Any]]]: ...


class Batch:
    """Records of one partition in offset order, handed to one handler front to back.

    Contiguous in concurrent and orderly mode; in key mode the records of one order key
    (other keys' records lie in between).
    """

    __slots__ = ("work", "records", "start", "end", "shard", "index", "done", "run")

    def __init__(self, work: PartitionWork, records: list[Any], shard: Hashable) -> None:
        self.work, self.records, self.shard = work, records, shard
        self.start, self.end = records[0].offset(), records[-1].offset() + 1
        self.index = 0  # next record to hand to the handler
        self.done = 0  # records from the front that are finished (handled and settled)
        self.run: Any = None  # the lanes.Run handed out and not back yet

    @property
    def finished(self) -> bool:
        return self.done >= len(self.records)

    @property
    def position(self) -> int:
        """The offset of the first unfinished record (``end`` when all are finished), counting what the
        handler of a run still out reported finished record by record."""
        done, run = self.done, self.run
        if run is not None and run.exact and run.done > done:
            done = run.done
        return self.records[done].offset() if done < len(self.records) else self.end

    def __repr__(self) -> str:
        return f"Batch({self.work.tp}, [{self.start}, {self.end}), index={self.index}, done={self.done})"


class PartitionWork:
    """The claim of a listener step on one partition (see the module docstring).

    Parameters:
        context: what the engine gave the claim (partition, start offset, lock validity).
        submit: hands a new batch to what runs it (the scheduler's ``submit``).
        chunker: how fetched records become batches (mode: contiguous runs or order keys).
        recall: takes back the runs no worker has begun, when the partition leaves or is lost (the
            scheduler's ``recall``).
    """

    def __init__(self, context: ClaimContext, submit: Callable[[Batch], None], chunker: Chunker,
                 recall: Callable[[PartitionWork], None] = lambda work: None) -> None:
        self.tp: TP = context.lock
        self.topic, self.partition = self.tp
        self.valid_until = context.valid_until
        self._submit, self._chunker, self._recall = submit, chunker, recall
        self._contiguous = chunker.contiguous
        self.next_offset = context.offsets[self.tp]  # after the last record taken (negative: a logical start)
        self.batches: deque[Batch] = deque()  # unfinished, in order of their first offset
        self.cut: int | None = None  # leaving: records at or after it never start
        self.revoked = False  # lock lost: nothing more runs, nothing is committed
        # offset -> (failed tries, last error): in-place retries
        self.failures: dict[int, tuple[int, str]] = {}
        self.out = 0  # runs handed to lanes and not back yet
        self._finished = 0

    # -- Claim protocol (poll thread) ------------------------------------------------------
    def take(self, tp: TP, records: Sequence[Any]) -> None:
        if self.next_offset >= 0 and records[0].offset() < self.next_offset:  # re-fetched after a seek
            records = [r for r in records if r.offset() >= self.next_offset]
            if not records:
                return
        self.next_offset = records[-1].offset() + 1
        for shard, group in self._chunker(self, records):
            batch = Batch(self, group, shard)
            self.batches.append(batch)
            self._submit(batch)

    def positions(self) -> Mapping[TP, int]:
        point = self.commit_point()
        return {self.tp: point} if point >= 0 else {}

    def progress(self) -> tuple[int, int] | None:
        acked = self._point(list(self.batches))  # the keeper thread: a copy, taken in one step, is read
        if acked < 0:
            return None
        return max(self.delivered(), acked), acked

    def backlog(self) -> Mapping[TP, int]:
        point = self.commit_point()
        return {self.tp: max(0, self.next_offset - point) if point >= 0 else 0}

    def finished(self) -> int:
        return self._finished

    def leave(self) -> None:
        """Cut after everything handed out (see the module docstring)."""
        self._recall(self)  # first: what no worker has begun is not handed out
        handed = [h for b in self.batches if (h := _handed_through(b)) is not None]
        point = self.commit_point()
        self.cut = max([*handed, point]) if point >= 0 else (max(handed) if handed else self.next_offset)

    def revoke(self) -> None:
        self.revoked = True
        self.cut = -1
        self._recall(self)

    def drained(self) -> bool:
        if self.out:
            return False
        if self.revoked or self.cut is None:
            return True
        return self.commit_point() >= self.cut

    def may_start(self, offset: int) -> bool:
        """Whether a record at ``offset`` may still be handed out (the scheduler asks before it feeds a
        batch)."""
        if self.revoked:
            return False
        cut = self.cut
        return cut is None or offset < cut

    def stop_for(self, batch: Batch) -> int | None:
        """How far ``batch`` may be handed: all of it, or up to a leaving partition's cut; ``None``: not at
        all."""
        if not self.may_start(batch.position):
            return None
        cut = self.cut
        if cut is None or batch.end <= cut:
            return len(batch.records)
        return next(i for i, r in enumerate(batch.records) if r.offset() >= cut)

    # -- offsets -----------------------------------------------------------------------------
    def commit_point(self) -> int:
        """The lowest unfinished offset (``next_offset`` when nothing is unfinished); reads only."""
        return self._point(self.batches)

    def _point(self, batches: Iterable[Batch]) -> int:
        if self._contiguous:
            front = next((b for b in batches if not b.finished), None)
            return front.position if front is not None else self.next_offset
        unfinished = [b.position for b in batches if not b.finished]
        return min(unfinished) if unfinished else self.next_offset

    def first_open(self) -> Batch | None:
        """The first batch with records not yet handed out: where a serial claim's shard must go on."""
        return next((b for b in self.batches if b.index < len(b.records)), None)

    def drop_finished(self) -> None:
        """Let go of the finished batches at the front (the settlement calls it as batches finish)."""
        batches = self.batches
        while batches and batches[0].finished:
            self._finished += len(batches.popleft().records)

    def delivered(self) -> int:
        """The offset after the last record this owner took on: fetched, or up to the cut once leaving."""
        return self.cut if self.cut is not None and self.cut >= 0 else self.next_offset


def _handed_through(batch: Batch) -> int | None:
    """The offset after which nothing of ``batch`` was handed out: all of a batch a lane holds (it finishes
    it), up to the last record handed of a paused or finished one (a key may finish above the commit point),
    else ``None``."""
    if batch.run is not None:
        return batch.end
    if batch.index:
        return batch.records[batch.index - 1].offset() + 1
    return None


class Unordered:
    """Concurrent mode: contiguous batches of at most ``size``, each its own shard (they run in parallel)."""

    contiguous = True

    def __init__(self, size: int) -> None:
        self.size = size

    def shard(self, work: PartitionWork) -> Hashable:
        return None

    def __call__(self, work: PartitionWork, records: Sequence[Any]) -> Iterator[tuple[Hashable, list[Any]]]:
        shard, size = self.shard(work), self.size
        for i in range(0, len(records), size):
            yield shard, list(records[i:i + size])


class Serial(Unordered):
    """Orderly mode: the same batches, one shard per partition (one handler at a time)."""

    def shard(self, work: PartitionWork) -> Hashable:
        return work


class _Unkeyed:
    """The shard of a record without an order key: unique, so it waits for nothing (DDMQ)."""

    __slots__ = ()


class ByKey:
    """Key mode (DDMQ's order keys): one shard per (partition, key), keys in parallel, a key's records in
    order.

    Records without a key go into batches of their own, each its own shard.
    """

    contiguous = False

    def __init__(self, size: int, key_of: Callable[[Any], Hashable | None]) -> None:
        self.size, self.key_of = size, key_of

    def __call__(self, work: PartitionWork, records: Sequence[Any]) -> Iterator[tuple[Hashable, list[Any]]]:
        size, key_of = self.size, self.key_of
        groups: list[tuple[Hashable, list[Any]]] = []
        open_groups: dict[Hashable, list[Any]] = {}
        for record in records:
            key = key_of(record)
            group = open_groups.get(key) if key is not None else None
            if group is None or len(group) >= size:
                group = []
                if key is not None:
                    open_groups[key] = group
                groups.append(((work, key) if key is not None else _Unkeyed(), group))
            group.append(record)
        return iter(groups)
