"""Half/op matching (RocketMQ's ``removeMap`` / ``doneOpOffset``), pure logic for one half partition.

Op partition ``p`` holds the op records of half partition ``p``; each op names the
half offset it closes. The ledger follows RocketMQ's ``TransactionalMessageServiceImpl.check``:

- an op for a half at or after the half progress waits in the *remove map* until that
  half is reached; the half is then done (no check);
- an op for a half before the half progress is *done* at once (a late or repeated end);
- the op progress advances over done ops only, and stops at the first op still waiting
  (``calculateOpOffset``): committing past it would lose the op on restart, and its half
  would be checked back although it was ended.

Beyond RocketMQ, the ledger remembers the transaction ids of the ops it read (bounded):
a half re-written for a check-back is a new copy at a new offset, and an op closing the
old copy arrives too late to match the new one; the transaction id still closes it.

>>> ledger = HalfOpLedger(half_next=0, op_next=0)
>>> ledger.add_op(0, half_offset=1, transaction_id="T1")    # half 1 ended before it was scanned
>>> decide(ledger, 0, "T0", born_ms=0, stored_ms=0, check_times=0, now_ms=10_000, round_start_ms=10_000,
...        timeout_ms=6_000, max_check_times=15)
<Decision.CHECK: 'check'>
>>> ledger.pass_half(0); decide(ledger, 1, "T1", 0, 0, 0, 10_000, 10_000, 6_000, 15)
<Decision.DONE: 'done'>
>>> ledger.pass_half(1); ledger.op_commit_point()
1
"""

from __future__ import annotations

import enum
from collections import OrderedDict, deque
from dataclasses import dataclass


class Decision(enum.Enum):
    """What to do with the half at the head of the scan."""

    DONE = "done"  # an op closes this very half
    CLOSED = "closed"  # an op closed another copy of its transaction
    WAIT = "wait"  # not due yet, or stored during this scan: the scan stops here
    CHECK = "check"  # re-write it with one more check, then ask the producer group
    MAX_CHECK = "max-check"  # checked too often: move it to the max-check topic


@dataclass(eq=False)
class _Op:
    offset: int
    half_offset: int | None
    done: bool = False


class HalfOpLedger:
    """Matching state of one half partition and its op partition.

    Parameters:
        half_next: the half progress: the offset of the next half to decide.
        op_next: the op progress: the offset of the next op to read.
        closed_capacity: transaction ids of ops remembered (least recently seen dropped first).
    """

    def __init__(self, half_next: int, op_next: int, closed_capacity: int = 100_000) -> None:
        self.half_next = half_next
        self.op_read_next = op_next
        self._ops: deque[_Op] = deque()
        self._remove: dict[int, list[_Op]] = {}
        self._closed: OrderedDict[str, None] = OrderedDict()
        self._capacity = closed_capacity

    def add_op(self, offset: int, half_offset: int | None, transaction_id: str | None) -> None:
        """Record an op read at ``offset`` (in offset order); ``half_offset`` ``None``: a probe or unusable op."""
        if offset < self.op_read_next:
            return  # read again after a seek
        op = _Op(offset, half_offset)
        self._ops.append(op)
        self.op_read_next = offset + 1
        if half_offset is None or half_offset < self.half_next:
            op.done = True  # doneOpOffset
        else:
            self._remove.setdefault(half_offset, []).append(op)  # removeMap
        if transaction_id and self._capacity:
            self._closed[transaction_id] = None
            self._closed.move_to_end(transaction_id)
            if len(self._closed) > self._capacity:
                self._closed.popitem(last=False)

    def closes(self, half_offset: int) -> bool:
        """True when an op names ``half_offset``."""
        return half_offset in self._remove

    def is_closed(self, transaction_id: str) -> bool:
        """True when an op of ``transaction_id`` was read (for any copy of its half)."""
        return transaction_id in self._closed

    def pass_half(self, half_offset: int) -> None:
        """The half at ``half_offset`` is decided: the progress moves past it and its ops are done."""
        gap = half_offset > self.half_next
        for op in self._remove.pop(half_offset, ()):
            op.done = True
        self.half_next = max(self.half_next, half_offset + 1)
        if gap:  # offsets skipped (compaction, control records): their ops are done too
            for skipped in [h for h in self._remove if h < self.half_next]:
                for op in self._remove.pop(skipped):
                    op.done = True

    def op_commit_point(self) -> int:
        """The op progress safe to commit: the first op still waiting for its half, or the next to read."""
        while self._ops and self._ops[0].done:
            self._ops.popleft()
        return self._ops[0].offset if self._ops else self.op_read_next

    @property
    def waiting_ops(self) -> int:
        """Ops read and not yet done (their halves lie ahead)."""
        return sum(len(ops) for ops in self._remove.values())


def decide(ledger: HalfOpLedger, offset: int, transaction_id: str, born_ms: int, stored_ms: int, check_times: int,
           now_ms: int, round_start_ms: int, timeout_ms: int, max_check_times: int) -> Decision:
    """The fate of the half at ``offset`` in a scan that started at ``round_start_ms`` (all times epoch ms).

    RocketMQ's order: an op closes it; a half stored after the scan began waits for the next
    scan (it is a copy this scan wrote, or too fresh); a half younger than the timeout
    waits (so do all after it); a half checked ``max_check_times`` times is moved aside;
    any other is checked back.
    """
    if ledger.closes(offset):
        return Decision.DONE
    if ledger.is_closed(transaction_id):
        return Decision.CLOSED
    if stored_ms >= round_start_ms or now_ms - born_ms < timeout_ms:
        return Decision.WAIT
    if check_times >= max_check_times:
        return Decision.MAX_CHECK
    return Decision.CHECK
