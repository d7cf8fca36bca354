"""The RocketMQ-style producer for asyncio: ``await producer.send(msg)`` gives the :class:`SendResult`.

A thin door over :class:`~rocketkafka.producer.Producer` (same arguments, same checks, same
records): a send hands the record to librdkafka on the event loop's thread and returns a future
that the acknowledgement resolves, so one task may keep thousands of sends in flight
(``asyncio.gather``) where :meth:`Producer.send_sync` waits for each. Acknowledgements come
through :class:`~rocketkafka.loop_acks.LoopAcks`: one thread per producer, one wake-up of the loop
per poll of librdkafka, not per message.

Sends need the topic's partition count (to check the topic exists, to route delayed, selected and
sharded sends); a send whose topic's count is not cached for a second more (the first, and one every
30 s, or every second while no broker answers) asks the broker on a worker thread
(``asyncio.to_thread``), so the event loop never waits for a broker. Sends in flight are bounded by
librdkafka's queue (``queue.buffering.max.messages``, and its size in bytes): past it a send awaits
room (its task waits, not the loop), in order behind the sends to its topic before it. A shutdown fails
the futures of sends not acknowledged by its timeout (:class:`~rocketkafka.errors.SendError`), so no
awaiter is left waiting.

>>> async def main():                                             # doctest: +SKIP
...     async with AsyncProducer("pg", {"bootstrap.servers": "127.0.0.1:9092"}) as p:
...         result = await p.send(Message("orders", body=b"hi", tags="created"))
...         results = await asyncio.gather(*(p.send(Message("orders", body=b"%d" % i)) for i in range(1000)))
"""

from __future__ import annotations

import asyncio
import threading
from functools import partial
from typing import Any

