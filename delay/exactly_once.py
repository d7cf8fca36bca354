"""The forwarder's exactly-once mode: a delay partition's runs are written in Kafka transactions.

What the runs forward, re-route and dead-letter commits together with the delay
partition's offset after them (:mod:`~rocketkafka.ordering.consumers.transactional_runs`: a
transaction spans the runs a lane hands in a row). A SIGKILLed
forwarder therefore re-forwards nothing that a read_committed reader saw: its open
transaction is aborted when the next owner fences the partition, and the next owner
starts at the offset that committed with the last transaction.

Holds (records due within ``hold_ms``, delivered by a timer while the partition goes on)
become waits in this mode, because the timer would write outside the transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rocketkafka.delay.forward_handler import ForwardHandler
from rocketkafka.errors import AuthorizationError
from rocketkafka.ordering.work.lanes import Outcome, Run
from rocketkafka.ordering.consumers.transactional_runs import TransactionalHandler
from rocketkafka.ordering.consumers.transactions import PartitionTransactions


def transactional_forwarding(forward: ForwardHandler, transactions: PartitionTransactions,
                             wrap: Callable[[Any], Any] | None = None,
                             name_refusal: Callable[[list[str]], AuthorizationError | None] | None = None) -> \
        TransactionalHandler:
    """The scheduler's BatchHandler in exactly-once mode: ``forward``'s work in transactions that span a lane's runs.

    ``wrap`` makes what the forwarding writes through from the run's producer (tracing); ``None``: the
    producer itself. Dead letters go into the transaction by themselves (the thread writes into it).
    ``name_refusal``: which of the topics a refused transaction wrote may not be written (a secured cluster).
    """
    def run_in(run: Run, producer: Any, start: int) -> Outcome:
        return forward.forward(run, producer if wrap is None else wrap(producer), start, holds=False)

    return TransactionalHandler(run_in, transactions, name_refusal)
