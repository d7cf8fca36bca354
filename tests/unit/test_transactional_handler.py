"""A run in a Kafka transaction, with fakes for Kafka: what commits, what aborts, what is skipped, where writes go."""

from __future__ import annotations

from types import SimpleNamespace

from confluent_kafka import KafkaError, KafkaException

from rocketkafka.exactly_once import transaction_producer
from rocketkafka.ordering.lanes import LOCK_RECHECK_MS, Outcome
from rocketkafka.ordering.transactions import RETRY_PAUSE_MS, TransactionalHandler

TP = ("rk.delay.level.01", 0)


class Record:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset


def run(offsets: range, ours: bool = True) -> SimpleNamespace:
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


def test_a_run_commits_its_records_with_the_offset_after_the_last():
    txns = Transactions()
    outcome = handler(Forward(), txns).handle(run(range(10, 15)))  # type: ignore[arg-type]
    assert txns.log == [("begin", TP), ("commit", TP, 15)]
    assert (outcome.handled, outcome.settled, outcome.pause_ms) == (5, None, None)


def test_the_thread_writes_into_the_run_s_transaction_while_it_runs_and_only_then():
    forward = Forward()
    handler(forward, Transactions()).handle(run(range(10, 15)))  # type: ignore[arg-type]
    assert forward.writes_into == ["producer"] and transaction_producer() is None


def test_records_below_the_offset_a_new_producer_read_are_not_forwarded_again():
    forward, txns = Forward(), Transactions(committed=13)
    outcome = handler(forward, txns).handle(run(range(10, 15)))  # type: ignore[arg-type]
    assert forward.starts == [3] and txns.log[-1] == ("commit", TP, 15) and outcome.handled == 5


def test_a_run_that_forwarded_nothing_aborts_and_keeps_the_pause():
    txns = Transactions()
    outcome = handler(Forward(handled=0, pause_ms=80), txns).handle(run(range(10, 15)))  # type: ignore[arg-type]
    assert txns.log[-1] == ("abort", TP) and (outcome.handled, outcome.pause_ms) == (0, 80)


def test_a_run_whose_lock_passed_aborts_and_hands_nothing():
    txns = Transactions()
    outcome = handler(Forward(), txns).handle(run(range(10, 15), ours=False))  # type: ignore[arg-type]
    assert txns.log[-1] == ("abort", TP) and (outcome.handled, outcome.pause_ms) == (0, LOCK_RECHECK_MS)


def test_a_failed_commit_drops_the_producer_and_tries_the_run_again():
    txns = Transactions(fail_commit=True)
    forwarding = handler(Forward(), txns)
    outcome = forwarding.handle(run(range(10, 15)))  # type: ignore[arg-type]
    assert txns.log[-1] == ("drop", TP) and (outcome.handled, outcome.pause_ms) == (0, RETRY_PAUSE_MS)
    assert (forwarding.committed, forwarding.failed) == (0, 1)
