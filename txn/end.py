"""End-transaction (RocketMQ's ``END_TRANSACTION`` / ``EndTransactionProcessor``), in batches on one thread.

COMMIT writes the real message, then the op record; ROLLBACK writes only the op
record; UNKNOWN writes nothing. The op goes out only after the real message is
acked, so an op never closes a half whose message is missing: if anything fails the
half stays open and the checker checks it back. Nothing here raises to the caller;
each request's future says whether its writes landed.

Both the producer's own end-transaction and the answers to check-backs come through
here, and the end markers (:mod:`rocketkafka.txn.markers`) make the second COMMIT of a transaction
write only its op.

With ``kafka_transactions`` the real messages and op records of a batch are written
in one Kafka transaction instead (all or nothing).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka import Producer as _KafkaProducer

from rocketkafka.config import SAFE_PRODUCER_CONFIG, kafka_client
from rocketkafka.errors import AuthorizationError, StateError
from rocketkafka.names import TopicNames
from rocketkafka.record import Record
from rocketkafka.refusals import kafka_refusal, refusal_in
from rocketkafka.sender import Sender
from rocketkafka.txn.markers import COMMITTED, EndMarkers
from rocketkafka.txn.records import HalfMessage
from rocketkafka.txn.status import TransactionStatus

log = logging.getLogger(__name__)


@dataclass
class Delivery:
    """How one produced record ended: ``error`` (``None`` when acked) and, when acked, where it is stored;
    ``refusal`` when no ACL allowed the write (``error`` then says so too)."""

    error: str | None = "no acknowledgement"
    partition: int = -1
    offset: int = -1
    refusal: AuthorizationError | None = None


def produce_all(sender: Sender, records: Sequence[Record], timeout: float,
                kafka: _KafkaProducer | None = None) -> list[Delivery]:
    """Produce ``records`` (through ``kafka`` when given) and wait for every ack; one :class:`Delivery` each."""
    outcome = [Delivery() for _ in records]
    remaining = [len(records)]
    lock = threading.Lock()  # callbacks may run in any thread that polls the same producer

    def delivered(i: int):
        def callback(err: Any, msg: Any) -> None:
            with lock:
                if err is not None:
                    refusal = kafka_refusal(err, records[i].topic, "WRITE", sender.principal)
                    outcome[i].error, outcome[i].refusal = (str(refusal) if refusal else err.str()), refusal
                else:
                    outcome[i].error, outcome[i].partition, outcome[i].offset = None, msg.partition(), msg.offset()
                remaining[0] -= 1
        return callback

    client = kafka or sender.kafka
    for i, record in enumerate(records):
        try:
            if kafka is None:
                sender.produce(record, delivered(i))
            else:
                kwargs = {"key": record.key, "headers": record.headers, "on_delivery": delivered(i)}
                if record.partition >= 0:
                    kwargs["partition"] = record.partition
                kafka.produce(record.topic, record.value, **kwargs)
        except Exception as exc:  # refused at once: counts as failed
            with lock:
                outcome[i].error = str(exc)
                outcome[i].refusal = exc if isinstance(exc, AuthorizationError) else None
                remaining[0] -= 1
    deadline = time.monotonic() + timeout
    while remaining[0] > 0 and time.monotonic() < deadline:
        client.poll(0.005)
    return outcome


@dataclass
class _Request:
    half: HalfMessage
    state: TransactionStatus
    future: Future


class TransactionEnder:
    """Writes end-transaction records for one producer, batching requests from every thread.

    Parameters:
        sender: the producer engine (its confluent-kafka producer writes real and op records).
        markers: the Redis end markers.
        topics: internal topic names.
        batch_max: requests handled in one batch.
        queue_max: requests queued at most (``submit`` waits for room).
        timeout_ms: how long one batch waits for its acks.
        transactional_id: write each batch in a Kafka transaction under this id (``None``: off).
    """

    def __init__(self, sender: Sender, markers: EndMarkers, topics: TopicNames, batch_max: int = 500,
                 queue_max: int = 10_000, timeout_ms: int = 30_000, transactional_id: str | None = None) -> None:
        self.sender, self.markers, self.topics = sender, markers, topics
        self.batch_max, self.timeout = batch_max, timeout_ms / 1000
        self._queue: queue.Queue[_Request] = queue.Queue(queue_max)
        self._closing = threading.Event()
        self._txn_kafka: _KafkaProducer | None = None
        if transactional_id is not None:
            self._txn_kafka = kafka_client(_KafkaProducer, sender.settings.kafka_config(**{
                "transactional.id": transactional_id, "linger.ms": 5, **SAFE_PRODUCER_CONFIG}))
            try:
                self._txn_kafka.init_transactions(self.timeout)
            except KafkaException as exc:  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED: named, with the id
                refusal = refusal_in(exc, transactional_id, "WRITE", sender.principal)
                self._txn_kafka = None
                if refusal is None:
                    raise
                raise refusal from None
        self._thread = threading.Thread(target=self._run, name="rk-txn-end", daemon=True)
        self._thread.start()

    def submit(self, half: HalfMessage, state: TransactionStatus) -> Future:
        """Queue the end of ``half``'s transaction (waiting while the queue is full).

        The future's result is True once the writes are durable, False when they failed
        (the checker will check the transaction back).
        """
        future: Future = Future()
        if state is TransactionStatus.UNKNOWN:
            future.set_result(True)  # nothing to write: the checker will ask
            return future
        if self._closing.is_set():
            raise StateError("transaction producer is shut down")
        self._queue.put(_Request(half, state, future))
        return future

    def close(self, timeout: float = 30.0) -> None:
        """Finish the requests queued so far, then stop."""
        self._closing.set()
        self._thread.join(timeout)
        if self._txn_kafka is not None:
            self._txn_kafka.flush(timeout)

    # -- the writer thread -------------------------------------------------------------
    def _run(self) -> None:
        while not (self._closing.is_set() and self._queue.empty()):
            try:
                first = self._queue.get(timeout=0.05)
            except queue.Empty:
                continue
            batch = [first]
            while len(batch) < self.batch_max:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._end(batch)
            except Exception:  # never leave a caller waiting, never die
                log.exception("end-transaction batch failed; the checker will check these transactions back")
                for request in batch:
                    if not request.future.done():
                        request.future.set_result(False)

    def _end(self, batch: list[_Request]) -> None:
        commits = [r for r in batch if r.state is TransactionStatus.COMMIT]
        rollbacks = [r for r in batch if r.state is TransactionStatus.ROLLBACK]
        ended = self.markers.lookup((r.half.producer_group, r.half.transaction_id) for r in commits)
        reals: dict[tuple[str, str], HalfMessage] = {}
        for r in commits:
            txn = (r.half.producer_group, r.half.transaction_id)
            if ended.get(txn) != COMMITTED:
                reals.setdefault(txn, r.half)  # one real message per transaction, however many copies end
        if self._txn_kafka is not None:
            self._end_atomically(commits, rollbacks, reals)
            return
        written = produce_all(self.sender, [h.real_record() for h in reals.values()], self.timeout)
        failed = {txn: d.error for txn, d in zip(reals, written) if d.error is not None}
        for txn, err in failed.items():
            log.warning("real message of transaction %s not written (%s); the checker will check it back", txn[1], err,
                        extra={"msg_id": reals[txn].msg_id, "transaction_id": txn[1]})
        closing = [r for r in commits if (r.half.producer_group, r.half.transaction_id) not in failed] + rollbacks
        self.markers.mark(committed=[txn for txn in reals if txn not in failed],
                          rolled_back=[(r.half.producer_group, r.half.transaction_id) for r in rollbacks])
        ops = produce_all(self.sender, [r.half.op_record(self.topics, r.state) for r in closing], self.timeout)
        for r, op_err in zip(closing, (d.error for d in ops)):
            if op_err is not None:
                log.warning("op record of transaction %s not written (%s); the checker will check it back",
                            r.half.transaction_id, op_err, extra={"msg_id": r.half.msg_id, "transaction_id": r.half.transaction_id})
            r.future.set_result(op_err is None)
        for r in commits:
            if not r.future.done():
                r.future.set_result(False)

    def _end_atomically(self, commits: list[_Request], rollbacks: list[_Request],
                        reals: dict[tuple[str, str], HalfMessage]) -> None:
        kafka = self._txn_kafka
        assert kafka is not None  # called only with a transactional producer
        closing = commits + rollbacks
        records = [h.real_record() for h in reals.values()] + [r.half.op_record(self.topics, r.state) for r in closing]
        try:
            kafka.begin_transaction()
            errors = [d.error for d in produce_all(self.sender, records, self.timeout, kafka=kafka) if d.error]
            if errors:
                raise KafkaException(errors[0])
            kafka.commit_transaction(self.timeout)
        except Exception as exc:
            log.warning("Kafka transaction of %d end(s) failed (%s); the checker will check them back", len(closing), exc)
            try:
                kafka.abort_transaction(self.timeout)
            except Exception:
                log.exception("aborting the Kafka transaction failed")
            for r in closing:
                r.future.set_result(False)
            return
        self.markers.mark(committed=list(reals), rolled_back=[(r.half.producer_group, r.half.transaction_id)
                                                            for r in rollbacks])
        for r in closing:
            r.future.set_result(True)
