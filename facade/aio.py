"""The RocketMQ-style producer for asyncio: ``await producer.send(msg)`` gives the :class:`SendResult`.

A thin door over :class:`~rocketkafka.producer.Producer` (same arguments, same checks, same
records): a send hands the record to librdkafka on the event loop's thread and returns a future
that the acknowledgement resolves, so one task may keep thousands of sends in flight
(``asyncio.gather``) where :meth:`Producer.send_sync` waits for each. Acknowledgements are served
by one thread per producer, which polls librdkafka only while sends are in flight and hands each
result to the loop that awaits it (``call_soon_threadsafe``).

Sends need the topic's partition count (to check the topic exists, to route delayed, selected and
sharded sends); the first send to a topic asks the broker on a worker thread (``asyncio.to_thread``),
and so does the first after :data:`FRESH_S`, so the event loop never waits for a broker. A full
librdkafka queue still makes a send wait for room, as the sync producer's do.

>>> async def main():                                             # doctest: +SKIP
...     async with AsyncProducer("pg", {"bootstrap.servers": "127.0.0.1:9092"}) as p:
...         result = await p.send(Message("orders", body=b"hi", tags="created"))
...         results = await asyncio.gather(*(p.send(Message("orders", body=b"%d" % i)) for i in range(1000)))
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from rocketkafka.errors import StateError
from rocketkafka.message import Message, SendResult, SendStatus, require_message
from rocketkafka.producer import Producer
from rocketkafka.queue_selectors import Selector
from rocketkafka.sender import Sender

log = logging.getLogger(__name__)

#: How long the acknowledgement thread's poll of librdkafka waits while sends are in flight (s).
ACK_POLL_S = 0.05
#: A topic's partition count is looked up again (on a worker thread) this long after the last look-up (s): before
#: the producer's own cache of it ages out (30 s), so no send on the loop waits for the broker.
FRESH_S = 25.0


class AsyncProducer:
    """Send messages with RocketMQ's semantics from asyncio code; every send is awaited for its result.

    Parameters: those of :class:`~rocketkafka.producer.Producer` (``group_id``, ``config``, ``settings``,
    ``send_timeout``, ``trace``...).

    Use it as ``async with AsyncProducer(...) as p`` or call :meth:`start` and :meth:`shutdown`. A send
    cancelled while in flight still reaches the broker (Kafka cannot take a record back); only its
    result is dropped.
    """

    def __init__(self, group_id: str, config: dict[str, Any] | None = None, **options: Any) -> None:
        self.producer = Producer(group_id, config, **options)
        self._in_flight = 0
        self._count = threading.Lock()
        self._wake = threading.Event()
        self._closing = False
        self._acks: threading.Thread | None = None
        self._fresh: dict[str, float] = {}  # topic -> until when the producer's partition count of it is fresh

    async def start(self) -> None:
        """Connect (on a worker thread: the broker's first answer may take a while)."""
        await asyncio.to_thread(self.producer.start)
        self._closing = False
        self._acks = threading.Thread(target=self._serve_acks, name=f"rk-aio-acks-{self.producer.group_id}",
                                      daemon=True)
        self._acks.start()

    async def shutdown(self, timeout: float = 30.0) -> None:
        """Wait (up to ``timeout`` s) for the sends in flight, then close."""
        await asyncio.to_thread(self._close, timeout)

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def send(self, msg: Message, selector: Selector | None = None, arg: Any = None, *,
                   sharding_key: str | None = None) -> SendResult:
        """Send ``msg`` and return its :class:`SendResult` once the broker acknowledged it.

        ``selector(partitions, msg, arg)`` picks the partition, ``sharding_key`` sends it orderly (the
        partition of that key, as :meth:`Producer.send_orderly`); a delayed message (``delay_time_level``,
        ``deliver_at``, ``delay``) goes through the delay levels as with the sync producer.

        Raises:
            MessageError, TopicNotFoundError, SelectorError, DelayError: nothing was sent.
            SendError: the broker refused it or did not acknowledge it within the send timeout.
            StateError: the producer is not started.
        """
        require_message(msg, "send")
        if self._acks is None or self._closing:
            raise StateError("async producer not started: use `async with AsyncProducer(...)` or await start()")
        sender = self.producer.sender
        if self._fresh.get(msg.topic, 0.0) < time.monotonic():  # the loop never waits for a topic look-up
            await asyncio.to_thread(sender.partitions, msg.topic, self.producer.send_timeout)
            self._fresh[msg.topic] = time.monotonic() + FRESH_S
        loop = asyncio.get_running_loop()
        future: asyncio.Future[SendResult] = loop.create_future()
        record = sender.prepare(msg, selector, arg, sharding_key=sharding_key) if selector is not None or \
            sharding_key is not None else None

        def delivered(err: Any, kmsg: Any) -> None:  # the acknowledgement thread (or the loop's, queue full)
            self._landed()
            try:
                if err is None:  # the result is made on the loop: msg.id is set once produce returned, before it
                    loop.call_soon_threadsafe(_settle, future, msg, kmsg.topic(), kmsg.partition(), kmsg.offset())
                else:
                    loop.call_soon_threadsafe(_fail, future, Sender.result_error(msg.topic, err, sender.principal))
            except RuntimeError:  # the loop was closed before the acknowledgement came: nobody awaits it
                pass

        with self._count:
            self._in_flight += 1
        try:
            if record is None:
                sender.produce_message(msg, delivered)
            else:
                sender.produce(record, delivered)
        except BaseException:
            self._landed()
            raise
        self._wake.set()
        return await future

    # -- the acknowledgement thread -------------------------------------------------------------------------
    def _landed(self) -> None:
        with self._count:
            self._in_flight -= 1

    def _serve_acks(self) -> None:
        """Poll librdkafka while sends are in flight; sleep on the wake event otherwise."""
        kafka = self.producer.sender.kafka
        while not self._closing:
            if not self._in_flight:
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            try:
                kafka.poll(ACK_POLL_S)
            except Exception:  # a fatal producer error: its sends' reports still come (failed), so keep serving
                log.exception("async producer %s: serving acknowledgements failed", self.producer.group_id)
                time.sleep(ACK_POLL_S)

    def _close(self, timeout: float) -> None:
        self._closing = True
        self._wake.set()
        if self._acks is not None:
            self._acks.join()
            self._acks = None
        try:
            self.producer.flush(timeout)  # serves the last acknowledgements on this thread
        except StateError:  # never started
            pass
        self.producer.shutdown()


def _settle(future: asyncio.Future[SendResult], msg: Message, topic: str, partition: int, offset: int) -> None:
    """Resolve ``future`` on its loop, unless its awaiting task was cancelled (the topic is where the record went,
    a delay level's for a delayed message, as :meth:`Producer.send_sync` says)."""
    if not future.done():
        future.set_result(SendResult(_OK, str(msg.id), offset, topic, partition))


def _fail(future: asyncio.Future[SendResult], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


_OK = SendStatus.OK
