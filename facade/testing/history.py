"""A history checker over what handlers actually saw.

Every handler call is recorded (consumer, topic, partition, offset, msg id, order
key, enter and exit time). The checker then answers the guarantees of DESIGN §3:
loss, duplicates, per-partition (or per-key) order, and overlap of handlers that
must be serial. Consumers in other processes append JSON lines to a file; the
checker reads them back with :meth:`History.load`.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rocketkafka.testing.clock import true_time  # the real clock, even in a process whose clock a test jumps


@dataclass(frozen=True)
class HandlerCall:
    """One handler invocation as the handler saw it."""

    consumer: str
    topic: str
    partition: int
    offset: int
    msg_id: str
    key: str | None
    enter: float  # wall-clock seconds (the true clock: see rocketkafka.testing.clock)
    exit: float


@dataclass
class HistoryReport:
    """What the checker found; every list holds examples (at most 20)."""

    expected: int
    seen_unique: int
    calls: int
    lost: list[str] = field(default_factory=list)
    lost_count: int = 0
    duplicates: dict[str, int] = field(default_factory=dict)
    duplicate_count: int = 0
    #: ids the log holds at more than one offset (the producer wrote them twice), among the duplicates
    written_twice: int = 0
    reorders: list[str] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """The report in one line: expected, seen, calls, lost, duplicates, reorders, overlaps."""
        return (f"expected={self.expected} seen={self.seen_unique} calls={self.calls} lost={self.lost_count} "
                f"duplicates={self.duplicate_count} (written twice: {self.written_twice}) reorders={len(self.reorders)} overlaps={len(self.overlaps)}")


class History:
    """Thread-safe recorder of handler calls, optionally mirrored to a JSON-lines file."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.calls: list[HandlerCall] = []
        self._lock = threading.Lock()
        self._file = open(path, "a", buffering=1) if path else None

    def record(self, call: HandlerCall) -> None:
        """Add one handler call (and append it to the file, if there is one)."""
        with self._lock:
            self.calls.append(call)
            if self._file:
                self._file.write(json.dumps(asdict(call)) + "\n")

    def handler_call(self, consumer: str, msg, key: str | None = None):
        """Context manager recording one call of ``msg`` (a MessageExt) around the handler body."""
        return _Recording(self, consumer, msg, key)

    def close(self) -> None:
        """Close the JSON-lines file, if there is one."""
        if self._file:
            self._file.close()

    @staticmethod
    def load(paths: Iterable[Path | str]) -> list[HandlerCall]:
        """Read calls that other processes recorded (a torn last line is ignored)."""
        calls: list[HandlerCall] = []
        for path in paths:
            p = Path(path)
            if not p.exists():
                continue
            for line in p.read_text().splitlines():
                try:
                    calls.append(HandlerCall(**json.loads(line)))
                except (ValueError, TypeError):
                    continue
        return calls


class _Recording:
    def __init__(self, history: History, consumer: str, msg, key: str | None) -> None:
        self.history, self.consumer, self.msg, self.key = history, consumer, msg, key

    def __enter__(self) -> None:
        self.enter = true_time()

    def __exit__(self, *exc: object) -> None:
        m = self.msg
        self.history.record(HandlerCall(self.consumer, m.topic, m.queue_id, m.queue_offset, m.id, self.key,
                                        self.enter, true_time()))


def check(calls: list[HandlerCall], expected_ids: Iterable[str], order_by: str | None = "partition",
          serial_by: str | None = "partition") -> HistoryReport:
    """Check calls against the ids producers had acknowledged.

    Parameters:
        order_by: ``"partition"`` or ``"key"``: handler order must follow offsets within that unit
            (first delivery of each message; a re-delivery after a crash may go back).
        serial_by: ``"partition"`` or ``"key"``: no two calls of one unit may overlap in time.
    """
    expected = set(expected_ids)
    counts = Counter(c.msg_id for c in calls)
    lost = sorted(expected - counts.keys())
    dups = {m: n for m, n in counts.items() if n > 1}
    report = HistoryReport(expected=len(expected), seen_unique=len(counts.keys() & expected), calls=len(calls),
                           lost=lost[:20], lost_count=len(lost), duplicates=dict(list(dups.items())[:20]),
                           duplicate_count=sum(n - 1 for n in dups.values()),
                           written_twice=_written_twice(c for c in calls if c.msg_id in dups))
    if order_by:
        report.reorders = _reorders(calls, order_by)
    if serial_by:
        report.overlaps = _overlaps(calls, serial_by)
    return report


def _written_twice(calls: Iterable[HandlerCall]) -> int:
    """How many ids were handled at more than one offset: duplicates in the log, not re-deliveries."""
    places: dict[str, set[tuple[str, int, int]]] = defaultdict(set)
    for c in calls:
        places[c.msg_id].add((c.topic, c.partition, c.offset))
    return sum(1 for where in places.values() if len(where) > 1)


def _unit(call: HandlerCall, by: str) -> tuple:
    return (call.topic, call.partition) if by == "partition" else (call.topic, call.partition, call.key)


def _reorders(calls: list[HandlerCall], by: str) -> list[str]:
    """First deliveries of a unit must enter in increasing offset order."""
    seen: set[tuple[str, int, int]] = set()
    last: dict[tuple, int] = {}
    bad: list[str] = []
    for c in sorted(calls, key=lambda c: c.enter):
        ident = (c.topic, c.partition, c.offset)
        if ident in seen:
            continue
        seen.add(ident)
        unit = _unit(c, by)
        if unit in last and c.offset < last[unit]:
            bad.append(f"{unit}: offset {c.offset} after {last[unit]} ({c.consumer})")
        last[unit] = max(last.get(unit, -1), c.offset)
    return bad[:20]


def _overlaps(calls: list[HandlerCall], by: str) -> list[str]:
    """Calls of one unit must not overlap in time, across all consumers."""
    per_unit: dict[tuple, list[HandlerCall]] = defaultdict(list)
    for c in calls:
        per_unit[_unit(c, by)].append(c)
    bad: list[str] = []
    for unit, items in per_unit.items():
        items.sort(key=lambda c: c.enter)
        for a, b in zip(items, items[1:]):
            if b.enter < a.exit:
                bad.append(f"{unit}: {a.consumer}@{a.offset} [{a.enter:.3f},{a.exit:.3f}] overlaps "
                           f"{b.consumer}@{b.offset} entering {b.enter:.3f}")
    return bad[:20]
