"""Only the poll thread writes batch state: batches, partitions and shards (real worker threads, no Kafka).

Every attribute write to a :class:`Batch`, a :class:`PartitionWork` or a scheduler shard is
recorded with its thread while concurrent, orderly, key-ordered, pipelined (futures resolved
on another thread), rewound and paused work runs on the workers; the test's thread plays
the poll thread. A stuck handler on the poll thread hands polling over, and the stuck thread
writes nothing after that.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import pytest

from rocketkafka.ordering.work.lanes import Outcome, Run
from rocketkafka.ordering.work.order_keys import order_key_of
from rocketkafka.ordering.work.partition import Batch, ByKey, PartitionWork, Serial, Unordered
from rocketkafka.ordering.work.scheduler import INLINE_STALL_S, Scheduler
from rocketkafka.ordering.work.settlement import Shard
from rocketkafka.ordering.work.step import ClaimContext
from tests.ordering.conftest import Rec


@pytest.fixture
def writes(monkeypatch):
    """``[(class name, attribute, thread)]`` of every write to batch state from here on."""
    seen: list[tuple[str, str, threading.Thread]] = []
    for cls in (Batch, PartitionWork, Shard):
        def record(self, name, value, _cls=cls):
            seen.append((_cls.__name__, name, threading.current_thread()))
            object.__setattr__(self, name, value)
        monkeypatch.setattr(cls, "__setattr__", record)
    return seen


class Resolver:
    """Hands each record on and answers with a future that another thread resolves (every ``fail_every``-th fails once)."""

    def __init__(self, fail_every: int = 0) -> None:
        self.fail_every, self.calls, self.handled = fail_every, 0, []
        self._lock = threading.Lock()

    def handle(self, run: Run) -> Outcome:
        with self._lock:
            self.calls += 1
            fail = self.fail_every and self.calls % self.fail_every == 0
        self.handled.extend(r.offset() for r in run.records[run.start:run.stop])
        future: Future = Future()

        def resolve() -> None:
            time.sleep(0.001)
            future.set_exception(RuntimeError("nack")) if fail else future.set_result(None)
        threading.Thread(target=resolve).start()
        return Outcome(run.stop - run.start, future)


class Plain:
    """Handles everything; pauses once on the record at ``pause_at``; reports progress record by record."""

    def __init__(self, pause_at: int = -1) -> None:
        self.pause_at, self.paused = pause_at, False

    def handle(self, run: Run) -> Outcome:
        for i in range(run.start, run.stop):
            if run.records[i].offset() == self.pause_at and not self.paused:
                self.paused = True
                return Outcome(i - run.start, None, 5)
            if run.exact:
                run.done = i + 1
        return Outcome(run.stop - run.start)


def _drive(scheduler: Scheduler, works: list[PartitionWork], expected: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while any(w.commit_point() < expected for w in works):
        assert time.monotonic() < deadline, [w.commit_point() for w in works]
        scheduler.tick()
        time.sleep(0.001)


@pytest.mark.parametrize("mode", ["concurrent", "orderly", "key"])
@pytest.mark.parametrize("handler_kind", ["plain", "futures", "futures-that-fail"])
def test_only_the_poll_thread_writes_batch_state(writes, mode, handler_kind):
    handler = Plain(pause_at=37) if handler_kind == "plain" else Resolver(fail_every=7 if "fail" in handler_kind else 0)
    scheduler = Scheduler(handler, threads=4, max_continuous_ms=1000, rewind_pause_ms=5, name="one-writer")
    chunker = {"concurrent": Unordered(8), "orderly": Serial(8), "key": ByKey(4, order_key_of("key"))}[mode]
    works = []
    try:
        for partition in range(3):
            context = ClaimContext(("t", partition), (("t", partition),), 1, {("t", partition): 0},
                                   lambda: float("inf"), lambda tp, o: None)
            work = PartitionWork(context, scheduler.submit, chunker)
            works.append(work)
        poll = threading.current_thread()
        for start in range(0, 200, 50):
            for work in works:
                work.take(work.tp, [Rec(o, key=b"k%d" % (o % 5), partition=work.partition)
                                    for o in range(start, start + 50)])
            scheduler.tick()
        _drive(scheduler, works, 200)
        assert writes, "the test saw no writes at all: the patch is not in effect"
        strays = {(cls, name, thread.name) for cls, name, thread in writes if thread is not poll}
        assert not strays, f"batch state written off the poll thread: {sorted(strays)}"
    finally:
        scheduler.close()


def test_a_handler_stuck_on_the_poll_thread_hands_polling_over_and_its_thread_writes_nothing_after(writes):
    gate, inside = threading.Event(), threading.Event()
    stalls: list[threading.Thread] = []

    class Sometimes:
        block_next = False

        def handle(self, run: Run) -> Outcome:
            if self.block_next:
                self.block_next = False
                inside.set()
                gate.wait(60)  # released by the test once the hand-over came (a loaded CI machine is slow)
            return Outcome(run.stop - run.start)

    handler = Sometimes()
    scheduler = Scheduler(handler, threads=2, max_continuous_ms=1000, rewind_pause_ms=5, name="stall",
                          on_stall=lambda: stalls.append(threading.current_thread()))
    context = ClaimContext(("t", 0), (("t", 0),), 1, {("t", 0): 0}, lambda: float("inf"), lambda tp, o: None)
    work = PartitionWork(context, scheduler.submit, Unordered(100))
    try:
        offset = 0
        for _ in range(20):  # fast batches: measured at microseconds per record, they move onto the poll thread
            work.take(work.tp, [Rec(o) for o in range(offset, offset + 100)])
            offset += 100
            _drive(scheduler, [work], offset)
        assert scheduler._inline is not None and scheduler._per_record_s < 20e-6
        handler.block_next = True
        work.take(work.tp, [Rec(o) for o in range(offset, offset + 100)])  # queued for the poll thread
        answer: list[object] = []
        old = threading.Thread(target=lambda: answer.append(scheduler.tick()), name="old-poll")
        old.start()
        assert inside.wait(30), "the batch did not run on the (old) poll thread"
        deadline = time.monotonic() + 30
        while not stalls:
            assert time.monotonic() < deadline, "no hand-over"
            time.sleep(INLINE_STALL_S / 4)
        handed_over_at = len(writes)
        gate.set()
        old.join(30)
        assert answer == [None]  # the stuck thread left its tick at once
        assert not [w for w in writes[handed_over_at:] if w[2] is old], "the stuck thread wrote after the hand-over"
        _drive(scheduler, [work], offset + 100)  # the new poll thread applies what the stuck one posted
    finally:
        gate.set()
        scheduler.close()
