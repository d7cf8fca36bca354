"""asyncio drop-in: ``from rocketkafka.kafka.aio import AIOProducer, AIOConsumer`` instead of ``confluent_kafka.aio``.

Both classes *are* confluent-kafka's (subclasses of ``confluent_kafka.aio.AIOProducer`` and
``AIOConsumer``), built on this package's :class:`~rocketkafka.kafka.Producer` and
:class:`~rocketkafka.kafka.Consumer` instead of confluent-kafka's: the same signatures and
awaitables, RocketMQ's extras as keywords (``produce(tags=..., keys=..., delay_level=...)``,
``subscribe(tags=...)``), and subscriptions owned through the Redis lock table.

**AIOConsumer** is confluent-kafka's but for the client it drives, and one rule: calls run on its
executor one at a time (a call from another task waits for the one running), since the engine's
ownership work runs inside ``poll()``/``consume()`` as with the sync drop-in and has one writer. A
call from inside a rebalance callback (``assign()`` in ``on_assign``) runs at once, as
confluent-kafka's re-entrant calls do. (Before confluent-kafka 2.16, which cannot tell such a call
from another task's, calls are not serialised: call ``poll()``/``consume()``/``commit()`` from one task.)

**AIOProducer**: ``await produce(...)`` returns a future of the delivered ``Message`` (failing with
``KafkaException``), as confluent-kafka's. Where confluent-kafka buffers records and hands them to
librdkafka in batches on its executor (``batch_size``, ``buffer_timeout``), this one hands each
record to librdkafka on the loop's thread at once (librdkafka batches by ``linger.ms``), so
``headers`` work, which confluent-kafka's batch mode refuses; a record that needs the broker
first (a topic not seen yet, a delayed record's routing) is produced on the executor. Reports
come back through :class:`~rocketkafka.loop_acks.LoopAcks`; ``on_delivery`` (or ``callback``), if
given, runs on the loop before the future resolves.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any, cast

from confluent_kafka import KafkaException
from confluent_kafka.aio import AIOConsumer as _AIOConsumer
from confluent_kafka.aio import AIOProducer as _AIOProducer
from confluent_kafka.aio import _common  # the loop-side wrappers of config callbacks, as confluent-kafka's own

from rocketkafka.kafka import EXTRAS, Consumer, Producer
from rocketkafka.loop_acks import ACK_POLL_S, DEFAULT_QUEUE, LoopAcks, Report

__all__ = ["AIOConsumer", "AIOProducer"]

#: confluent-kafka 2.16+ marks a call made from inside a callback of another (``None`` before: no such mark).
_REENTRY = getattr(_common, "ReentryContext", None)

#: produce()'s keywords that route a record through the delay levels (it may create their topics: not on the loop).
_DELAYS = frozenset({"delay_level", "delay", "deliver_at"})


class AIOProducer(_AIOProducer):
    """``confluent_kafka.aio.AIOProducer`` (a subclass) over :class:`rocketkafka.kafka.Producer`.

    Parameters: confluent-kafka's. ``producer_conf`` may hold rocketkafka's keys as the sync drop-in's
    does; ``batch_size`` and ``buffer_timeout`` are accepted and unused (records go to librdkafka at once).
    Create it inside a running event loop.
    """

    def __init__(self, producer_conf: dict[str, Any], max_workers: int = 4,
                 executor: concurrent.futures.Executor | None = None, batch_size: int = 1000,
                 buffer_timeout: float = 1.0) -> None:
        self._loop = asyncio.get_running_loop()
        self.executor = executor if executor is not None else concurrent.futures.ThreadPoolExecutor(max_workers)
        self._owns_executor = executor is None
        conf = dict(producer_conf)
        _common.wrap_common_callbacks(self._loop, conf)
        self._producer = Producer(conf)
        self._is_closed = False
        self._jobs: set[asyncio.Future[Any]] = set()  # produces running on the executor: close() waits for them
        queue = int(conf.get("queue.buffering.max.messages", DEFAULT_QUEUE))
        self._acks = LoopAcks(self._producer, _settle, queue, "AIOProducer")

    def __len__(self) -> int:
        return 0 if self._is_closed else len(self._producer)

    async def produce(self, topic: str, value: Any = None, key: Any = None, *args: Any,
                      **kwargs: Any) -> asyncio.Future[Any]:
        """Queue one record, as ``confluent_kafka.aio.AIOProducer.produce``; the returned future gives the
        delivered ``Message``, or fails with ``KafkaException``.

        ``partition``, ``timestamp``, ``headers`` and the RocketMQ extras of
        :meth:`rocketkafka.kafka.Producer.produce` (``tags``, ``keys``, ``properties``, ``delay_level``,
        ``delay``, ``deliver_at``) as keywords.

        Raises (here, nothing queued): those of :meth:`rocketkafka.kafka.Producer.produce` (``TopicNotFoundError``,
        ``MessageError``, ``DelayError``, ``TypeError``...); ``RuntimeError`` once closed.
        """
        if self._is_closed:
            raise RuntimeError("Producer closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        on_delivery, callback = kwargs.pop("on_delivery", None), kwargs.pop("callback", None)
        acks, producer = self._acks, cast(Producer, self._producer)
        if acks.full():
            await acks.room()
            if self._is_closed:
                raise RuntimeError("Producer closed")
        kwargs["on_delivery"] = acks.track(loop, future, on_delivery or callback)
        if self._on_loop(producer, topic, kwargs):
            try:
                while True:  # on the loop: librdkafka's produce does not wait, nor ask a broker here
                    try:
                        producer.produce(topic, value, key, *args, **kwargs)
                        break
                    except BufferError:  # its queue is full after all (queue.buffering.max.kbytes): let it drain
                        await asyncio.sleep(ACK_POLL_S)
            except BaseException:  # nothing queued (a cancellation included: it came before the produce)
                acks.untrack()
                raise
            return future
        # the broker first (the topic's existence or partition count, a delayed record's routing): on the executor,
        # shielded, so a cancelled caller cannot leave a produce running that is counted twice
        job = loop.run_in_executor(self.executor, _produce_waiting, producer, topic, value, key, args, kwargs)
        self._jobs.add(job)
        job.add_done_callback(lambda done: acks.untrack() if not done.cancelled() and done.exception() else None)
        job.add_done_callback(self._jobs.discard)
        await asyncio.shield(job)
        return future

    def _on_loop(self, producer: Producer, topic: str, kwargs: dict[str, Any]) -> bool:
        """Whether a produce with ``kwargs`` may run on the loop: it asks no broker (a topic seen before, and for
        extras its partition count cached) and routes no delay; librdkafka's full queue then raises BufferError
        here rather than being waited for on the loop (:attr:`Sender.never_wait <rocketkafka.sender.Sender>`)."""
        if topic not in producer._known_topics:
            return False
        if EXTRAS.isdisjoint(kwargs):  # confluent-kafka's own produce
            return True
        sender = producer._sender
        if sender is None or not _DELAYS.isdisjoint(kwargs) or not sender.fresh(topic, 1.0):
            return False
        sender.never_wait.add(threading.get_ident())
        return True

    async def poll(self, timeout: float = 0, *args: Any, **kwargs: Any) -> int:
        served: int = await self._call(self._producer.poll, timeout, *args, **kwargs)
        self._acks.hand_over()  # what this call served reaches its futures now
        return served

    async def flush(self, *args: Any, **kwargs: Any) -> Any:
        """Wait until every queued record is delivered (or the timeout); their futures are resolved by then."""
        left = await self._call(self._producer.flush, *args, **kwargs)
        self._acks.hand_over()
        await asyncio.sleep(0)  # the futures settle on this loop before flush returns
        return left

    async def purge(self, *args: Any, **kwargs: Any) -> Any:
        """Purge queued records; their futures fail with ``_PURGE_QUEUE`` / ``_PURGE_INFLIGHT``."""
        return await self._call(self._producer.purge, *args, **kwargs)

    async def close(self) -> None:
        """Deliver what is queued (as ``flush()``), stop serving reports, and let the executor go."""
        if self._is_closed:
            return
        self._is_closed = True
        if self._jobs:  # their records reach librdkafka before the last flush
            await asyncio.gather(*list(self._jobs), return_exceptions=True)
        await asyncio.get_running_loop().run_in_executor(None, self._acks.stop, _flush_all(self._producer), -1.0)
        await asyncio.sleep(0)
        if self._owns_executor:
            await asyncio.get_running_loop().run_in_executor(None, self.executor.shutdown, True)

    async def _flush_buffer(self, target_topic: str | None = None) -> None:
        """Nothing is buffered here (confluent-kafka's batch buffer): records go to librdkafka as produced."""

    async def _call(self, blocking_task: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await _common.async_call(self.executor, blocking_task, *args, **kwargs)


class AIOConsumer(_AIOConsumer):
    """``confluent_kafka.aio.AIOConsumer`` (a subclass) over :class:`rocketkafka.kafka.Consumer`.

    Parameters: confluent-kafka's; ``consumer_conf`` may hold rocketkafka's keys (the lock table's Redis
    nodes, the topic prefix...) as the sync drop-in's does. Create it inside a running event loop.
    """

    def __init__(self, consumer_conf: dict[str, Any], max_workers: int = 100,
                 executor: concurrent.futures.Executor | None = None) -> None:
        self._closed = False
        if executor is not None:
            self.executor, self._owns_executor = executor, False
        else:
            if max_workers < 1:
                raise ValueError("max_workers must be at least 1")
            self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers)
            self._owns_executor = True
        loop = asyncio.get_running_loop()
        conf = dict(consumer_conf)
        _common.wrap_common_callbacks(loop, conf)
        _common.wrap_conf_callback(loop, conf, "on_commit")
        self._consumer = Consumer(conf)
        self._one_at_a_time = asyncio.Lock()

    async def _call(self, blocking_task: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if _REENTRY is None or _REENTRY.current_lock() is not None:  # from a callback of the call holding the lock
            return await super()._call(blocking_task, *args, **kwargs)
        async with self._one_at_a_time:
            return await super()._call(blocking_task, *args, **kwargs)


def _produce_waiting(producer: Producer, topic: str, value: Any, key: Any, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> None:
    """``producer.produce`` on the executor, waiting for room in librdkafka's queue rather than failing."""
    while True:
        try:
            producer.produce(topic, value, key, *args, **kwargs)
            return
        except BufferError:
            producer.poll(ACK_POLL_S)


def _flush_all(producer: Any) -> Callable[[float], int]:
    """``flush`` as confluent-kafka's ``close()`` does it: until everything is delivered."""
    return lambda _timeout: producer.flush()


def _settle(reports: list[Report]) -> None:
    """Resolve each future on its loop (after the record's own callback, if it has one)."""
    for future, user_callback, error, msg in reports:
        if user_callback is not None:
            try:
                user_callback(error, msg)  # confluent-kafka's arguments: the message on a failure too
            except Exception as exc:  # noqa: BLE001 - the caller's bug fails its own future, not the others'
                if not future.done():
                    future.set_exception(exc)
                continue
        if future.done():  # cancelled by its awaiter
            continue
        if error is not None:
            future.set_exception(KafkaException(error))
        else:
            future.set_result(msg)
