"""Transactional messages: half/op topics, the transaction producer and the checker service.

RocketMQ's ``TransactionMQProducer`` (named as rocketmq-client-python's) on Kafka::

    from rocketkafka.txn import TransactionMQProducer, TransactionStatus

The checker runs as ``rocketkafka txn-checker`` (or :class:`TransactionChecker`).
"""

from rocketkafka.txn.aio import AsyncTransactionProducer
from rocketkafka.txn.checker import TransactionChecker
from rocketkafka.txn.stats import CheckerStats
from rocketkafka.txn.metrics import CheckerMetrics
from rocketkafka.txn.errors import TransactionError, TransactionListenerError, TransactionMessageError
from rocketkafka.txn.options import CheckerOptions, TransactionOptions
from rocketkafka.txn.producer import TransactionMQProducer, TransactionSendResult
from rocketkafka.txn.records import TransactionCheckMessage
from rocketkafka.txn.status import TransactionStatus

__all__ = [
    "AsyncTransactionProducer", "CheckerMetrics", "CheckerOptions", "CheckerStats", "TransactionCheckMessage", "TransactionChecker", "TransactionError",
    "TransactionListenerError", "TransactionMQProducer", "TransactionMessageError", "TransactionOptions",
    "TransactionSendResult", "TransactionStatus",
]
