"""Transactional messages: half/op topics, the transaction producer and the checker service.

RocketMQ's ``TransactionMQProducer`` (named as rocketmq-client-python's) on Kafka::

    from txn import TransactionMQProducer, TransactionStatus

The checker runs as ``rocketkafka txn-checker`` (or :class:`TransactionChecker`).
"""

from txn.checker import CheckerStats, TransactionChecker
from txn.metrics import CheckerMetrics
from txn.errors import TransactionError, TransactionListenerError, TransactionMessageError
from txn.options import CheckerOptions, TransactionOptions
from txn.producer import TransactionMQProducer, TransactionSendResult
from txn.records import TransactionCheckMessage
from txn.status import TransactionStatus

__all__ = sorted([
    "CheckerMetrics", "CheckerOptions", "CheckerStats", "TransactionCheckMessage", "TransactionChecker", "TransactionError",
    "TransactionListenerError", "TransactionMQProducer", "TransactionMessageError", "TransactionOptions",
    "TransactionSendResult", "TransactionStatus",
])
