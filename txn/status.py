"""The outcome of a local transaction (rocketmq-client-python's ``TransactionStatus``)."""

from __future__ import annotations

import enum
from typing import Any

from rocketkafka.txn.errors import TransactionListenerError


class TransactionStatus(enum.IntEnum):
    """What ``execute_local_transaction`` and ``check_local_transaction`` return.

    COMMIT: deliver the message. ROLLBACK: drop it. UNKNOWN: not decided yet; the
    checker asks again later (``check_local_transaction``). Returning ``None`` or
    raising means UNKNOWN.
    """

    COMMIT = 0
    ROLLBACK = 1
    UNKNOWN = 2


def as_status(returned: Any, transaction_id: str, what: str) -> TransactionStatus:
    """``returned`` as a status: ``None`` is UNKNOWN, anything but a :class:`TransactionStatus` is an error.

    Raises:
        TransactionListenerError: ``returned`` is neither ``None`` nor a TransactionStatus.
    """
    if returned is None:
        return TransactionStatus.UNKNOWN
    if isinstance(returned, TransactionStatus):
        return returned
    raise TransactionListenerError(
        f"{what} returned {returned!r} ({type(returned).__name__}) for transaction {transaction_id}; "
        "return TransactionStatus.COMMIT, ROLLBACK or UNKNOWN. The half message stays open and the "
        "checker will check it back", transaction_id, returned)
