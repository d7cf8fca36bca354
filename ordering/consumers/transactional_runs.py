"""Runs of a partition written in Kafka transactions: one transaction spans the runs a lane hands in a row.

A handler's run writes its output into the partition's transaction (its thread writes into it:
:func:`rocketkafka.exactly_once.writing_into`), and the transaction commits with the offset after the
last handled record (``send_offsets_to_transaction``). A read_committed reader sees all of it or none.

Why not one transaction per run: records fetched at a steady rate arrive a few per fetch, so each
run is a record or two, and a commit takes a round trip to the transaction coordinator and the
markers' writes (90 ms median on Apache Kafka here). One transaction per run forwarded 15 records a
second per partition, and a delay topic fed 125 a second fell behind without end. So a transaction
stays open while the lane has more runs of the partition in its feed, and commits when:

- the lane ends (its feed ran dry, a pause, a partial run, its time slice): :meth:`TransactionalHandler.lane_ended`,
  called by the lane on the same worker thread (never the poll thread: the scheduler runs such a handler
  on workers only);
- it is :data:`COMMIT_INTERVAL_S` old or holds :data:`COMMIT_MAX_RECORDS` records.

Each run reports a future as its ``settled``: the transaction's, resolved by the commit. A commit or a
run that fails aborts the transaction, and the future's failure makes the scheduler hand every run of it
again (a rewind). Until then no later run may commit past them: the run or the lane's end that failed
returns a pause, which holds the shard back until the rewind. A run of a lane the rewind cancelled
commits nothing either.

Records below the partition's *floor* are skipped, in every run: the offset a new producer read after
fencing (:meth:`~rocketkafka.ordering.consumers.transactions.PartitionTransactions.begin`: what an earlier owner,
or a commit that reported a failure but landed, wrote), then each commit's offset.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from rocketkafka.errors import AuthorizationError
from rocketkafka.exactly_once import writing_into
from rocketkafka.ordering.work.lanes import Outcome, Run
from rocketkafka.ordering.consumers.transactions import PartitionTransactions
from rocketkafka.refusals import REFUSALS, is_authorization, kafka_refusal
from rocketkafka.topic_partition import TP

log = logging.getLogger(__name__)

#: Seconds a transaction stays open across a lane's runs (Kafka Streams commits exactly-once every 100 ms).
COMMIT_INTERVAL_S = 0.1
#: Records a transaction takes across a lane's runs before it commits.
COMMIT_MAX_RECORDS = 5_000
#: Milliseconds a partition waits after a failed transaction before its records are tried again.
RETRY_PAUSE_MS = 500
#: Milliseconds a partition waits at most after writes refused at once in a row (the settlement's bound too).
REFUSED_PAUSE_MAX_MS = 5_000
#: Seconds a failed transaction's producer may take to report its purged records.
PURGE_WAIT_S = 1.0
#: Failures of a transaction a missing WRITE ACL may explain: refused adding a partition, or the abortable
#: state that refusal left (``send_offsets_to_transaction`` then fails with ``_STATE``).
_MAY_BE_REFUSED = frozenset({KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError._STATE})

#: ``(run, producer, start) -> Outcome``: a handler's work on ``run.records[start:run.stop]``, writing
#: through ``producer``; the outcome's ``handled`` counts from ``start``. It raises :class:`RunFailed` when
#: the run failed after it may have written (a listener's error): the transaction must not commit.
RunIn = Callable[[Run, Any, int], Outcome]


class RunFailed(Exception):
    """The run failed and may have written into the transaction: it aborts; try again in ``pause_ms``."""

    def __init__(self, pause_ms: int) -> None:
        super().__init__(f"run failed; tried again in {pause_ms} ms")
        self.pause_ms = pause_ms


class _Open:
    """The transaction a worker thread has open: whose, through which producer, and up to where."""

    __slots__ = ("tp", "producer", "began", "records", "next_offset", "last_run", "settled", "acks")

    def __init__(self, tp: TP, producer: Any) -> None:
        self.tp, self.producer = tp, producer
        self.began = time.monotonic()
        self.records = 0  # handled in it so far
        self.next_offset = -1  # the offset to commit: after the last handled record
        self.last_run: Run | None = None
        self.settled: Future = Future()
        self.acks: list[Any] = []  # the work's own delivery acks: a failed commit's refusal names its topic there


class TransactionalHandler:
    """A BatchHandler that writes a partition's runs in Kafka transactions (see the module docstring).

    Parameters:
        run_in: the work itself; its ``settled`` future, if any, is only looked at after the commit (a
            forwarder's delivery ack: the commit flushes the producer), except for a failure it already holds
            when the work returns (a produce refused at once, which never entered the transaction): that aborts.
        transactions: the partitions' transactional producers.
        name_refusal: ``topics -> the refusal of a WRITE on one of them, or None``: asked when a transaction
            failed in a way a missing ACL may explain (Kafka names no topic then); ``None``: not asked.
    """

    def __init__(self, run_in: RunIn, transactions: PartitionTransactions,
                 name_refusal: Callable[[list[str]], AuthorizationError | None] | None = None) -> None:
        self._run_in, self._transactions, self._name_refusal = run_in, transactions, name_refusal
        self._open = threading.local()  # .txn: the _Open of this worker thread, or None
        self._floor: dict[TP, int] = {}  # per partition: offsets below are written (see the module docstring)
        self._refused_tries: dict[TP, int] = {}  # per partition: writes refused at once in a row
        self.committed = 0  # transactions committed (metrics, tests)
        self.failed = 0  # transactions that failed, their runs tried again

    def handle(self, run: Run) -> Outcome:
        tp = run.work.tp
        txn: _Open | None = getattr(self._open, "txn", None)
        if txn is not None and txn.tp != tp:  # a lane is one partition's; end another's before starting
            self.lane_ended()
            txn = None
        if run.records[run.stop - 1].offset() < self._floor.get(tp, -1):
            return Outcome(run.stop - run.start)  # all of it written before (a rewind after a commit that landed)
        if txn is None:
            try:
                producer, committed = self._transactions.begin(tp)
            except KafkaException as exc:
                return self._begin_failed(run, exc)
            if committed is not None:  # a new producer fenced and re-read the offset: what is below it is written
                self._floor[tp] = committed
            txn = self._open.txn = _Open(tp, producer)
        start, floor = run.start, self._floor.get(tp, -1)
        while start < run.stop and run.records[start].offset() < floor:
            start += 1
        skipped = start - run.start
        if start == run.stop:
            return Outcome(skipped)  # the transaction stays open, empty or not, for the lane's next runs
        run.exact = False  # no progress record by record: the transaction may still abort
        try:
            with writing_into(txn.producer):
                outcome = self._run_in(run, txn.producer, start)
        except RunFailed as failed:
            self._abort(txn, failed)
            return Outcome(skipped, None, failed.pause_ms)
        except BaseException as exc:  # its writes must not commit with the others
            self._abort(txn, exc)
            raise
        refused = _failed_so_far(outcome.settled)
        if refused is not None:  # a write refused at once never entered the transaction: a commit would skip it
            return self._refused_at_once(txn, run, start, refused, skipped)
        if outcome.settled is not None:
            txn.acks.append(outcome.settled)
        if not run.still_ours():  # stalled past the lock: the next owner decides, this writes nothing
            self._abort(txn, RuntimeError(f"the lock of {tp} passed"), failed=False)
            return Outcome.not_ours(skipped)
        if _cancelled(run):  # a rewind came meanwhile: these runs are handed again, from before them
            self._abort(txn, RuntimeError(f"the runs of {tp} are handed again"), failed=False)
            return Outcome(skipped, None, RETRY_PAUSE_MS)
        if outcome.handled:
            txn.records += outcome.handled
            txn.next_offset = run.records[start + outcome.handled - 1].offset() + 1
            txn.last_run = run
        ends_lane = outcome.pause_ms is not None or start + outcome.handled < run.stop
        if txn.records == 0:  # nothing in it: nothing to commit
            self._abort(txn, None, failed=False)
            return Outcome(skipped, None, outcome.pause_ms)
        pause_ms = outcome.pause_ms
        if ends_lane or txn.records >= COMMIT_MAX_RECORDS or time.monotonic() - txn.began >= COMMIT_INTERVAL_S:
            if not self._commit(txn):
                pause_ms = RETRY_PAUSE_MS  # the lane stops: no later run may commit past the failed ones
        return Outcome(skipped + outcome.handled, txn.settled if outcome.handled else None, pause_ms)

    def lane_ended(self) -> int | None:
        """The lane of this thread stopped: commit what its runs wrote (the lane calls it before it ends).

        Returns the pause (ms) that holds the shard's next lane back until the rewind of a transaction
        that did not commit, else ``None``.
        """
        txn: _Open | None = getattr(self._open, "txn", None)
        if txn is None:
            return None
        if txn.records == 0:  # begun, nothing written (its runs were below the floor)
            self._abort(txn, None, failed=False)
            return None
        last = txn.last_run
        if last is not None and not last.still_ours():
            self._abort(txn, RuntimeError(f"the lock of {txn.tp} passed"), failed=False)
            return RETRY_PAUSE_MS
        if last is not None and _cancelled(last):
            self._abort(txn, RuntimeError(f"the runs of {txn.tp} are handed again"), failed=False)
            return RETRY_PAUSE_MS
        return None if self._commit(txn) else RETRY_PAUSE_MS

    def _commit(self, txn: _Open) -> bool:
        """Commit ``txn``; False when it failed (its runs are handed again)."""
        self._open.txn = None
        try:
            self._transactions.commit(txn.tp, txn.producer, txn.next_offset)
        except KafkaException as exc:
            self._failed(txn, exc)
            return False
        except BaseException as exc:  # the future must end, or the shard's settlement waits forever
            self._failed(txn, exc)
            raise
        self.committed += 1
        self._refused_tries.pop(txn.tp, None)
        self._floor[txn.tp] = txn.next_offset
        txn.settled.set_result(txn.next_offset)
        return True

    def _abort(self, txn: _Open, error: BaseException | None, failed: bool = True) -> None:
        """End ``txn`` without a trace; its runs so far are handed again (their future fails)."""
        self._open.txn = None
        try:
            self._transactions.abort(txn.tp, txn.producer)
        finally:
            if txn.records:
                txn.settled.set_exception(error or RuntimeError(f"the transaction of {txn.tp} was aborted"))
            if failed:
                self.failed += 1

    def _failed(self, txn: _Open, exc: BaseException) -> None:
        """Nothing of the transaction became visible; its runs are handed again (a new producer fences and
        re-reads the offset).

        A transaction Kafka refused for a missing ACL (``AddPartitionsToTxn``: TOPIC_AUTHORIZATION_FAILED) fails
        its commit with no topic named, and its records with ``_PURGE_QUEUE``: ``name_refusal`` asks which of the
        topics they were written to the principal may not write. The refusal is what the runs fail with, told
        once a minute by the settlement, not at every try.
        """
        self.failed += 1
        error: BaseException = exc
        try:
            self._transactions.drop(txn.tp)
            error = self._refusal_of(txn, exc) or exc
        except Exception as unknown:  # noqa: BLE001 - the future must end, or the shard's settlement waits forever
            log.debug("the refusal of a failed transaction of %s not named: %s", txn.tp, unknown)
        finally:
            if not isinstance(error, AuthorizationError):
                log.warning("a transaction of %s[%d] failed (%s); its records are tried again", txn.tp[0], txn.tp[1],
                            exc.args[0] if exc.args else exc)
            txn.settled.set_exception(error)

    def _refused_at_once(self, txn: _Open, run: Run, start: int, refused: BaseException, skipped: int) -> Outcome:
        """Abort ``txn``: a write of the run was refused before it entered the transaction. Its earlier runs fail
        with the refusal (the settlement tells it); a run alone in it pauses here, longer at each refusal in a
        row (up to :data:`REFUSED_PAUSE_MAX_MS`), and tells it once a minute itself."""
        tp = run.work.tp
        alone = txn.records == 0
        self._abort(txn, refused)
        tries = self._refused_tries[tp] = self._refused_tries.get(tp, 0) + 1
        if not alone:
            return Outcome(skipped, None, RETRY_PAUSE_MS)
        if isinstance(refused, AuthorizationError):
            REFUSALS.note(refused, f"delivery of {tp}@{run.records[start].offset()}")
        else:
            log.warning("a write of %s[%d] failed at once (%s); its records are tried again", tp[0], tp[1], refused)
        return Outcome(skipped, None, min(REFUSED_PAUSE_MAX_MS, RETRY_PAUSE_MS * 2 ** min(tries - 1, 8)))

    def _refusal_of(self, txn: _Open, exc: BaseException) -> AuthorizationError | None:
        """The refusal that failed ``txn``, naming its topic when ``name_refusal`` can tell, else ``None``."""
        known = next((e for e in map(_failed_so_far, txn.acks) if isinstance(e, AuthorizationError)), None)
        cause = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        if known is not None or not isinstance(cause, KafkaError) or cause.code() not in _MAY_BE_REFUSED:
            return known
        if self._name_refusal is not None:
            try:
                txn.producer.flush(PURGE_WAIT_S)  # the purged records' reports say which topics it wrote
            except Exception as flush_error:  # noqa: BLE001 - a producer in a fatal state: nothing more to learn
                log.debug("reports of a failed transaction not served: %s", flush_error)
            topics = set().union(*(getattr(ack, "failed_topics", ()) for ack in txn.acks)) - {"?"}
            named = self._name_refusal(sorted(topics)) if topics else None
            if named is not None:
                return named
        return kafka_refusal(cause, "a topic this transaction wrote", "WRITE") if is_authorization(cause) else None

    def _begin_failed(self, run: Run, exc: KafkaException) -> Outcome:
        self.failed += 1
        log.warning("a transaction of %s[%d] could not begin (%s); its records are tried again in %d ms",
                    run.work.topic, run.work.tp[1], exc.args[0] if exc.args else exc, RETRY_PAUSE_MS)
        return Outcome(0, None, RETRY_PAUSE_MS)


def _failed_so_far(settled: Any) -> BaseException | None:
    """A failure the work's own ack already holds (a produce refused at once), ``None`` otherwise or when unknown."""
    failed_so_far = getattr(settled, "failed_so_far", None)
    return failed_so_far() if failed_so_far is not None else None


def _cancelled(run: Run) -> bool:
    """Whether a rewind cancelled the lane of ``run`` (its runs are handed again)."""
    lane = getattr(run, "lane", None)
    return lane is not None and lane.cancelled
