"""Runs in Kafka transactions, with fakes for Kafka: what commits (and when: a transaction spans a lane's runs),
what aborts, what is skipped, where writes go, and what a failure hands again."""

from __future__ import annotations

from types import SimpleNamespace

from confluent_kafka import KafkaError, KafkaException

from rocketkafka.exactly_once import transaction_producer
from rocketkafka.ordering.work.lanes import LOCK_RECHECK_MS, Outcome
from rocketkafka.ordering.consumers import transactional_runs
from rocketkafka.ordering.consumers.transactional_runs import RETRY_PAUSE_MS, RunFailed, TransactionalHandler

TP = ("rk.delay.level.01", 0)


class Record:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset


def run(offsets: range, ours: bool = True) -> SimpleNamespace:
    """A run of ``offsets``; its lock holds while ``ours``."""
    return SimpleNamespace(records=[Record(o) for o in offsets], start=0, stop=len(offsets),
                           work=SimpleNamespace(tp=TP, topic=TP[0]), still_ours=lambda: ours)


class Transactions:
    """Records what the handler asked for; ``committed``: what a new producer read after fencing."""

    def __init__(self, committed: int | None = None, fail_commit: bool = False) -> None:
        self.read, self.fail_commit = committed, fail_commit
        self.log: list[tuple] = []

    def begin(self, tp):
        self.log.append(("begin", tp))
        return "producer", self.read

    def commit(self, tp, producer, next_offset):
        if self.fail_commit:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        self.log.append(("commit", tp, next_offset))

    def abort(self, tp, producer):
        self.log.append(("abort", tp))

    def drop(self, tp):
        self.log.append(("drop", tp))


class Forward:
    """Handles ``handled`` records from the start it is given, then pauses ``pause_ms``."""

    def __init__(self, handled: int | None = None, pause_ms: int | None = None) -> None:
        self.handled, self.pause_ms = handled, pause_ms
        self.starts: list[int] = []
        self.writes_into: list = []

    def __call__(self, run, producer, start):
        self.starts.append(start)
        self.writes_into.append(transaction_producer())
        return Outcome(run.stop - start if self.handled is None else self.handled, None, self.pause_ms)


def handler(forward: Forward, txns: Transactions) -> TransactionalHandler:
    return TransactionalHandler(forward, txns)  # type: ignore[arg-type]


def test_a_lane_s_runs_share_one_transaction_that_commits_when_the_lane_ends():
    txns = Transactions()
    forwarding = handler(Forward(), txns)
    first = forwarding.handle(run(range(10, 15)))  # type: ignore[arg-type]
    second = forwarding.handle(run(range(15, 18)))  # type: ignore[arg-type]
    assert txns.log == [("begin", TP)] and not first.settled.done()  # open: the lane has more
    forwarding.lane_ended()
    assert txns.log == [("begin", TP), ("commit", TP, 18)]
    assert first.settled is second.settled and first.settled.result() == 18
    assert (first.handled, second.handled, forwarding.committed) == (5, 3, 1)


