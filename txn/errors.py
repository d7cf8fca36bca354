"""Exceptions of the transaction package, under rocketkafka's root :class:`~rocketkafka.errors.RocketKafkaError`.

The tree::

    RocketKafkaError
    └── TransactionError                 something about a transactional send
        ├── TransactionMessageError      the message cannot be sent in a transaction (delayed); nothing was sent
        │                                (also a MessageError)
        └── TransactionListenerError     the listener is unusable: not callable, or it returned something that
                                         is not a TransactionStatus (also a TypeError)

End-transaction failures are never raised: the checker repairs them by checking back.
"""

from __future__ import annotations

from typing import Any

from rocketkafka.errors import MessageError, RocketKafkaError


class TransactionError(RocketKafkaError):
    """Root of the transaction package's errors."""


class TransactionMessageError(TransactionError, MessageError):
    """The message cannot be sent in a transaction (for example, it is delayed); nothing was sent."""


class TransactionListenerError(TransactionError, TypeError):
    """The transaction listener is unusable.

    Raised at construction when the listener has no callable ``check_local_transaction``,
    and at the call when ``execute_local_transaction`` returned something that is not a
    :class:`~rocketkafka.txn.status.TransactionStatus` (``None`` is fine: it means UNKNOWN). In the
    second case the half message is stored and left open: no real message, no op record;
    the checker's check-back decides it.

    Attributes:
        transaction_id: the transaction concerned (``None`` at construction).
        returned: what the listener returned.
    """

    def __init__(self, message: str, transaction_id: str | None = None, returned: Any = None) -> None:
        super().__init__(message)
        self.transaction_id = transaction_id
        self.returned = returned
