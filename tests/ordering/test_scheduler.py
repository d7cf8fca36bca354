"""The scheduler with a scripted handler: pauses, settlements, rewinds, and who writes batch state (no Kafka).

The test's thread plays the poll thread: it calls ``tick()``, which applies what the workers posted.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import pytest

from rocketkafka.deliveries import BatchAck
from rocketkafka.ordering.work.lanes import Outcome, Run
from rocketkafka.ordering.work.partition import Batch, PartitionWork, Serial
from rocketkafka.ordering.work.scheduler import Scheduler
from rocketkafka.ordering.work.step import ClaimContext
from tests.ordering.conftest import Rec


class Scripted:
    """Answers each handle() with the next scripted outcome (then: everything handled); records what it was offered."""

    def __init__(self, *outcomes: Outcome, gate: threading.Event | None = None, gated_call: int = -1) -> None:
        self.outcomes = list(outcomes)
        self.offered: list[int] = []
        self.gate, self.gated_call = gate, gated_call  # call number ``gated_call`` waits for ``gate``

    def handle(self, run: Run) -> Outcome:
        self.offered.append(run.records[run.start].offset())
        if self.gate is not None and len(self.offered) - 1 == self.gated_call:
            self.gate.wait(5)
        if self.outcomes:
            return self.outcomes.pop(0)
        return Outcome(run.stop - run.start)


def _setup(handler: Scripted, records: int = 5) -> tuple[Scheduler, PartitionWork, Batch]:
    manager = Scheduler(handler, threads=2, max_continuous_ms=1000, rewind_pause_ms=20, name="test")
    context = ClaimContext(("t", 0), (("t", 0),), 1, {("t", 0): 0}, lambda: float("inf"), lambda tp, o: None)
    work = PartitionWork(context, manager.submit, Serial(records))
    work.take(("t", 0), [Rec(o) for o in range(records)])
    return manager, work, work.batches[0]


def _until(manager: Scheduler, condition, timeout: float = 5.0) -> None:
    """Tick as the poll thread would until ``condition()`` holds."""
    deadline = time.monotonic() + timeout
    while True:
        manager.tick()
        if condition():
            return
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.002)


@pytest.fixture
def managers():
    made: list[Scheduler] = []
    yield made
    for manager in made:
        manager.close()


def test_a_paused_batch_is_not_running_once_its_records_settled(managers):
    settled: Future = Future()
    handler = Scripted(Outcome(2, settled, pause_ms=60_000))  # two handed, then a long wait (a record not due)
    manager, work, batch = _setup(handler)
    managers.append(manager)
    _until(manager, lambda: batch.index == 2 and batch.run is None)
    settled.set_result(None)
    _until(manager, lambda: batch.done == 2)
    assert batch.run is None
    work.leave()  # must not wait for the pause: the rest goes to the next owner
    assert work.cut == 2 and work.drained() and work.commit_point() == 2


def test_a_lock_lost_during_a_pause_drains_at_once(managers):
    handler = Scripted(Outcome(2, Future(), pause_ms=60_000))  # the future never resolves
    manager, work, batch = _setup(handler)
    managers.append(manager)
    _until(manager, lambda: batch.index == 2 and batch.run is None)
    work.revoke()
    assert work.drained()


def test_a_failed_settlement_hands_its_records_again_from_the_first_unsettled(managers):
    failed: Future = Future()
    handler = Scripted(Outcome(3, failed, pause_ms=0))
    manager, work, batch = _setup(handler)
    managers.append(manager)
    _until(manager, lambda: batch.index == 5)  # 0..2 await their future; 3, 4 are handed behind them (pipelining)
    assert work.commit_point() == 0
    failed.set_exception(RuntimeError("broker said no"))
    _until(manager, lambda: work.failures.get(0, (0, ""))[0] == 1)  # the failed try is counted
    _until(manager, lambda: work.commit_point() == 5)
    assert handler.offered == [0, 3, 0]  # after the failure everything unsettled is offered again from 0
    assert not work.failures  # finished records' counts are done with


def test_a_failed_batch_ack_hands_again_only_from_its_first_failed_record(managers):
    ack = BatchAck()
    delivered, refused = ack.track_many(0), ack.track(3)
    delivered.add(), delivered.add(), delivered.add()
    handler = Scripted(Outcome(5, ack.close(), pause_ms=0))
    manager, work, batch = _setup(handler)
    managers.append(manager)
    _until(manager, lambda: batch.index == 5)
    for _ in range(3):
        delivered(None, None)
    refused(RuntimeError("not allowed"), None)
    _until(manager, lambda: work.commit_point() == 5)
    assert handler.offered == [0, 3]  # 0..2 were delivered: only 3 and 4 are handed (and written) again
    assert work.failures == {}


def test_a_rewind_while_the_handler_runs_voids_its_outcome(managers):
    first: Future = Future()
    gate = threading.Event()
    handler = Scripted(Outcome(2, first), Outcome(1, None, pause_ms=0), gate=gate, gated_call=1)
    manager, work, batch = _setup(handler)
    managers.append(manager)
    _until(manager, lambda: len(handler.offered) == 2)  # the second run is inside the handler
    first.set_exception(RuntimeError("lost"))  # rewinds the shard to 0 while the handler holds the batch
    gate.set()
    _until(manager, lambda: work.commit_point() == 5)
    assert handler.offered[:3] == [0, 2, 0]  # the voided run's record 2 is not counted as handled
    assert batch.done == batch.index == 5


def test_a_cancelled_future_rewinds_like_a_failed_one(managers):
    cancelled: Future = Future()
    handler = Scripted(Outcome(2, cancelled))
    manager, work, batch = _setup(handler)
    managers.append(manager)
    _until(manager, lambda: batch.index == 5)
    assert cancelled.cancel()
    _until(manager, lambda: work.commit_point() == 5)  # the poll thread survived it and handed 0, 1 again
    assert handler.offered[:3] == [0, 2, 0]


def test_leaving_takes_back_what_no_worker_has_begun(managers):
    gate = threading.Event()
    handler = Scripted(gate=gate, gated_call=0)
    manager = Scheduler(handler, threads=2, max_continuous_ms=1000, rewind_pause_ms=20, name="test")
    managers.append(manager)
    context = ClaimContext(("t", 0), (("t", 0),), 1, {("t", 0): 0}, lambda: float("inf"), lambda tp, o: None)
    work = PartitionWork(context, manager.submit, Serial(2), manager.recall)
    work.take(("t", 0), [Rec(o) for o in range(10)])  # five batches, fed to one lane; the first is in the handler
    _until(manager, lambda: handler.offered == [0])
    work.leave()
    assert work.cut == 2  # after the batch in the handler only: the four behind it went back
    gate.set()
    _until(manager, lambda: work.drained())
    assert handler.offered == [0] and work.commit_point() == 2


class SpanningLanes(Scripted):
    """A handler whose runs share one future per lane, failed when the lane ends (a transaction whose commit
    failed), the first time only."""

    def __init__(self) -> None:
        super().__init__()
        self.future: Future | None = None
        self.ended = 0

    def handle(self, run: Run) -> Outcome:
        super().handle(run)
        self.future = self.future or Future()
        return Outcome(run.stop - run.start, self.future)

    def lane_ended(self) -> int | None:
        future, self.future = self.future, None
        self.ended += 1
        if future is None:
            return None
        if self.ended == 1:
            future.set_exception(RuntimeError("commit failed"))
            return 200
        future.set_result(None)
        return None


def test_a_lane_whose_end_fails_holds_its_shard_back_and_every_run_of_it_is_handed_again(managers):
    handler = SpanningLanes()
    manager = Scheduler(handler, threads=2, max_continuous_ms=1000, rewind_pause_ms=20, name="test",
                        on_stall=lambda: None)
    managers.append(manager)
    assert manager._on_stall is None  # a handler that ends its lanes never runs on the poll thread
    context = ClaimContext(("t", 0), (("t", 0),), 1, {("t", 0): 0}, lambda: float("inf"), lambda tp, o: None)
    work = PartitionWork(context, manager.submit, Serial(5))
    work.take(("t", 0), [Rec(o) for o in range(10)])  # two batches: 0..4 and 5..9
    _until(manager, lambda: work.commit_point() == 10)
    assert handler.offered[0] == 0 and handler.offered.count(0) == 2  # the failed lane's runs, again from 0
    assert handler.offered[handler.offered.index(0, 1):] == [0, 5]


def test_work_is_out_until_the_last_future_settled_and_every_post_wakes_the_poll_loop(managers):
    settled: Future = Future()
    handler = Scripted(Outcome(5, settled))  # all five handed; durable once the future resolves
    manager, work, batch = _setup(handler)
    managers.append(manager)
    assert manager.out  # a lane went out with the batch
    _until(manager, lambda: batch.index == 5 and batch.run is None and manager._lanes_out == 0)
    assert manager.out and manager.tick() is not None  # no lane, but a future whose Settled post is to come
    manager.posted.clear()
    settled.set_result(None)  # the future's callback posts Settled, on this thread here
    assert manager.posted.is_set()
    _until(manager, lambda: batch.done == 5)
    assert not manager.out and manager.tick() is None


def test_the_order_guard_hands_a_serial_claims_first_open_batch_first_whatever_its_shards_queue_says(managers, caplog):
    """A shard queue that lost its front batch (the state a chaos run's reorder implied; no path to it is known)
    is rebuilt from the claim before a lane starts, and said as an error: the earlier records still go first."""
    handler = Scripted(Outcome(1, pause_ms=50))  # record 0 handled, then the shard pauses before record 1
    manager, work, first = _setup(handler, records=4)
    managers.append(manager)
    work.take(("t", 0), [Rec(o) for o in range(4, 8)])
    _until(manager, lambda: first.index == 1 and first.run is None)
    shard = next(iter(manager._shards.values()))
    shard.batches.remove(first)  # the corruption the guard is for
    with caplog.at_level("ERROR"):
        _until(manager, lambda: work.commit_point() == 8)
    assert handler.offered == [0, 1, 4]  # the rest of the first batch before the second
    assert manager.realigned == 1 and "order guard" in caplog.text
