"""The transaction producer for asyncio: ``await producer.send_message_in_transaction(msg, local_execute)``.

A door over :class:`~rocketkafka.txn.TransactionMQProducer` (same arguments, same topics and
records, same check-backs). RocketMQ's two phases, with the local transaction on the loop:

1. the half message is stored on a worker thread (``asyncio.to_thread``: it waits for the broker);
2. the local transaction runs on the caller's loop: an ``async def`` one is awaited, a plain one called;
3. the end is queued as with the sync producer, off the loop (the queue may be full; never raising: the
   checker repairs a lost one).

A local transaction that raises leaves the transaction UNKNOWN, as RocketMQ's; one that is
*cancelled* (its task cancelled, the loop closing) ends nothing and lets the cancellation through:
the half stays open and the checker asks for it.

Check-backs arrive on the check consumer's worker threads; an ``async def`` check callback runs on
the loop that started the producer (``asyncio.run_coroutine_threadsafe``), and the worker waits for
its answer up to :data:`CHECK_TIMEOUT_S`. An answer not in by then counts as UNKNOWN (the coroutine
is cancelled) and the checker asks again at its next scan.

>>> async def main():                                                      # doctest: +SKIP
...     async with AsyncTransactionProducer("payments", check, settings=settings) as producer:
...         result = await producer.send_message_in_transaction(Message("orders", b"paid"), charge)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from typing import Any

from rocketkafka.errors import StateError
from rocketkafka.message import Message
from rocketkafka.txn.producer import TransactionMQProducer, TransactionSendResult, _listener
from rocketkafka.txn.records import TransactionCheckMessage

#: How long a check consumer's worker waits for an ``async def`` check callback's answer on the loop (s).
CHECK_TIMEOUT_S = 30.0


class AsyncTransactionProducer:
    """Send messages whose delivery follows a local transaction, from asyncio code.

    Parameters: those of :class:`~rocketkafka.txn.TransactionMQProducer`; ``check_callback`` (or the
    listener's ``check_local_transaction`` and ``execute_local_transaction``) may be ``async def``.

    Use it as ``async with AsyncTransactionProducer(...) as p`` or await :meth:`start` and
    :meth:`shutdown`; the loop that starts it runs the async check-backs.
    """

    def __init__(self, group_id: str, check_callback: Any, config: dict[str, Any] | Any = None,
                 **options: Any) -> None:
        self._check, self._execute = _listener(check_callback)
        self._loop: asyncio.AbstractEventLoop | None = None
        #: the producer under this door: its sync API (``send_sync``, ``options``, ``settings``...) is there
        self.producer = TransactionMQProducer(group_id, self._answer_check, config, **options)

    async def start(self) -> None:
        """Create the internal topics and answer check-backs (on a worker thread: it talks to the broker)."""
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self.producer.start)

    async def shutdown(self) -> None:
        """Stop answering check-backs, finish queued end-transactions, close."""
        await asyncio.to_thread(self.producer.shutdown)

    async def __aenter__(self) -> AsyncTransactionProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def send_message_in_transaction(self, msg: Message, local_execute: Any = None,
                                          user_args: Any = None) -> TransactionSendResult:
        """Store ``msg`` as a half message, await the local transaction, end the transaction.

        ``local_execute(msg, user_args)`` (``async def`` or plain; default: the listener's
        ``execute_local_transaction``) returns a :class:`~rocketkafka.txn.TransactionStatus`.

        Raises: as :meth:`TransactionMQProducer.send_message_in_transaction
        <rocketkafka.txn.TransactionMQProducer.send_message_in_transaction>`; the checks before anything is sent
        raise here, at the call.
        """
        producer = self.producer
        execute = producer.local_execute_of(msg, local_execute if local_execute is not None else self._execute)
        sent, half = await asyncio.to_thread(producer.send_half, msg)
        try:
            returned = execute(msg, user_args)
            if inspect.isawaitable(returned):
                returned = await returned
        except Exception as exc:  # RocketMQ: an exception in the local transaction means UNKNOWN
            returned = producer.local_failure(half, exc)
        # off the loop: queuing the end waits while the end-transaction queue is full
        return await asyncio.to_thread(producer.end, sent, half, returned)

    def _answer_check(self, msg: TransactionCheckMessage) -> Any:
        """The check callback, on the check consumer's worker: a coroutine's answer comes from the loop."""
        answer = self._check(msg)
        if not inspect.isawaitable(answer):
            return answer
        loop = self._loop
        if loop is None or loop.is_closed():
            _discard(answer)
            raise StateError("the loop that started the async transaction producer is closed; the check is asked "
                             "again")
        future = asyncio.run_coroutine_threadsafe(_awaited(answer), loop)
        try:
            return future.result(CHECK_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise


async def _awaited(answer: Any) -> Any:
    return await answer


def _discard(answer: Any) -> None:
    """Close a coroutine that will never run (no "coroutine was never awaited" warning)."""
    close = getattr(answer, "close", None)
    if close is not None:
        close()