from rocketkafka.errors import StateError
from rocketkafka.loop_acks import ACK_POLL_S, DEFAULT_QUEUE, LoopAcks, Report
from rocketkafka.message import Message, SendResult, SendStatus, require_message
from rocketkafka.producer import Producer
from rocketkafka.queue_selectors import Selector
from rocketkafka.record import Record
from rocketkafka.sender import Sender

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
        self._acks: LoopAcks | None = None  # while started
        self._closing = False
        self._start_lock = asyncio.Lock()  # two start() calls at once start one acknowledgement thread
        self._queued: dict[str, int] = {}  # topic -> sends waiting off the loop (later sends queue behind them)
        self._queues: dict[str, asyncio.Lock] = {}  # topic -> the order of those sends

    async def start(self) -> None:
        """Connect (on a worker thread: the broker's first answer may take a while). Started already: nothing."""
        async with self._start_lock:
            if self._acks is None:
                await asyncio.to_thread(self.producer.start)
                self._acks = self._new_acks()

    def _new_acks(self) -> LoopAcks:
        sender = self.producer.sender
        self._closing = False
        return LoopAcks(sender.kafka, partial(_settle, sender.principal),
                              int(sender.config.get("queue.buffering.max.messages", DEFAULT_QUEUE)),
                              f"async producer {self.producer.group_id}")

    async def shutdown(self, timeout: float = 30.0) -> None:
        """Wait (up to ``timeout`` s) for the sends in flight, then close; the futures of sends still not
        acknowledged fail with :class:`~rocketkafka.errors.SendError` (Kafka may still have written them)."""
        await asyncio.to_thread(self._close, timeout)

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def send(self, msg: Message, selector: Selector | None = None, arg: Any = None, *,
             sharding_key: str | None = None) -> asyncio.Future[SendResult]:
        """Send ``msg``; the returned future gives its :class:`SendResult` once the broker acknowledged it.

        ``selector(partitions, msg, arg)`` picks the partition, ``sharding_key`` sends it orderly (the
        partition of that key, as :meth:`Producer.send_orderly`); a delayed message (``delay_time_level``,
        ``deliver_at``, ``delay``) goes through the delay levels as with the sync producer. A future, not a
        coroutine: ``asyncio.gather`` of thousands of sends makes no task per send.

        Raises (here, nothing sent):
            MessageError, SelectorError, DelayError: the message cannot be sent as given.
            StateError: the producer is not started.
            TypeError: ``msg`` is not a :class:`Message`.

        The future fails with :class:`~rocketkafka.errors.SendError` (refused, or no acknowledgement within the
        send timeout); a send that first waited off the loop (the topic's look-up, a delayed message's routing)
        reports there what it found instead: :class:`~rocketkafka.errors.TopicNotFoundError`, a message error.
        """
        require_message(msg, "send")
        acks = self._acks
        if acks is None or self._closing:
            raise StateError("async producer not started: use `async with AsyncProducer(...)` or await start()")
        topic = msg.topic
        delayed = msg.delay_time_level or msg.deliver_at is not None or msg.delay is not None
        if not (delayed or self._queued.get(topic) or not self.producer.sender.fresh(topic, 1.0) or acks.full()):
            try:
                return self._send_now(msg, selector, arg, sharding_key)
            except BufferError:  # librdkafka's queue is full by size: this send waits for room as below
                pass
        # off the loop: a topic look-up (its count not cached for a second more), a delayed message's routing (it
        # may create the level topics), or no room in librdkafka's queue; sends to the topic queue up behind it in
        # order, so a sharding key's order holds
        self._queued[topic] = self._queued.get(topic, 0) + 1
        left = [False]  # the queue, once this send is on its way (or failed, or was cancelled, maybe unstarted)
        task = asyncio.ensure_future(self._send_queued(msg, selector, arg, sharding_key, bool(delayed), left))
        task.add_done_callback(lambda _task: self._leave_queue(topic, left))
        return task

    async def _send_queued(self, msg: Message, selector: Selector | None, arg: Any, sharding_key: str | None,
                           delayed: bool, left: list[bool]) -> SendResult:
        topic, sender, acks = msg.topic, self.producer.sender, self._acks
        async with self._queue_of(topic):  # asyncio's locks wake their waiters in order
            if acks is not None:
                await acks.room()
            if not sender.fresh(topic, 1.0):
                await asyncio.to_thread(sender.look_up, topic, self.producer.send_timeout)
            record = await asyncio.to_thread(sender.prepare, msg, selector, arg, sharding_key) if delayed else None
            while True:
                if self._closing:
                    raise StateError("async producer shut down before the send")
                try:
                    future = self._send_now(msg, selector, arg, sharding_key, record)
                    break
                except BufferError:  # librdkafka's queue is full by size: it drains meanwhile
                    await asyncio.sleep(ACK_POLL_S)
            self._leave_queue(topic, left)  # on its way: later sends to the topic need not queue for it
        return await future

    def _leave_queue(self, topic: str, left: list[bool]) -> None:
        if not left[0]:
            left[0] = True
            self._queued[topic] -= 1

    def _queue_of(self, topic: str) -> asyncio.Lock:
        lock = self._queues.get(topic)
        if lock is None:
            lock = self._queues[topic] = asyncio.Lock()
        return lock

    def _send_now(self, msg: Message, selector: Selector | None, arg: Any, sharding_key: str | None,
                  record: Record | None = None) -> asyncio.Future[SendResult]:
        sender = self.producer.sender
        loop = asyncio.get_running_loop()
        if threading.get_ident() not in sender.never_wait:  # a loop's thread: librdkafka's full queue raises here
            sender.never_wait.add(threading.get_ident())
        future: asyncio.Future[SendResult] = loop.create_future()
        if record is None and (selector is not None or sharding_key is not None):
            record = sender.prepare(msg, selector, arg, sharding_key=sharding_key)
        # the id this send gave (the Message object may be sent again before this one's result) and its topic
        sent = [record.msg_id if record is not None else "", msg.topic]
        acks = self._acks
        assert acks is not None  # send() checked it
        delivered = acks.track(loop, future, sent)
        try:
            if record is None:
                sent[0] = sender.produce_message(msg, delivered)
            else:
                sender.produce(record, delivered)
        except BaseException:
            acks.untrack()
            raise
        return future

    def _close(self, timeout: float) -> None:
        self._closing = True
        acks, self._acks = self._acks, None
        if acks is not None:
            acks.stop(self.producer.flush, timeout)  # flushes on this thread; what is not acknowledged by then fails
        self.producer.shutdown()


def _settle(principal: str | None, acks: list[Report]) -> None:
    """Resolve each future on its loop, unless its awaiting task was cancelled (the topic is where the record went,
    a delay level's for a delayed message, as :meth:`Producer.send_sync` says; the send's id was set when it
    returned, before any acknowledgement reaches the loop)."""
    ok, result = _OK, SendResult
    for future, sent, error, report in acks:
        if future.done():
            continue
        if error is not None:
            future.set_exception(Sender.result_error(sent[1], error, principal))
        else:
            future.set_result(result(ok, sent[0], report.offset(), report.topic(), report.partition()))


_OK = SendStatus.OK
