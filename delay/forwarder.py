"""The timer forwarder service (RocketMQ's ``ScheduleMessageService``): delayed records to their real topic when due.

It runs on the ownership engine like every consumer (DESIGN §2): instances of one
group split the level and step topics' partitions by the allocation strategy and the
Redis lock table, each partition is worked on by one worker at a time in offset order
(:class:`~rocketkafka.ordering.work.partition.Serial`), and commits go through the engine.
What it does with a partition's records is :mod:`~rocketkafka.delay.forward_handler`.

>>> with DelayForwarder(Settings.load()) as fwd:          # doctest: +SKIP
...     fwd.wait()            # until SIGTERM / close() from another thread
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import SAFE_PRODUCER_CONFIG, Settings
from rocketkafka.delay.exactly_once import transactional_forwarding
from rocketkafka.delay.forward_handler import ForwardHandler, log_dead_letter
from rocketkafka.delay.metrics import ForwarderMetrics
from rocketkafka.delay.tracing import TracedProducer
from rocketkafka.errors import ConfigError, MalformedRecordError, StateError
from rocketkafka.exactly_once import require_exactly_once
from rocketkafka.message import ConsumeFromWhere, MessageExt
from rocketkafka.names import check_group_name
from rocketkafka.ordering.engine.access import write_refusal
from rocketkafka.ordering.consumers.batch_step import batch_step
from rocketkafka.ordering.engine.engine import OwnershipEngine
from rocketkafka.ordering.work.lanes import BatchHandler
from rocketkafka.ordering.engine.lifecycle import EngineStatus, State
from rocketkafka.ordering.work.failures import WriteUntilDurable
from rocketkafka.ordering.engine.metrics import ConsumerMetrics
from rocketkafka.ordering.engine.options import ConsumerOptions
from rocketkafka.ordering.work.partition import Serial
from rocketkafka.ordering.group.presence import DELAY_FORWARDER, Announcer, Presence
from rocketkafka.refusals import principal_of, secured
from rocketkafka.ordering.consumers.transactions import PartitionTransactions, transactional_id_prefix
from rocketkafka.retry import Reconsumer
from rocketkafka.schedule.tiers import Tiers
from rocketkafka.sender import Sender
from rocketkafka.trace import Tracer
from rocketkafka.validation import validation_summary

log = logging.getLogger(__name__)

#: Consumer group of the forwarders (one group per topic prefix is enough: offsets are per topic).
DEFAULT_GROUP = "delay-forwarder"


def membership_group(group: str, topic_prefix: str) -> str:
    """The name forwarders of ``group`` serving ``topic_prefix``'s delay topics find each other under.

    Members split the partitions of *their* delay topics among themselves: forwarders of another
    prefix (another deployment sharing the Redis nodes) must never count, or each deployment would
    leave part of its partitions to members that never take them. Kafka offsets and partition
    locks stay keyed by ``group``: their topic names carry the prefix already.

    >>> membership_group("delay-forwarder", "rk")
    'delay-forwarder@rk'
    """
    return f"{group}@{topic_prefix}"

#: Ownership and work settings the forwarder starts from (``ConsumerOptions`` fields, ms where timed).
FORWARDER_OPTIONS: dict[str, Any] = {
    "consume_batch_size": 500,  # records one handler call takes
    "pull_batch_size": 2000,
    "pull_threshold_per_partition": 10_000,
    "consume_thread_max": 8,
    "suspend_current_queue_time_ms": 1000,  # pause after a failed produce
}
#: Seconds between refreshes of the partition counts of delay and real topics.
METADATA_REFRESH_S = 30.0
#: Kafka producer settings: small linger, since the forwarder waits for the acks of each batch.
FORWARDER_PRODUCER_CONFIG: dict[str, Any] = {"linger.ms": 2, **SAFE_PRODUCER_CONFIG}


class DelayForwarder(EngineStatus):
    """Forward due records of the delay topics of ``settings``' prefix (levels and limits: ``settings.delay``).

    Parameters:
        settings: broker, Redis nodes, topic prefix and delay levels.
        group: consumer group of the forwarders; run several instances with one group to share the work.
        consumer_options: ``ConsumerOptions`` fields over :data:`FORWARDER_OPTIONS` (lock and heartbeat timings...).
        consumer_config / producer_config: extra confluent-kafka settings.
        metrics_port: serve Prometheus metrics on this port (``0``: a free one, then in ``metrics.port``).
        trace: write a ``FORWARDED`` (or ``HOPPED``) trace event per record moved (:mod:`rocketkafka.trace`);
            off, the forwarding loop has no tracing work.
        exactly_once: forward a delay partition's records, and commit its offset, in the same Kafka transactions
            (:mod:`~rocketkafka.delay.exactly_once`): a read_committed reader of the real topics sees every
            message once, even after a SIGKILL. ``start()`` refuses it on a broker whose read_committed
            readers see aborted records (Tansu).

    Raises:
        ConfigError: an option or the metrics port is invalid (checked here, before anything starts).
    """

    def __init__(self, settings: Settings, *, group: str = DEFAULT_GROUP,
                 consumer_options: dict[str, Any] | None = None, consumer_config: dict[str, Any] | None = None,
                 producer_config: dict[str, Any] | None = None, metrics_port: int | None = None,
                 trace: bool = False, exactly_once: bool = False) -> None:
        self.settings = settings
        self.config = settings.delay
        self.group = check_group_name(group, "forwarder group")
        self.tiers = Tiers(settings.topics, self.config)
        try:
            self.options = ConsumerOptions(**{**FORWARDER_OPTIONS, **(consumer_options or {}),
                                              "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET})
        except ValidationError as exc:
            raise ConfigError(validation_summary(exc, "bad forwarder options")) from None
        if metrics_port is not None and not 0 <= metrics_port <= 65_535:
            raise ConfigError(f"metrics port {metrics_port} is not in 0..65535")
        self.metrics = ForwarderMetrics()
        self._consumer_config = dict(consumer_config or {})
        self._producer_config = {**FORWARDER_PRODUCER_CONFIG, **(producer_config or {})}
        self._metrics_port = metrics_port
        self._max_ahead = self.config.max_delay + 86_400_000  # a due time further out is garbage
        self._partitions: dict[str, int] = {}  # partition counts of delay and real topics, refreshed off the hot path
        self._closed = threading.Event()
        self._engine: OwnershipEngine | None = None
        self._sender: Sender | None = None
        self._handler: ForwardHandler | None = None
        self._deliveries: threading.Thread | None = None
        self._trace = trace
        self.exactly_once = exactly_once
        self.transactions: PartitionTransactions | None = None
        self._tracer: Tracer | None = None
        self._announcer: Announcer | None = None
        self._start_failed = False

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> DelayForwarder:
        """Provision the delay topics, join the forwarders' group and start forwarding.

        Redis is asked before any topic is created; a start that fails leaves nothing behind (no
        client, thread, lock or member entry) and the forwarder CLOSED.

        Raises:
            StateError: started before.
            RedisAuthError, RedisUnavailableError: no Redis node took the heartbeat (which says why).
            ConfigError: the metrics port cannot be served (in use, not allowed), or ``exactly_once`` on a
                broker that cannot keep it; nothing was started.
        """
        if self._engine is not None:
            self._engine.lifecycle.starting()  # raises: start() works once
        if self._start_failed:
            raise StateError(f"delay forwarder of group {self.group} is closed: its start() failed")
        if self.exactly_once:
            try:
                require_exactly_once(self.settings, f"delay forwarder of group {self.group}", group=self.group,
                                     transactional_id_prefix=self.transactional_id_prefix)
            except ConfigError:
                self._start_failed = True
                raise
        if self._metrics_port is not None:  # first: a port in use must not leave locks and a member entry behind
            try:
                self.metrics.serve(self._metrics_port)
            except OSError as exc:
                self._start_failed = True
                raise ConfigError(f"metrics port {self._metrics_port} cannot be served: {exc.strerror or exc}") from None
        o = self.options
        try:
            self._sender = sender = Sender(self.settings, self._producer_config)
            admin = TopicAdmin(self.settings)
        except BaseException:  # settings the Kafka client refuses: nothing else was made
            self.metrics.close()
            self._start_failed = True
            self._sender = None
            raise
        producer: Any = sender.kafka
        if self._trace:
            self._tracer = Tracer(self.settings, f"delay forwarder {o.instance_name}")
            producer = TracedProducer(producer, self._tracer, self.tiers)
        otel = o.otel_on(self.settings.otel)
        if otel:  # each record forwarded is a span, child of the message's; the record carries the span on
            from rocketkafka.otel_sender import OtelProducer

            producer = OtelProducer(producer)
        reconsumer = Reconsumer(sender, self.group, tracer=self._tracer, otel=otel)
        durably = WriteUntilDurable(lambda: self._closed.is_set())
        self._handler = handler = ForwardHandler(
            self.tiers, producer, self._partitions, admin.partitions,
            lambda record, reason: self._dead_letter(reconsumer, durably, record, reason), self.metrics,
            self._max_ahead, principal_of(self.settings.kafka))
        batch_handler: BatchHandler = handler
        if self.exactly_once:
            self.transactions = PartitionTransactions(self.settings, self.group, self._producer_config)
            tracer = self._tracer
            principal = principal_of(self.settings.kafka)
            batch_handler = transactional_forwarding(
                handler, self.transactions,
                _wrapping(tracer, self.tiers, otel),
                (lambda topics: write_refusal(admin, topics, principal)) if secured(self.settings.kafka) else None)
        internal = {**{t: self.config.partitions for t in self.tiers.topics()}, reconsumer.dlq_topic: 1}
        step = batch_step(batch_handler, o, f"fwd-{self.group}", self.tiers.topics(), None, internal,
                          Serial(o.consume_batch_size), ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                          engine=lambda: self._engine, transactions=self.transactions)
        consumer_metrics = ConsumerMetrics(self.group)
        self._engine = engine = OwnershipEngine(self.group, self.settings, o, step, kafka_config=self._consumer_config,
                                                metrics=consumer_metrics,
                                                name=f"delay forwarder {o.instance_name} of group {self.group}",
                                                membership_group=membership_group(self.group, self.settings.topic_prefix))
        try:
            engine.open()
            self._refresh_partitions(admin)
            engine.start_thread()
        except BaseException:
            if engine.lifecycle.state is State.RUNNING:  # failed after open: leave the group, unlock
                engine.close()
            handler.close()
            if self.transactions is not None:
                self.transactions.close()
                self.transactions = None
            sender.close()
            self.metrics.close()
            self._start_failed = True
            # dropped, not only closed: a librdkafka client's threads live as long as its object
            self._engine = self._sender = self._handler = None
            engine = sender = handler = admin = step = reconsumer = None  # type: ignore[assignment]
            raise
        consumer_metrics.bind(reconsumer.counts, lambda: engine.locks_lost, lambda: engine.failures)
        self.metrics.registry.register(consumer_metrics)  # its lag and lock series next to ours
        self._deliveries = threading.Thread(target=self._serve_deliveries, args=(admin,), name="rk-delay-acks",
                                            daemon=True)
        self._deliveries.start()
        # consumers whose retries back off through the delay levels ask for us (and warn when nobody answers)
        self._announcer = Announcer(Presence(self.settings.require_redis(), self.settings.keys, DELAY_FORWARDER,
                                             self.settings.topic_prefix), o.instance_name)
        log.info("delay forwarder %s started on %d topics (levels %s)", o.instance_name, len(self.tiers.topics()),
                 self.config.describe())
        return self

    def close(self, timeout: float = 30.0) -> None:
        """Finish the records in flight, wait for their acks, commit, unlock, stop. Idempotent.

        Raises:
            StateError: never started.
        """
        engine = self._engine
        if engine is None:
            if self._start_failed:
                return  # its failed start closed everything already
            raise StateError(f"delay forwarder of group {self.group} was never started")
        if self._announcer is not None:
            self._announcer.stop()
            self._announcer = None
        engine.close(timeout)
        if self._handler is not None:
            self._handler.close()
        if self.transactions is not None:
            self.transactions.close()
        if self._sender is not None:
            self._sender.close(timeout)
        self._closed.set()
        if self._deliveries is not None:
            self._deliveries.join(timeout)
        if self._tracer is not None:
            self._tracer.close()
        self.metrics.close()
        log.info("delay forwarder stopped: %s", self.metrics.summary())

    shutdown = close

    def wait(self, timeout: float | None = None) -> bool:
        """Block until :meth:`close` ran (True) or ``timeout`` seconds passed (False)."""
        return self._closed.wait(timeout)

    def __enter__(self) -> DelayForwarder:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- state -----------------------------------------------------------------------------
    @property
    def instance_name(self) -> str:
        """This forwarder's id in its group (``host@pid@random`` unless set)."""
        return self.options.instance_name

    def assignment(self) -> set[tuple[str, int]]:
        """Delay topic partitions this instance forwards now.

        Raises:
            ConsumerFailedError: the poll thread died.
        """
        engine = self.engine
        engine.lifecycle.check("assignment()")
        return set(engine.owned())

    @property
    def engine(self) -> OwnershipEngine:
        """The ownership engine under the forwarder."""
        if self._engine is None:
            raise StateError(f"delay forwarder of group {self.group} is not started")
        return self._engine

    @property
    def transactional_id_prefix(self) -> str:
        """What the transactional ids of exactly-once forwarding start with: the group's, of this prefix's delay
        topics (``rk-eos.delay-forwarder.rk.delay.``), so deployments sharing the group name never share ids."""
        return transactional_id_prefix(self.group, f"{self.settings.topic_prefix}.delay.")

    @property
    def dead_letter_topic(self) -> str:
        """Where records that cannot be forwarded go."""
        return self.settings.topics.dead_letter(self.group)

    # -- helpers ---------------------------------------------------------------------------
    def _dead_letter(self, reconsumer: Reconsumer, durably: WriteUntilDurable, record: Any, reason: str) -> None:
        """Dead-letter ``record`` with ``reason`` (durably, before its offset may commit; in exactly-once mode
        into the run's transaction, which commits with the offset)."""
        log_dead_letter(record, reason)
        self.metrics.on_dead_letter(reason)
        try:
            msg = MessageExt.of(record).decode()
        except MalformedRecordError:  # undecodable system headers: the record goes as it is
            error = MalformedRecordError(record.topic(), record.partition(), record.offset(), reason)
            durably(lambda: reconsumer.dead_letter_raw(record, error))
            return
        durably(lambda: reconsumer.dead_letter(msg, reason))

    def _serve_deliveries(self, admin: TopicAdmin) -> None:
        """Serve the producer's delivery reports (the batches' acks) until closed; refresh partition counts.

        The thread owns ``admin`` from here on, and closes it when it ends (exactly once, the workers also ask it
        which topic a refused transaction wrote; one still running after that learns nothing, and says so).
        """
        assert self._sender is not None
        refresh_at = time.monotonic() + METADATA_REFRESH_S
        try:
            while not self._closed.is_set():
                self._sender.poll(0.05)
                if time.monotonic() >= refresh_at:
                    refresh_at = time.monotonic() + METADATA_REFRESH_S
                    try:
                        self._refresh_partitions(admin)
                    except Exception as exc:  # keep the counts we have
                        log.warning("could not refresh topic metadata: %s", exc)
        finally:
            admin.close()

    def _refresh_partitions(self, admin: TopicAdmin) -> None:
        """One metadata request for every topic of interest (never auto-creates); vanished real topics are forgotten."""
        listed = admin.list()
        for topic in {*self.tiers.topics(), *self._partitions}:
            count = listed.get(topic)
            if count:
                self._partitions[topic] = count
            elif topic not in self.tiers.by_topic:
                self._partitions.pop(topic, None)


def _wrapping(tracer: Tracer | None, tiers: Tiers, otel: bool) -> Callable[[Any], Any] | None:
    """What exactly-once forwarding writes through, made from each run's transactional producer: the message
    trace's producer and/or OpenTelemetry's (``None``: the producer itself)."""
    if tracer is None and not otel:
        return None

    def wrap(producer: Any) -> Any:
        if tracer is not None:
            producer = TracedProducer(producer, tracer, tiers)
        if otel:
            from rocketkafka.otel_sender import OtelProducer

            producer = OtelProducer(producer)
        return producer

    return wrap
