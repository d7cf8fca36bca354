"""The txn names are reachable through the root package's lazy exports (the surface itself: tests/architecture)."""

import rocketkafka as facade
from rocketkafka import txn


def test_facade_exports_the_rocketmq_names():
    assert facade.TransactionMQProducer is txn.TransactionMQProducer
    assert facade.TransactionStatus is txn.TransactionStatus
    assert [s.name for s in txn.TransactionStatus] == ["COMMIT", "ROLLBACK", "UNKNOWN"]
