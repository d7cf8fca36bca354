"""Exactly-once processing in a push consumer (``PushConsumer(exactly_once=True)``): consume -> produce, atomic.

A partition's runs (up to ``consume_batch_size`` messages each) are written in Kafka transactions
that span the runs a lane hands in a row, at most 100 ms (:mod:`~rocketkafka.ordering.consumers.transactional_runs`).
What the listener sends through
:attr:`PushConsumer.producer <rocketkafka.ordering.consumers.push_consumer.PushConsumer.producer>`, the
retry copies and dead letters of its failures, and the offset after the runs commit together,
or not at all. This is Kafka Streams' and Parallel Consumer's transactional mode, with
RocketMQ's ordering kept.

- Each partition runs one batch at a time, in offset order, whatever the mode. A transaction
  belongs to one partition's producer and commits that partition's offset, so two batches of
  one partition cannot be open at once. Concurrent and key-ordered consumers keep their
  semantics (key order holds a fortiori) and get their parallelism from partitions.
- A listener's futures (orderly pipelining) are waited for inside the transaction. One that
  fails aborts the transaction (with the runs before it in the lane), and they are tried again
  after the suspend time.
- A message handled in an aborted transaction is handed to the listener again. Its sends
  were aborted with it, so a read_committed reader sees the outputs of each message once.
  Side effects outside Kafka are not covered: they happen once per try.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rocketkafka.errors import StateError
from rocketkafka.exactly_once import transaction_producer
from rocketkafka.message import Message
from rocketkafka.ordering.work.lanes import Outcome, Run
from rocketkafka.ordering.consumers.listening import ListenerHandler
from rocketkafka.ordering.consumers.transactional_runs import RunFailed, TransactionalHandler
from rocketkafka.ordering.consumers.transactions import PartitionTransactions
from rocketkafka.queue_selectors import Selector
from rocketkafka.record import produce_waiting
from rocketkafka.sender import Sender


def listener_in_transactions(handler: ListenerHandler, transactions: PartitionTransactions,
                             suspend_ms: int) -> TransactionalHandler:
    """``handler``'s runs, each inside a transaction; a failed listener future aborts the run for ``suspend_ms``."""
    def run_in(run: Run, producer: Any, start: int) -> Outcome:
        outcome = handler.handle_from(run, start)
        if outcome.settled is not None:
            try:
                outcome.settled.result()  # its sends must be in before the commit
            except Exception:  # noqa: BLE001 - the listener's failure: its sends must not commit, the run is tried again
                raise RunFailed(suspend_ms) from None
        return Outcome(outcome.handled, None, outcome.pause_ms)

    return TransactionalHandler(run_in, transactions)


class TransactionalSender:
    """What a listener of an exactly-once consumer sends: written into the transaction of the message it handles.

    ``sender()`` gives the consumer's :class:`~rocketkafka.sender.Sender` (it encodes the message and
    looks up its topic). Messages are encoded as :class:`~rocketkafka.producer.Producer` encodes them.
    Delays and selectors apply too.
    """

    def __init__(self, sender: Callable[[], Sender | None], exactly_once: bool) -> None:
        self._sender, self._exactly_once = sender, exactly_once

    def send(self, msg: Message, selector: Selector | None = None, arg: Any = None,
             sharding_key: str | None = None) -> str:
        """Send ``msg`` in the current transaction; returns its message id (the ack comes with the commit).

        Raises:
            StateError: the consumer is not exactly once, or called outside a call of its listener.
            MessageError, TopicNotFoundError, SelectorError, DelayError: the message cannot be sent as given.
        """
        if not self._exactly_once:
            raise StateError("this consumer is not exactly once: its producer sends nothing. Start it with "
                             "exactly_once=True, or send with a Producer (at least once)")
        producer, sender = transaction_producer(), self._sender()
        if producer is None or sender is None:
            raise StateError("send() of an exactly-once consumer's producer works only inside its listener: "
                             "what it sends commits with the message being handled")
        record = sender.prepare(msg, selector, arg, sharding_key=sharding_key)
        produce_waiting(producer, record)
        return record.msg_id
