"""The forwarder's exactly-once mode: each run of a delay partition is one Kafka transaction.

What a run forwards, re-routes and dead-letters commits together with the delay
partition's offset after it (:mod:`~rocketkafka.ordering.transactions`). A SIGKILLed
forwarder therefore re-forwards nothing that a read_committed reader saw: its open
transaction is aborted when the next owner fences the partition, and the next owner
starts at the offset that committed with the last transaction.

Holds (records due within ``hold_ms``, delivered by a timer while the partition goes on)
become waits in this mode, because the timer would write outside the run's transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException

from rocketkafka.delay.forward_handler import ForwardHandler
from rocketkafka.ordering.lanes import Outcome, Run
from rocketkafka.ordering.transactions import PartitionTransactions
from rocketkafka.record import Record

log = logging.getLogger(__name__)

#: Milliseconds a partition waits after a failed transaction before its records are tried again.
RETRY_PAUSE_MS = 500


class TransactionalForwarding:
    """The scheduler's BatchHandler in exactly-once mode: :class:`ForwardHandler`'s work inside a transaction.

    Parameters:
        forward: the forwarding itself.
        transactions: the partitions' transactional producers.
        dead_letter_via: ``producer -> (record, reason) -> None``: dead-letters written with ``producer``
            (inside the run's transaction).
        wrap: what the forwarding writes through, made from the run's producer (tracing); ``None``: the
            producer itself.
    """

    def __init__(self, forward: ForwardHandler, transactions: PartitionTransactions,
                 dead_letter_via: Callable[[Any], Callable[[Any, str], None]],
                 wrap: Callable[[Any], Any] | None = None) -> None:
        self._forward, self._transactions, self._dead_letter_via = forward, transactions, dead_letter_via
        self._wrap = wrap
        self.committed = 0  # transactions committed (metrics, tests)
        self.failed = 0  # transactions that failed and were tried again

    def handle(self, run: Run) -> Outcome:
        tp = run.work.tp
        txns = self._transactions
        try:
            producer, committed = txns.begin(tp)
        except KafkaException as exc:
            return self._failed(run, 0, exc)
        start = run.start
        if committed is not None:  # a new producer fenced and re-read the offset: what is below it is written
            while start < run.stop and run.records[start].offset() < committed:
                start += 1
        skipped = start - run.start
        try:
            writer = producer if self._wrap is None else self._wrap(producer)
            outcome = self._forward.forward(run, writer, start, self._dead_letter_via(producer), holds=False)
            if outcome.handled == 0:
                txns.abort(tp, producer)
                return Outcome(skipped, None, outcome.pause_ms)
            if not run.still_ours():  # stalled past the lock: the next owner decides, this writes nothing
                txns.abort(tp, producer)
                return Outcome.not_ours(skipped)
            txns.commit(tp, producer, run.records[start + outcome.handled - 1].offset() + 1)
        except KafkaException as exc:
            return self._failed(run, skipped, exc)
        self.committed += 1
        return Outcome(skipped + outcome.handled, None, outcome.pause_ms)

    def _failed(self, run: Run, skipped: int, exc: KafkaException) -> Outcome:
        """Nothing of the run became visible; it is tried again (a new producer fences and re-reads the offset)."""
        self.failed += 1
        self._transactions.drop(run.work.tp)
        log.warning("forwarding %s[%d] in a transaction failed (%s); tried again in %d ms", run.work.topic,
                    run.work.tp[1], exc.args[0] if exc.args else exc, RETRY_PAUSE_MS)
        return Outcome(skipped, None, RETRY_PAUSE_MS)


def write_record(producer: Any, record: Record) -> None:
    """Produce ``record`` into ``producer``'s open transaction (its commit makes it durable), waiting for
    room while the producer's queue is full."""
    while True:
        try:
            producer.produce(record.topic, record.value, record.key, partition=record.partition,
                             headers=list(record.headers))
            return
        except BufferError:
            producer.poll(0.01)
