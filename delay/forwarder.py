"""The timer forwarder: moves delayed records to their real topic and partition when due.

It is an orderly :class:`~ordering.push_consumer.PushConsumer` over every level and
step topic (DESIGN §2: sidecars reuse the consumer machinery), so instances split
the partitions with the allocation strategy and the Redis lock table, and commit
through the consumer. Per partition, records arrive in offset order, which in a
delay topic is due-time order (:mod:`delay.tiers`). For the head record the
listener decides:

- not due on this hop yet: ``Suspend(remaining, failed=False)`` -- the partition
  sleeps on the consumer's timer heap until then (no polling, no thread per message);
- due: produce it to its real topic and partition without the delay headers;
- hop done but the message is not due: re-route it to the tier the plan picks for
  the remainder, or, when at most ``hold_ms`` remain, wait that exact remainder here.

Produces are asynchronous: the listener returns a future of the delivery report, and
the consumer advances (and so commits) past a record only once its future resolved,
so a crash re-forwards at most the unacknowledged tail (duplicates, never loss). A
record that cannot be forwarded (missing or garbled delay headers, unknown real topic
or partition) goes to the forwarder group's dead-letter topic with the reason.

>>> with DelayForwarder(Settings.load()) as fwd:          # doctest: +SKIP
...     fwd.wait()            # until SIGTERM / close() from another thread
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from confluent_kafka.admin import AdminClient

from delay.config import DelayConfig, current
from delay.metrics import ForwarderMetrics
from delay.routing import DELAY_HEADERS, now_ms, provision
from delay.tiers import Hold, Hop, Tiers, Wait
from facade.admin import TopicAdmin
from facade.config import Settings
from facade.errors import SendError, StateError, TopicNotFoundError
from facade.message import MessageExt, Suspend
from facade.names import Header
from facade.sender import Record, Sender

log = logging.getLogger(__name__)

#: Consumer group of the forwarders (one group per topic prefix is enough: offsets are per topic).
DEFAULT_GROUP = "delay-forwarder"

#: Consumer options the forwarder starts from (``ConsumerOptions`` fields, ms where timed).
FORWARDER_OPTIONS: dict[str, Any] = {
    "consume_batch_size": 500,  # records a worker forwards before waiting for their acks
    "pull_batch_size": 2000,
    "pull_threshold_per_partition": 10_000,
    "consume_thread_max": 16,  # workers mostly wait for acks, off the GIL
    "suspend_current_queue_time_ms": 1000,  # pause after a failed produce
}
#: Seconds between refreshes of the partition counts of delay and real topics.
METADATA_REFRESH_S = 30.0
#: Kafka consumer settings: Tansu answers a fetch only after ``fetch.wait.max.ms``, so keep it short.
FORWARDER_CONSUMER_CONFIG: dict[str, Any] = {"fetch.wait.max.ms": 10}
#: Kafka producer settings: small linger, since the forwarder waits for the acks of each batch.
FORWARDER_PRODUCER_CONFIG: dict[str, Any] = {"linger.ms": 2, "enable.idempotence": True}


class DelayRecordError(Exception):
    """A delay record the forwarder cannot act on; its message is the dead-letter reason."""


class DelayForwarder:
    """Forward due records of the delay topics of ``settings``' prefix.

    Parameters:
        settings: broker, Redis nodes and topic prefix.
        config: delay levels and steps (default: :func:`delay.config.current`).
        group: consumer group of the forwarders; run several instances with one group to share the work.
        consumer_options: ``ConsumerOptions`` fields over :data:`FORWARDER_OPTIONS` (lock and heartbeat timings...).
        consumer_config / producer_config: extra confluent-kafka settings.
        metrics_port: serve Prometheus metrics on this port.
    """

    def __init__(self, settings: Settings, config: DelayConfig | None = None, *, group: str = DEFAULT_GROUP,
                 consumer_options: dict[str, Any] | None = None, consumer_config: dict[str, Any] | None = None,
                 producer_config: dict[str, Any] | None = None, metrics_port: int | None = None) -> None:
        self.settings = settings
        self.config = config or current()
        self.group = group
        self.tiers = Tiers(settings.topics, self.config)
        self.metrics = ForwarderMetrics()
        self._options = {**FORWARDER_OPTIONS, **(consumer_options or {})}
        self._consumer_config = {**FORWARDER_CONSUMER_CONFIG, **(consumer_config or {})}
        self._producer_config = {**FORWARDER_PRODUCER_CONFIG, **(producer_config or {})}
        self._metrics_port = metrics_port
        self._state = "new"
        self._closed = threading.Event()
        self._admin: TopicAdmin | None = None
        self._partitions: dict[str, int] = {}  # partition counts of delay and real topics, refreshed off the hot path
        self._sender: Sender | None = None
        self._consumer: Any = None
        self._poller: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> DelayForwarder:
        """Provision the delay topics, then start consuming them."""
        from ordering.push_consumer import PushConsumer  # the consumer machinery (lazy: no import cycle)

        if self._state != "new":
            raise StateError(f"forwarder is {self._state}; start() works once")
        self._admin = TopicAdmin(self.settings)
        self._admin_client = AdminClient(self.settings.kafka_config())
        provision(self._admin, self.tiers)
        self._refresh_partitions(self.tiers.topics())
        self._sender = Sender(self.settings, self._producer_config)
        self._holds = HoldTimer()
        self._poller = threading.Thread(target=self._serve_deliveries, name="rk-delay-acks", daemon=True)
        self._poller.start()
        self._consumer = PushConsumer(self.group, self._consumer_config, settings=self.settings, orderly=True,
                                      **self._options)
        for topic in self.tiers.topics():
            self._consumer.subscribe(topic, self._handle)
        self._consumer.start()
        if self._metrics_port:
            self.metrics.serve(self._metrics_port)
        self._state = "running"
        log.info("delay forwarder %s started on %d topics (levels %s)", self._consumer.instance_name,
                 len(self.tiers.topics()), self.config.describe())
        return self

    def close(self, timeout: float = 30.0) -> None:
        """Finish the records in flight, wait for their acks, commit, unlock, stop."""
        if self._state != "running":
            self._state = "closed"
            self._closed.set()
            return
        self._state = "closing"
        self._consumer.shutdown(timeout)
        self._holds.close()
        self._sender.close(timeout)
        self._closed.set()
        self._poller.join(timeout)
        self._state = "closed"
        log.info("delay forwarder stopped: %s", self.metrics.summary())

    shutdown = close

    def wait(self, timeout: float | None = None) -> bool:
        """Block until :meth:`close` ran (True) or ``timeout`` seconds passed (False)."""
        return self._closed.wait(timeout)

    def __enter__(self) -> DelayForwarder:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def dead_letter_topic(self) -> str:
        """Where records that cannot be forwarded go."""
        return self.settings.topics.dead_letter(self.group)

    @property
    def consumer(self) -> Any:
        """The underlying orderly push consumer (assignment, instance name)."""
        return self._consumer

    # -- the listener (worker threads) ---------------------------------------------------
    def _handle(self, msg: MessageExt) -> Any:
        tier = self.tiers.by_topic[msg.topic]
        try:
            due, real_topic, real_partition = self._delay_fields(msg)
        except DelayRecordError as exc:
            self._dead_letter(msg, str(exc))
            return None
        now = now_ms()
        action = self.tiers.decide(tier, msg.store_timestamp, due, now)
        if isinstance(action, Wait):
            return Suspend(action.ms, failed=False)
        if isinstance(action, Hop):
            partition = self.tiers.partition_for(real_topic, real_partition, self._partitions[action.tier.topic])
            return self._produce(Record(action.tier.topic, partition, msg.key, msg.body, list(msg.headers), msg.id), None)
        try:
            self._check_destination(real_topic, real_partition)
        except DelayRecordError as exc:
            self._dead_letter(msg, str(exc))
            return None
        headers = [(k, v) for k, v in msg.headers if k not in DELAY_HEADERS]
        record = Record(real_topic, real_partition, msg.key, msg.body, headers, msg.id)
        if isinstance(action, Hold):
            return self._holds.add(due, lambda: self._produce(record, now_ms() - due))
        return self._produce(record, now - due)

    def _delay_fields(self, msg: MessageExt) -> tuple[int, str, int]:
        fields: dict[str, bytes | None] = {}
        for name, value in msg.headers:
            if name in (Header.DELIVER_AT, Header.REAL_TOPIC, Header.REAL_QUEUE_ID):
                fields[name] = value
        try:
            raw_due, raw_topic, raw_qid = (fields[h] for h in (Header.DELIVER_AT, Header.REAL_TOPIC, Header.REAL_QUEUE_ID))
        except KeyError as missing:
            raise DelayRecordError(f"missing header {missing.args[0]}") from None
        try:
            due, topic, partition = int(raw_due), raw_topic.decode(), int(raw_qid)
        except (TypeError, ValueError, UnicodeDecodeError, AttributeError) as exc:
            raise DelayRecordError(f"garbled delay header ({exc})") from None
        if not topic:
            raise DelayRecordError("empty real topic")
        if partition < 0:
            raise DelayRecordError(f"real partition {partition} is negative")
        if due > now_ms() + self.config.max_delay + 86_400_000:
            raise DelayRecordError(f"due time {due} is beyond the maximum delay")
        return due, topic, partition

    def _check_destination(self, topic: str, partition: int) -> None:
        partitions = self._partitions.get(topic)
        if partitions is None:  # first record for this topic: ask the broker once
            try:
                partitions = self._partitions[topic] = self._admin.partitions(topic)
            except TopicNotFoundError:
                raise DelayRecordError(f"unknown real topic {topic!r}") from None
        if partition >= partitions:
            raise DelayRecordError(f"real partition {partition} does not exist in {topic!r} ({partitions} partitions)")

    def _produce(self, record: Record, late_ms: int | None) -> Future:
        """Hand ``record`` to the producer; the future resolves with its delivery report."""
        done: Future = Future()

        def delivered(err: Any, _kmsg: Any) -> None:
            if err is not None:
                done.set_exception(SendError(record.topic, err.str()))
            else:
                done.set_result(None)

        self._sender.produce(record, delivered)
        if late_ms is None:
            self.metrics.on_reroute()
        else:
            self.metrics.on_forward(late_ms)
        return done

    def _dead_letter(self, msg: MessageExt, reason: str) -> None:
        log.error("delay record %s at %s[%d]@%d cannot be forwarded: %s", msg.id, msg.topic, msg.queue_id,
                  msg.queue_offset, reason)
        self.metrics.on_dead_letter(reason)
        self._consumer.dead_letter(msg, reason)

    def _serve_deliveries(self) -> None:
        """Serve the producer's delivery reports (the futures above) until closed; refresh partition counts."""
        refresh_at = time.monotonic() + METADATA_REFRESH_S
        while not self._closed.is_set():
            self._sender.kafka.poll(0.05)
            if time.monotonic() >= refresh_at:
                refresh_at = time.monotonic() + METADATA_REFRESH_S
                try:
                    self._refresh_partitions(list(self._partitions))
                except Exception as exc:  # keep the counts we have
                    log.warning("could not refresh topic metadata: %s", exc)

    def _refresh_partitions(self, topics: list[str]) -> None:
        """One metadata request for every topic of interest (never auto-creates); vanished topics are forgotten."""
        listed = self._admin_client.list_topics(timeout=10).topics
        for topic in topics:
            meta = listed.get(topic)
            if meta is not None and meta.partitions:
                self._partitions[topic] = len(meta.partitions)
            elif topic not in self.tiers.by_topic:
                self._partitions.pop(topic, None)


