"""The push consumer: RocketMQ's ``DefaultMQPushConsumer`` on Kafka partitions.

It is the ownership engine (:mod:`~rocketkafka.ordering.engine.engine`: membership, allocation, the Redis lock table,
fetching, flow control, commits) running the consume step (:mod:`~rocketkafka.ordering.consumers.batch_step`) with the
listener handler (:mod:`~rocketkafka.ordering.consumers.listening`) on a worker pool (:mod:`~rocketkafka.ordering.work.scheduler`).
The mode is how records are sharded:

- concurrent (``orderly=False``): batches of a partition run in parallel; a failed
  message goes to the group's retry topic (after RocketMQ's back-off through the delay
  levels) and at last to its dead-letter topic;
- orderly (``orderly=True``): one handler per partition at a time, in offset order; a
  failed message is retried in place, never skipped;
- key-ordered (``orderly=True, order_key="key"`` or a JSON path): one handler per order
  key at a time, keys of a partition in parallel (DDMQ).

In CLUSTERING mode a partition is handled only while this member holds its lock; a partition leaving is
drained, committed, then unlocked, so a graceful change re-delivers nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
import traceback
from typing import Any

from pydantic import ValidationError

from rocketkafka.config import Settings
from rocketkafka.errors import ConfigError, StateError
from rocketkafka.message import MessageModel
from rocketkafka.message_selector import MessageSelector
from rocketkafka.names import check_group_name, check_topic_name
from rocketkafka.ordering.group.allocation import AllocationStrategy
from rocketkafka.exactly_once import require_exactly_once
from rocketkafka.ordering.consumers.async_listening import AsyncShutdown, ListenerLoop, is_async_listener
from rocketkafka.ordering.consumers.batch_step import BatchStep, batch_step
from rocketkafka.ordering.consumers.exactly_once_consumer import TransactionalSender, listener_in_transactions
from rocketkafka.ordering.engine.engine import OwnershipEngine
from rocketkafka.ordering.engine.lifecycle import EngineStatus, State
from rocketkafka.topic_partition import TP
from rocketkafka.validation import validation_summary
from rocketkafka.ordering.work.failures import Drop, FailurePolicy, RetryInPlace, SendBack, WriteUntilDurable
from rocketkafka.ordering.consumers.listening import BatchListener, Listener, ListenerHandler
from rocketkafka.ordering.engine.metrics import ConsumerMetrics
from rocketkafka.ordering.engine.options import ConsumerOptions
from rocketkafka.ordering.work.order_keys import PARTITION, order_key_of
from rocketkafka.ordering.work.lanes import BatchHandler
from rocketkafka.ordering.work.partition import ByKey, Chunker, Serial, Unordered
from rocketkafka.ordering.consumers.transactions import PartitionTransactions, transactional_id_prefix
from rocketkafka.ordering.group.presence import DELAY_FORWARDER, Presence
from rocketkafka.ordering.consumers.subscriptions import Subscription, Subscriptions, selector_of
from rocketkafka.ordering.consumers.tracing import ListenerTrace, otel_listeners
from rocketkafka.retry import Reconsumer
from rocketkafka.schedule.routing import retry_backoff
from rocketkafka.sender import Sender
from rocketkafka.service_context import ServiceContext
from rocketkafka.trace import Tracer
from rocketkafka.upstream_setters import ConnectionSetters

log = logging.getLogger(__name__)


class PushConsumer(ConnectionSetters, EngineStatus, ServiceContext, AsyncShutdown):
    """Consume topics with RocketMQ semantics; the listener is called once per message (or per batch).

    Parameters:
        group_id: consumer group.
        config: confluent-kafka settings (``bootstrap.servers`` and any consumer setting).
        redis_urls: the lock table's Redis nodes.
        settings: ready :class:`Settings` instead of ``config``/``redis_urls``.
        orderly: consume in order under the partition locks (``MessageListenerOrderly``): each
            partition serially, or -- with ``order_key="key"`` or a JSON path such as
            ``order_key="$.order.id"`` (a :class:`ConsumerOptions` field) -- each order key
            serially and the keys of a partition in parallel (DDMQ's key-level ordering).
        message_model: CLUSTERING (each message to one member) or BROADCASTING (to all).
        options: :class:`ConsumerOptions`; keyword ``overrides`` replace single fields.
        allocation_strategy: a strategy object (e.g. ``ByConfig``, ``MachineRoomNearby``) instead of
            the named one in ``options.allocation``.
        trace: write trace events (``DELIVERED``, ``CONSUMED``, ``RETRIED``, ``DEAD_LETTERED``) to the
            trace topic (:mod:`rocketkafka.trace`); off, the listener loop does no tracing work at all.
        exactly_once: a partition's batches are written in Kafka transactions: what the listener sends through
            :attr:`producer`, its retry copies and dead letters, and the consumed offset commit together
            (clustering only; each partition then runs one batch at a time:
            :mod:`~rocketkafka.ordering.consumers.exactly_once_consumer`). ``start()`` refuses it on a broker whose
            read_committed readers see aborted records (Tansu).
        loop: the loop ``async def`` listeners run on (the caller's); ``None``: one of the consumer's own, on a daemon
            thread from ``start()`` to ``shutdown()`` (:mod:`~rocketkafka.ordering.consumers.async_listening`).

    The listener returns ``None`` (or ``CONSUME_SUCCESS``) for success, and returns
    ``RECONSUME_LATER`` or raises to have the message consumed again later; see
    :mod:`rocketkafka.ordering.consumers.listening` for every answer in every mode (an ``async def`` listener's
    coroutine answers the same). ``async with PushConsumer(...)`` starts and shuts down off the loop.

    >>> c = PushConsumer("orders-app", {"bootstrap.servers": "..."}, redis_urls=[...])   # doctest: +SKIP
    >>> c.subscribe("orders", handle, expression="created || paid"); c.start()
    """

    def __init__(self, group_id: str, config: dict[str, Any] | None = None, *,
                 redis_urls: list[str] | None = None, settings: Settings | None = None, orderly: bool = False,
                 message_model: MessageModel = MessageModel.CLUSTERING,
                 options: ConsumerOptions | None = None,
                 allocation_strategy: AllocationStrategy | None = None, trace: bool = False,
                 exactly_once: bool = False, loop: asyncio.AbstractEventLoop | None = None,
                 **overrides: Any) -> None:
        self.group_id = check_group_name(group_id, "consumer group")
        self._config, self._redis_urls = dict(config or {}), redis_urls
        if settings is None:
            try:
                settings = Settings.load(config, redis_urls)  # a bad setting raises here, not at start
            except ConfigError as exc:  # no broker yet: set_name_server_address() may name it before start
                if not str(exc).startswith("no broker"):
                    raise
        self._settings = settings
        self._consumer_config = {k: v for k, v in (config or {}).items() if k != "bootstrap.servers"}
        fields = (options or ConsumerOptions()).model_dump()
        if message_model is not MessageModel.CLUSTERING or options is None:
            fields["message_model"] = message_model
        try:
            self.options = ConsumerOptions(**{**fields, **overrides})
        except ValidationError as exc:
            raise ConfigError(validation_summary(exc, "bad consumer options")) from None
        self.orderly = orderly
        self.keyed = self.options.order_key != PARTITION
        if self.keyed and not orderly:
            raise ConfigError(f"order_key={self.options.order_key!r} orders keys; it needs orderly=True")
        if exactly_once and self.broadcasting:
            raise ConfigError("exactly_once commits the group's offsets in transactions: it needs CLUSTERING")
        self.exactly_once = exactly_once
        self._transactions: PartitionTransactions | None = None
        #: Sends from inside the listener of an exactly-once consumer: they commit with the handled message.
        self.producer = TransactionalSender(lambda: self._sender, exactly_once)
        self._strategy = allocation_strategy
        # its retry topic is set at start (group and prefix final then)
        self._subscriptions = Subscriptions(None)
        #: Prometheus series of this consumer (``None`` unless ``metrics`` or ``metrics_port`` is set).
        self.metrics: ConsumerMetrics | None = ConsumerMetrics(group_id) if self.options.metrics_enabled \
            else None
        self._name = f"consumer {self.options.instance_name} of group {group_id}"
        self._engine: OwnershipEngine | None = None  # made by start(); its lifecycle is the consumer's
        self._sender: Sender | None = None
        self._reconsumer: Reconsumer | None = None
        self._trace = trace
        self._tracer: Tracer | None = None
        self._start_failed = False  # start() raised: the consumer is closed for good
        self._listeners_loop = ListenerLoop(loop, f"rk-listeners-{group_id}")

    # -- configuration ---------------------------------------------------------------------
    def _client_config(self) -> dict[str, Any]:
        return self._consumer_config

    def _started(self) -> bool:
        return self._engine is not None

    # rocketmq-client-python's setters (before start; name server and credentials: ConnectionSetters)
    def set_group(self, group_id: str) -> None:
        """The consumer group."""
        self._before_start("set_group")
        self.group_id = check_group_name(group_id, "consumer group")
        self._name = f"consumer {self.options.instance_name} of group {group_id}"
        if self.metrics is not None:
            self.metrics = ConsumerMetrics(group_id)

    def set_instance_name(self, name: str) -> None:
        """This member's name in the group (``ConsumerOptions.instance_name``)."""
        self._set_option("set_instance_name", instance_name=name)
        self._name = f"consumer {self.options.instance_name} of group {self.group_id}"

    def set_thread_count(self, thread_count: int) -> None:
        """Worker threads running the listener (``consume_thread_max``)."""
        self._set_option("set_thread_count", consume_thread_max=thread_count)

    def set_message_batch_max_size(self, max_size: int) -> None:
        """Records one worker task takes in order (``consume_batch_size``); the listener still gets one
        message."""
        self._set_option("set_message_batch_max_size", consume_batch_size=max_size)

    def set_message_model(self, model: MessageModel) -> None:
        """CLUSTERING or BROADCASTING."""
        self._set_option("set_message_model", message_model=model)

    def _set_option(self, what: str, **field: Any) -> None:
        self._before_start(what)
        try:
            self.options = ConsumerOptions(**{**self.options.model_dump(), **field})
        except ValueError as exc:
            raise ConfigError(f"{what}: {exc}") from exc

    @property
    def broadcasting(self) -> bool:
        """True in BROADCASTING mode (every member gets every message)."""
        return self.options.message_model is MessageModel.BROADCASTING

    @property
    def instance_name(self) -> str:
        """This member's id in its group (``host@pid@random`` unless set)."""
        return self.options.instance_name

    @property
    def _reads_retry_topic(self) -> bool:
        # orderly consumption retries in place (never skips ahead): it has no retry topic to read
        return self.options.consume_retry_topic and not (self.broadcasting or self.orderly)

    def subscribe(self, topic: str, callback: Listener, expression: str | MessageSelector = "*", *,
                  selector: MessageSelector | None = None) -> None:
        """Consume the ``topic`` messages a selector selects with ``callback(msg)``.

        ``expression`` is a tag expression (``"*"``, ``"TagA || TagB"``) or a
        :class:`~rocketkafka.message_selector.MessageSelector`; ``selector=`` takes the latter by
        name (RocketMQ's ``subscribe(topic, MessageSelector.bySql(...))``). SQL92 is evaluated
        here, on each record's user properties and tag; a message left out is not handed to the
        listener and its offset commits all the same.

        >>> c.subscribe("orders", handle, selector=MessageSelector.by_sql("amount > 100"))  # doctest: +SKIP

        Raises:
            TagExpressionError: the tag expression does not parse (a :class:`SelectorSyntaxError`,
                with its position, comes from ``MessageSelector.by_sql`` itself).
            ConfigError: both ``expression`` and ``selector`` given, or ``selector`` is not a MessageSelector.
            InvalidTopicNameError: ``topic`` breaks a Kafka topic name rule (the error names it).
            TypeError: ``callback`` is not callable.
            ConfigError: an ``async def`` listener of a consumer with ``trace`` or ``exactly_once``.
            StateError: the consumer was started already.
            TopicNotFoundError: at :meth:`start`, when the topic does not exist.
        """
        self._subscribe(topic, callback, selector_of(expression, selector), 0)

    def subscribe_batch(self, topic: str, callback: BatchListener, expression: str | MessageSelector = "*",
                        max_batch_size: int = 32, *, selector: MessageSelector | None = None) -> None:
        """Consume ``topic`` with a batch listener: ``callback(messages)`` gets up to ``max_batch_size``
        messages of one partition, in offset order (RocketMQ's ``consumeMessageBatchMaxSize``).

        It returns ``None`` when all were handled, ``RECONSUME_LATER`` (or raises) when all
        failed, or :class:`~rocketkafka.ordering.consumers.message_batch.BatchFailure` ``(i)`` when ``messages[i]``
        failed and those before it were handled. Orderly modes keep their order within and
        across batches. ``expression`` / ``selector`` select messages as in :meth:`subscribe`.
        """
        if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int) \
                or not 1 <= max_batch_size <= 10_000:
            raise ConfigError(f"max_batch_size must be an int in 1..10000, got {max_batch_size!r}")
        self._subscribe(topic, callback, selector_of(expression, selector), max_batch_size)

    def _subscribe(self, topic: str, callback: Any, selector: MessageSelector, batch_size: int) -> None:
        if self._engine is not None:
            raise StateError(f"{self._name} is {self.state.value}: subscribe only before start()")
        if not isinstance(topic, str) or not topic:
            raise ConfigError(f"topic must be a non-empty string, got {topic!r}")
        check_topic_name(topic)  # a name Kafka refuses can never exist: say which rule, not "does not exist"
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {type(callback).__name__}")
        asynchronous = is_async_listener(callback)
        if asynchronous and (self._trace or self.exactly_once):  # the trace wrapper sees a coroutine, not an answer;
            # and a coroutine's sends would miss the worker thread's transaction
            raise ConfigError(f"{'trace' if self._trace else 'exactly_once'}=True does not take async def listeners")
        self._subscriptions.add(Subscription(topic, selector, callback, batch_size, asynchronous))

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Provision internal topics, join the group and start consuming.

        Redis is asked first. On failure nothing is left behind -- clients closed and dropped
        (no librdkafka thread stays), no member entry, no topic created -- and the consumer is
        CLOSED; start() works once.

        Raises:
            StateError: started before, or nothing subscribed.
            RedisAuthError: no Redis node took the heartbeat and some refused the credentials.
            RedisUnavailableError: no Redis node answered (down, unreachable, wrong address).
            TopicNotFoundError: a subscribed topic does not exist.
            ConfigError: no Redis nodes (clustering) or a bad setting.
        """
        if self._engine is not None:
            self._engine.lifecycle.starting()  # raises: start() works once
        if self._start_failed:
            raise StateError(f"{self._name} is closed: its start() failed, and start() works once")
        if not self._subscriptions.by_topic:
            raise StateError("subscribe to at least one topic before start()")
        o = self.options
        self._retry_topic = self.settings.topics.retry(self.group_id)
        self._subscriptions.retry_topic = self._retry_topic if self._reads_retry_topic else None
        engine: OwnershipEngine | None = None
        try:
            if self.exactly_once:
                require_exactly_once(self.settings, self._name, transactional_id_prefix=transactional_id_prefix(
                    self.group_id), group=self.group_id)  # first: a refusal leaves nothing behind
            if self._trace:
                self._traced()
            self._listeners_loop.start_for(self._subscriptions, otel=o.otel_on(self.settings.otel))
            otel = otel_listeners(self._subscriptions, self.group_id, o, self.settings)  # on: process spans
            # broadcasting writes nothing: its producer asks for no producer id, which would need a WRITE grant
            self._sender = Sender(self.settings, {"enable.idempotence": False} if self.broadcasting else None)
            self._reconsumer = Reconsumer(self._sender, self.group_id, o.max_reconsume_times,
                                          retry_router=retry_backoff(self._sender)
                                          if o.retry_backoff and not self.orderly else None,
                                          tracer=self._tracer, otel=otel)
            engine = self._engine = OwnershipEngine(
                self.group_id, self.settings, o, self._step(), kafka_config=self._consumer_config,
                offsets_group=f"{self.group_id}.bcast.{o.instance_name}" if self.broadcasting else None,
                broadcasting=self.broadcasting, strategy=self._strategy, metrics=self.metrics,
                name=self._name)
            engine.start()
        except BaseException:
            self._start_failed = True
            if self._sender is not None:
                self._sender.close()
            if self._transactions is not None:
                self._transactions.close()
                self._transactions = None
            if self._tracer is not None:
                self._tracer.close()
            self._listeners_loop.close()
            # dropped, not only closed: a librdkafka client's threads live as long as its object, and the
            # engine holds the step, which holds the sender
            self._engine = self._sender = self._reconsumer = engine = self._tracer = None
            # the finished frames of the traceback still hold them (engine, step, sender) as locals, for as
            # long as the error lives (a log record, a test's ExceptionInfo): let the clients and their
            # threads go now
            traceback.clear_frames(sys.exc_info()[2])
            raise
        if self._needs_forwarder:
            self._check_forwarders()
        if self.metrics is not None:
            self.metrics.bind(self._reconsumer.counts, lambda: engine.locks_lost, lambda: engine.failures)
            if self._needs_forwarder:
                self.metrics.forwarders = self.forwarders_alive
            if o.metrics_port is not None:
                self.metrics.serve(o.metrics_port)
        log.info("consumer %s of group %s started (%s%s)", o.instance_name, self.group_id,
                 o.message_model.value, ", orderly" if self.orderly else "")

    def _traced(self) -> None:
        """Start the tracer and wrap every listener with :class:`~rocketkafka.ordering.consumers.tracing.ListenerTrace`."""
        self._tracer = Tracer(self.settings, self._name)
        wrap = ListenerTrace(self._tracer, self.group_id, self.options.instance_name)
        for sub in list(self._subscriptions.by_topic.values()):
            listener = wrap.batch_listener(sub.listener) if sub.batch_size else wrap.listener(sub.listener)
            self._subscriptions.add(dataclasses.replace(sub, listener=listener))
    @property
    def _needs_forwarder(self) -> bool:
        # failed messages wait in the delay levels (RocketMQ's back-off) until a forwarder moves them
        o = self.options
        return o.retry_backoff and not self.orderly and not self.broadcasting and o.max_reconsume_times > 0

    def forwarders_alive(self) -> int | None:
        """How many delay forwarders of this topic prefix announce themselves in Redis now (``None``: no
        Redis node answered). Retries with back-off wait for one."""
        presence = Presence(self.settings.require_redis(), self.settings.keys, DELAY_FORWARDER,
                            self.settings.topic_prefix)
        try:
            alive = presence.alive()
        finally:
            presence.close()
        return None if alive is None else len(alive)

    def _check_forwarders(self) -> None:
        alive = self.forwarders_alive()
        if alive == 0:
            log.warning("%s: no delay forwarder is alive for topic prefix %r: failed messages will wait in "
                        "the delay topics until one runs (start `rocketkafka delay-forwarder`, or "
                        "retry_backoff=False to retry at once)", self._name, self.settings.topic_prefix)

    def _step(self) -> BatchStep:
        o = self.options
        assert self._reconsumer is not None
        durably = WriteUntilDurable(lambda: self._engine is not None
                                    and self._engine.lifecycle.state is not State.RUNNING)
        policy: FailurePolicy = Drop() if self.broadcasting else \
            RetryInPlace(self._reconsumer, durably) if self.orderly else SendBack(self._reconsumer, durably)
        handler = ListenerHandler(self._subscriptions, policy, orderly=self.orderly,
                                  max_reconsume_times=o.max_reconsume_times,
                                  suspend_ms=o.suspend_current_queue_time_ms,
                                  runner=self._listeners_loop,
                                  in_flight=o.async_max_in_flight)
        chunker: Chunker = ByKey(o.consume_batch_size, order_key_of(o.order_key)) if self.keyed else \
            Serial(o.consume_batch_size) if self.orderly else Unordered(o.consume_batch_size)
        batch_handler: BatchHandler = handler
        if self.exactly_once:  # a partition's transactions are serial: one run of a partition at a time
            self._transactions = PartitionTransactions(self.settings, self.group_id)
            batch_handler = listener_in_transactions(handler, self._transactions, o.suspend_current_queue_time_ms)
            chunker = Serial(o.consume_batch_size)
        internal = {} if self.broadcasting else {self._reconsumer.dlq_topic: 1} if self.orderly else {  # orderly
            self._reconsumer.retry_topic: 1, self._reconsumer.dlq_topic: 1}  # retries in place: no retry topic
        return batch_step(batch_handler, o, self.group_id, list(self._subscriptions.by_topic),
                          self._subscriptions.retry_topic, internal, chunker, o.consume_from_where,
                          o.consume_timestamp_ms, engine=lambda: self._engine, transactions=self._transactions)

    def shutdown(self, timeout: float = 30.0) -> None:
        """Leave gracefully: finish handlers in flight, commit, unlock, leave the group. Idempotent.
        ``async def`` listeners in flight are awaited up to ``timeout``, then cancelled (their records come again).

        Raises:
            StateError: the consumer was never started, or this runs on its async listeners' loop.
            ConsumerFailedError: its poll thread had died (resources are released all the same).
        """
        engine = self._engine
        if engine is None:
            if self._start_failed:
                return  # its failed start closed everything already
            raise StateError(f"{self._name} was never started; there is nothing to shut down")
        self._listeners_loop.refuse_on_loop()  # first: a shutdown there would wait for itself
        engine.close(timeout)  # coroutines in flight are awaited, as sync listeners are
        self._listeners_loop.close()  # what still runs is cancelled: its partition expires with its lease
        if self._transactions is not None:
            self._transactions.close()
        if self._sender is not None:
            self._sender.close()
        if self._tracer is not None:
            self._tracer.close()
        if self.metrics is not None:
            self.metrics.close()
        if engine.lifecycle.error is not None:
            engine.lifecycle.check("shutdown")

    close = shutdown

    # -- state -------------------------------------------------------------------------------
    def assignment(self) -> set[TP]:
        """Partitions this member owns right now.

        Raises:
            ConsumerFailedError: the poll thread died (the cause is its exception).
            StateError: not started, or shut down.
        """
        engine = self._require_engine("assignment()")
        return set(engine.owned())

    def serve_metrics(self, port: int, addr: str = "0.0.0.0") -> int:
        """Serve :attr:`metrics` on ``http://addr:port/metrics``; returns the port (``0`` picks a free one).

        Raises:
            ConfigError: metrics are off (``ConsumerOptions(metrics=True)`` turns them on).
        """
        if self.metrics is None:
            raise ConfigError("metrics are off: pass metrics=True (ConsumerOptions) to collect them")
        return self.metrics.serve(port, addr)

    @property
    def engine(self) -> OwnershipEngine:
        """The ownership engine under this consumer (for admin views and tests)."""
        return self._require_engine("engine")

    def _require_engine(self, action: str) -> OwnershipEngine:
        if self._engine is None:
            raise StateError(f"{self._name} is not started: call start() before {action}")
        self._engine.lifecycle.check(action)
        return self._engine