def test_a_transaction_commits_once_it_is_old_enough_and_the_next_run_opens_another(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(transactional_runs.time, "monotonic", lambda: clock[0])
    txns = Transactions()
    forwarding = handler(Forward(), txns)
    forwarding.handle(run(range(10, 15)))  # type: ignore[arg-type]
    clock[0] += transactional_runs.COMMIT_INTERVAL_S + 0.01
    outcome = forwarding.handle(run(range(15, 18)))  # type: ignore[arg-type]
    assert txns.log == [("begin", TP), ("commit", TP, 18)] and outcome.settled.done()
    forwarding.handle(run(range(18, 20)))  # type: ignore[arg-type]
    assert txns.log[-1] == ("begin", TP)


def test_the_thread_writes_into_the_run_s_transaction_while_it_runs_and_only_then():
    forward = Forward()
    handler(forward, Transactions()).handle(run(range(10, 15)))  # type: ignore[arg-type]
    assert forward.writes_into == ["producer"] and transaction_producer() is None


def test_records_below_the_offset_a_new_producer_read_are_not_forwarded_again():
    forward, txns = Forward(), Transactions(committed=13)
    forwarding = handler(forward, txns)
    outcome = forwarding.handle(run(range(10, 15)))  # type: ignore[arg-type]
    forwarding.lane_ended()
    assert forward.starts == [3] and txns.log[-1] == ("commit", TP, 15) and outcome.handled == 5


def test_a_pause_commits_what_the_lane_wrote_before_it():
    txns = Transactions()
    forwarding = handler(Forward(), txns)
    forwarding.handle(run(range(10, 15)))  # type: ignore[arg-type]
    forwarding._run_in = Forward(handled=2, pause_ms=80)  # the third record is not due yet
    outcome = forwarding.handle(run(range(15, 20)))  # type: ignore[arg-type]
    assert txns.log == [("begin", TP), ("commit", TP, 17)] and (outcome.handled, outcome.pause_ms) == (2, 80)


def test_a_run_that_forwarded_nothing_in_a_new_transaction_aborts_and_keeps_the_pause():
    txns = Transactions()
    outcome = handler(Forward(handled=0, pause_ms=80), txns).handle(run(range(10, 15)))  # type: ignore[arg-type]
    assert txns.log[-1] == ("abort", TP) and (outcome.handled, outcome.pause_ms) == (0, 80)


def test_a_run_whose_lock_passed_aborts_the_lane_s_transaction_and_hands_nothing():
    txns = Transactions()
    forwarding = handler(Forward(), txns)
    first = forwarding.handle(run(range(10, 15)))  # type: ignore[arg-type]
    outcome = forwarding.handle(run(range(15, 20), ours=False))  # type: ignore[arg-type]
    assert txns.log[-1] == ("abort", TP) and (outcome.handled, outcome.pause_ms) == (0, LOCK_RECHECK_MS)
    assert first.settled.exception() is not None  # nothing of the first run became visible either


def test_a_failed_commit_drops_the_producer_stops_the_lane_and_hands_every_run_of_it_again():
    txns = Transactions(fail_commit=True)
    forwarding = handler(Forward(), txns)
    first = forwarding.handle(run(range(10, 15)))  # type: ignore[arg-type]
    forwarding._run_in = Forward(handled=2, pause_ms=80)
    second = forwarding.handle(run(range(15, 20)))  # type: ignore[arg-type]
    assert txns.log[-1] == ("drop", TP) and second.pause_ms == RETRY_PAUSE_MS  # no later run commits past them
    assert first.settled.exception() is not None and second.settled is first.settled  # the scheduler rewinds both
    assert (forwarding.committed, forwarding.failed) == (0, 1)


def test_a_failed_listener_aborts_the_transaction_with_its_sends():
    def failing(run, producer, start):
        raise RunFailed(250)

    txns = Transactions()
    forwarding = handler(Forward(), txns)
    first = forwarding.handle(run(range(10, 15)))  # type: ignore[arg-type]
    forwarding._run_in = failing
    outcome = forwarding.handle(run(range(15, 20)))  # type: ignore[arg-type]
    assert txns.log[-1] == ("abort", TP) and (outcome.handled, outcome.pause_ms) == (0, 250)
    assert first.settled.exception() is not None


def test_a_lane_that_wrote_nothing_ends_without_a_transaction():
    txns = Transactions()
    handler(Forward(), txns).lane_ended()
    assert txns.log == []


def test_what_a_new_producer_read_is_skipped_in_every_later_run_too():
    """A commit that reported a failure but landed: the rewind hands its runs again, the new producer reads
    the offset after all of them, and none is written twice (the first run alone was not enough)."""
    forward, txns = Forward(), Transactions(committed=18)
    forwarding = handler(forward, txns)
    first = forwarding.handle(run(range(10, 15)))  # type: ignore[arg-type]
    txns.read = None  # the same producer: no new read
    second = forwarding.handle(run(range(15, 18)))  # type: ignore[arg-type]
    third = forwarding.handle(run(range(18, 20)))  # type: ignore[arg-type]
    forwarding.lane_ended()
    assert forward.starts == [0] and len(forward.starts) == 1  # only the third run, 18 and 19, forwarded
    assert (first.handled, second.handled, third.handled) == (5, 3, 2)
    assert txns.log == [("begin", TP), ("commit", TP, 20)]


def test_a_lane_whose_commit_fails_at_its_end_holds_the_shard_back_until_the_rewind():
    txns = Transactions(fail_commit=True)
    forwarding = handler(Forward(), txns)
    outcome = forwarding.handle(run(range(10, 15)))  # type: ignore[arg-type]
    assert forwarding.lane_ended() == RETRY_PAUSE_MS and outcome.settled.exception() is not None


def test_a_lane_a_rewind_cancelled_commits_nothing():
    txns = Transactions()
    forwarding = handler(Forward(), txns)
    cancelled = run(range(10, 15))
    cancelled.lane = SimpleNamespace(cancelled=False)
    outcome = forwarding.handle(cancelled)  # type: ignore[arg-type]
    cancelled.lane.cancelled = True  # the poll thread's rewind, while the lane still runs
    assert forwarding.lane_ended() == RETRY_PAUSE_MS
    assert txns.log[-1] == ("abort", TP) and outcome.settled.exception() is not None


def test_a_write_refused_at_once_aborts_the_transaction_and_hands_its_records_again():
    """A produce librdkafka refuses at once (no WRITE ACL) never enters the transaction: committing would move the
    offset past a record written nowhere. The work's ack holds the failure when it returns: the transaction aborts."""
    from rocketkafka.deliveries import BatchAck

    class Refused(Forward):
        def __call__(self, run, producer, start):
            ack = BatchAck()
            ack.track()  # one delivery still out
            ack.track()(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), None)  # one refused at once
            return Outcome(run.stop - start, ack.close(), None)

    txns = Transactions()
    outcome = handler(Refused(), txns).handle(run(range(10, 15)))  # type: ignore[arg-type]
    assert txns.log == [("begin", TP), ("abort", TP)]
    assert outcome.handled == 0 and outcome.pause_ms == RETRY_PAUSE_MS