class HoldTimer:
    """Delivers held records at their exact due time: one thread, one heap (no thread per message).

    :meth:`add` returns at once with a future that resolves when the record's delivery is
    acknowledged; the consumer's commit point stays on the record until then.
    """

    def __init__(self) -> None:
        self._wake = threading.Condition()
        self._heap: list[tuple[int, int, Callable[[], Future], Future]] = []
        self._seq = itertools.count()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="rk-delay-holds", daemon=True)
        self._thread.start()

    def add(self, due_ms: int, produce: Callable[[], Future]) -> Future:
        """Run ``produce`` once the wall clock reaches ``due_ms``; its outcome becomes the returned future's."""
        done: Future = Future()
        with self._wake:
            heapq.heappush(self._heap, (due_ms, next(self._seq), produce, done))
            self._wake.notify()
        return done

    def close(self) -> None:
        """Fire what is held now (only records of partitions being left are), then stop."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(5)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not (self._heap and (self._closed or self._heap[0][0] <= now_ms())):
                    if self._closed and not self._heap:
                        return
                    self._wake.wait((self._heap[0][0] - now_ms()) / 1000 if self._heap else None)
                due, _, produce, done = heapq.heappop(self._heap)
            if due > now_ms():  # closing early: never deliver before the due time
                time.sleep((due - now_ms()) / 1000)
            try:
                produce().add_done_callback(lambda f, done=done: _copy_outcome(f, done))
            except Exception as exc:
                done.set_exception(exc)


def _copy_outcome(source: Future, target: Future) -> None:
    error = source.exception()
    if error is not None:
        target.set_exception(error)
    else:
        target.set_result(source.result())
