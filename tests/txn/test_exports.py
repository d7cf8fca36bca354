"""The public surface of the txn package, pinned (and reachable through facade's lazy exports)."""

import facade
import txn


def test_public_names_are_pinned_and_sorted():
    assert txn.__all__ == sorted(txn.__all__) == [
        "CheckerMetrics", "CheckerOptions", "CheckerStats", "TransactionCheckMessage", "TransactionChecker", "TransactionError",
        "TransactionListenerError", "TransactionMQProducer", "TransactionMessageError", "TransactionOptions",
        "TransactionSendResult", "TransactionStatus",
    ]
    assert all(hasattr(txn, name) for name in txn.__all__)


def test_facade_exports_the_rocketmq_names():
    assert facade.TransactionMQProducer is txn.TransactionMQProducer
    assert facade.TransactionStatus is txn.TransactionStatus
    assert [s.name for s in txn.TransactionStatus] == ["COMMIT", "ROLLBACK", "UNKNOWN"]
