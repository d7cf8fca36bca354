"""A transaction whose commit failed with an abortable error is aborted at once, not left to the next owner's
fence: offsets sent into it stay pending until it ends, and readers of the group's stable offsets wait on them."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from rocketkafka.config import Settings
from rocketkafka.ordering.consumers.transactions import PartitionTransactions


class TxnProducer:
    def __init__(self, commit_error: KafkaError) -> None:
        self.commit_error = commit_error
        self.calls: list[str] = []

    def send_offsets_to_transaction(self, offsets, metadata, timeout) -> None:
        self.calls.append("offsets")

    def commit_transaction(self, timeout) -> None:
        self.calls.append("commit")
        raise KafkaException(self.commit_error)

    def abort_transaction(self, timeout) -> None:
        self.calls.append("abort")


@pytest.fixture
def transactions():
    made = PartitionTransactions(Settings(bootstrap_servers="127.0.0.1:1"), "g")
    yield made
    made.close()


@pytest.mark.parametrize("error, calls", [
    (KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, txn_requires_abort=True), ["offsets", "commit", "abort"]),
    (KafkaError(KafkaError._FENCED, fatal=True), ["offsets", "commit"]),  # fatal: nothing more this producer can do
], ids=["abortable", "fatal"])
def test_a_failed_commit_aborts_what_it_may_and_drops_the_producer(transactions, error, calls):
    producer = TxnProducer(error)
    transactions._producers[("t", 0)] = producer
    with pytest.raises(KafkaException):
        transactions.commit(("t", 0), producer, 7)
    assert producer.calls == calls
    assert ("t", 0) not in transactions._producers and transactions.dropped == 1
