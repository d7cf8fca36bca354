"""The RocketMQ-style producer for asyncio: ``await producer.send(msg)`` gives the :class:`SendResult`.

A thin door over :class:`~rocketkafka.producer.Producer` (same arguments, same checks, same
records): a send hands the record to librdkafka on the event loop's thread and returns a future
that the acknowledgement resolves, so one task may keep thousands of sends in flight
(``asyncio.gather``) where :meth:`Producer.send_sync` waits for each. Acknowledgements are served
by one thread per producer, which polls librdkafka only while sends are in flight and hands the
results of each poll to their loop in one call (``call_soon_threadsafe``: one wake-up of the loop
per poll, not per message).

Sends need the topic's partition count (to check the topic exists, to route delayed, selected and
sharded sends); the first send to a topic asks the broker on a worker thread (``asyncio.to_thread``),
and so does the first after :data:`FRESH_S`, so the event loop never waits for a broker. Sends in
flight are bounded by librdkafka's queue (``queue.buffering.max.messages``): past it a send awaits room
(its task waits, not the loop), in order behind the sends to its topic before it. A shutdown fails
the futures of sends not acknowledged by its timeout (:class:`~rocketkafka.errors.SendError`), so no
awaiter is left waiting.

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

from confluent_kafka import KafkaError

from rocketkafka.errors import StateError
from rocketkafka.message import Message, SendResult, SendStatus, require_message
from rocketkafka.producer import Producer
from rocketkafka.queue_selectors import Selector
from rocketkafka.record import Record
from rocketkafka.sender import Sender

log = logging.getLogger(__name__)

#: How long the acknowledgement thread's poll of librdkafka waits while sends are in flight (s).
ACK_POLL_S = 0.05
#: A topic's partition count is looked up again (on a worker thread) this long after the last look-up (s): before
#: the producer's own cache of it ages out (30 s), so no send on the loop waits for the broker.
FRESH_S = 25.0

#: librdkafka's default ``queue.buffering.max.messages``; 90% of it (or of the config's) is the most sends in flight.
DEFAULT_WINDOW = 100_000

#: One acknowledgement: the future, [message id, topic] of the send, and librdkafka's report (the message written,
#: or the error).
_Ack = tuple["asyncio.Future[SendResult]", list[str], Any]


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
        self._count = threading.Lock()  # guards _in_flight and _acks
        self._acks: dict[asyncio.AbstractEventLoop, list[_Ack]] = {}  # results not yet handed to their loop
        self._wake = threading.Event()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._fresh: dict[str, float] = {}  # topic -> until when the producer's partition count of it is fresh
        self._queued: dict[str, int] = {}  # topic -> sends waiting off the loop (later sends queue behind them)
        self._queues: dict[str, asyncio.Lock] = {}  # topic -> the order of those sends
        self._window = DEFAULT_WINDOW  # sends in flight at most (librdkafka's queue), read at start
        self._room: dict[asyncio.AbstractEventLoop, asyncio.Event] = {}  # per loop: set when in flight < window

    async def start(self) -> None:
        """Connect (on a worker thread: the broker's first answer may take a while). Started already: nothing."""
        if self._thread is not None:
            return
        await asyncio.to_thread(self.producer.start)
        queue = int(self.producer.sender.config.get("queue.buffering.max.messages", DEFAULT_WINDOW))
        self._window = max(1, queue * 9 // 10)  # a tenth spare: sends to other topics may pass a full window at once
        self._closing = False
        self._thread = threading.Thread(target=self._serve_acks, name=f"rk-aio-acks-{self.producer.group_id}",
                                        daemon=True)
        self._thread.start()

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
        if self._thread is None or self._closing:
            raise StateError("async producer not started: use `async with AsyncProducer(...)` or await start()")
        topic = msg.topic
        delayed = msg.delay_time_level or msg.deliver_at is not None or msg.delay is not None
        if delayed or self._queued.get(topic) or self._fresh.get(topic, 0.0) < time.monotonic() \
                or self._in_flight >= self._window:
            # off the loop: a topic look-up, or a delayed message's routing (it may create the level topics), or
            # librdkafka's queue is full; sends to the topic queue up behind it in order, so a sharding key's
            # order holds
            self._queued[topic] = self._queued.get(topic, 0) + 1
            left = [False]  # the queue, once this send is on its way (or failed, or was cancelled, maybe unstarted)
            task = asyncio.ensure_future(self._send_queued(msg, selector, arg, sharding_key, bool(delayed), left))
            task.add_done_callback(lambda _task: self._leave_queue(topic, left))
            return task
        return self._send_now(msg, selector, arg, sharding_key)

    async def _send_queued(self, msg: Message, selector: Selector | None, arg: Any, sharding_key: str | None,
                           delayed: bool, left: list[bool]) -> SendResult:
        topic, sender = msg.topic, self.producer.sender
        async with self._queue_of(topic):  # asyncio's locks wake their waiters in order
            while self._in_flight >= self._window and not self._closing:
                await self._room_on(asyncio.get_running_loop()).wait()
            if self._fresh.get(topic, 0.0) < time.monotonic():
                await asyncio.to_thread(sender.look_up, topic, self.producer.send_timeout)
                self._fresh[topic] = time.monotonic() + FRESH_S
            record = await asyncio.to_thread(sender.prepare, msg, selector, arg, sharding_key) if delayed else None
            if self._closing:
                raise StateError("async producer shut down before the send")
            future = self._send_now(msg, selector, arg, sharding_key, record)
            self._leave_queue(topic, left)  # on its way: later sends to the topic need not queue for it
        return await future

    def _leave_queue(self, topic: str, left: list[bool]) -> None:
        if not left[0]:
            left[0] = True
            self._queued[topic] -= 1

    def _room_on(self, loop: asyncio.AbstractEventLoop) -> asyncio.Event:
        """The event ``loop``'s queued sends wait on while the window is full (:func:`_settle` sets it)."""
        room = self._room.get(loop)
        if room is None:
            room = self._room[loop] = asyncio.Event()
        room.clear()
        return room

    def _queue_of(self, topic: str) -> asyncio.Lock:
        lock = self._queues.get(topic)
        if lock is None:
            lock = self._queues[topic] = asyncio.Lock()
        return lock

    def _send_now(self, msg: Message, selector: Selector | None, arg: Any, sharding_key: str | None,
                  record: Record | None = None) -> asyncio.Future[SendResult]:
        sender = self.producer.sender
        loop = asyncio.get_running_loop()
        future: asyncio.Future[SendResult] = loop.create_future()
        if record is None and (selector is not None or sharding_key is not None):
            record = sender.prepare(msg, selector, arg, sharding_key=sharding_key)
        # the id this send gave (the Message object may be sent again before this one's result) and its topic
        sent = [record.msg_id if record is not None else "", msg.topic]

        def delivered(err: Any, kmsg: Any) -> None:  # the acknowledgement thread (or the loop's, queue full)
            with self._count:  # as little as can be here: the result is made on the loop
                self._in_flight -= 1
                self._acks.setdefault(loop, []).append((future, sent, kmsg if err is None else err))

        with self._count:
            self._in_flight += 1
            first = self._in_flight == 1
        try:
            if record is None:
                sent[0] = sender.produce_message(msg, delivered)
            else:
                sender.produce(record, delivered)
        except BaseException:
            with self._count:
                self._in_flight -= 1
            raise
        if first:  # the acknowledgement thread may be asleep
            self._wake.set()
        return future

    # -- the acknowledgement thread -------------------------------------------------------------------------
    def _serve_acks(self) -> None:
        """Poll librdkafka while sends are in flight, handing each poll's results to their loops; sleep on the
        wake event otherwise."""
        kafka = self.producer.sender.kafka
        while not self._closing:
            if not self._in_flight:
                self._wake.wait(1.0)
                self._wake.clear()
                self._hand_over()  # results served on a loop's own thread (a full queue) while none was in flight
                continue
            try:
                kafka.poll(ACK_POLL_S)
            except Exception:  # a fatal producer error: its sends' reports still come (failed), so keep serving
                log.exception("async producer %s: serving acknowledgements failed", self.producer.group_id)
                time.sleep(ACK_POLL_S)
            self._hand_over()

    def _hand_over(self) -> None:
        """The results gathered so far, to their loops: one wake-up each."""
        with self._count:
            if not self._acks:
                return
            acks, self._acks = self._acks, {}
        for loop, batch in acks.items():
            try:
                loop.call_soon_threadsafe(_settle, batch, self.producer.sender.principal, self._room.get(loop))
            except RuntimeError:  # the loop was closed before its acknowledgements came: nobody awaits them
                pass

    def _close(self, timeout: float) -> None:
        self._closing = True
        self._wake.set()
        for loop, room in list(self._room.items()):  # queued sends waiting for room: they see the shutdown
            try:
                loop.call_soon_threadsafe(room.set)
            except RuntimeError:  # that loop is closed
                pass
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        try:
            left = self.producer.flush(timeout)  # serves the last acknowledgements on this thread
        except StateError:  # never started
            left = 0
        if left:  # not acknowledged in time: their reports come now, failed, so no future waits forever
            kafka = self.producer.sender.kafka
            kafka.purge()
            kafka.flush(1.0)
            log.warning("async producer %s: %d sends not acknowledged within %.1f s of shutdown; their futures fail",
                        self.producer.group_id, left, timeout)
        self._hand_over()
        self.producer.shutdown()


def _settle(acks: list[_Ack], principal: str | None, room: asyncio.Event | None) -> None:
    """Resolve each future on its loop, unless its awaiting task was cancelled (the topic is where the record went,
    a delay level's for a delayed message, as :meth:`Producer.send_sync` says; the send's id was set when it
    returned, before any acknowledgement reaches the loop); wake the loop's sends waiting for room."""
    if room is not None:
        room.set()
    ok, result = _OK, SendResult
    for future, sent, report in acks:
        if future.done():
            continue
        if isinstance(report, KafkaError):
            future.set_exception(Sender.result_error(sent[1], report, principal))
        else:
            future.set_result(result(ok, sent[0], report.offset(), report.topic(), report.partition()))


_OK = SendStatus.OK
