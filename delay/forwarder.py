"""The timer forwarder: moves delayed records to their real topic and partition when due.

It is an orderly :class:`~ordering.push_consumer.PushConsumer` over every level and
step topic (DESIGN §2: sidecars reuse the consumer machinery), so instances split
the partitions with the allocation strategy and the Redis lock table, and commit
through the consumer. Per partition, records arrive in offset order, which in a
delay topic is due-time order (:mod:`delay.tiers`). The forwarder is a *batch
listener* (:class:`ordering.orderly.Progress`): it gets a partition's raw records
many at a time and, front to back, decides (:meth:`Tiers.decide`):

- due: produce it to its real topic and partition without the delay headers;
- hop over, message not due: re-route it to the tier the plan picks for the rest, or,
  when at most ``hold_ms`` remain, hold it in memory (:class:`HoldTimer`) and deliver
  it exactly on time while the queue goes on;
- hop not over: stop there with ``suspend_ms`` = the time left -- the partition sleeps
  on the consumer's timer heap until then (no polling, no thread per message).

Produces are asynchronous: each call returns one :class:`BatchAck` for the records it
took, and the consumer advances (and so commits) past them only once every delivery
report is in, so a crash re-forwards at most the unacknowledged tail (duplicates, never
loss, never early: the due time is checked again). A record that cannot be forwarded
(missing or garbled delay headers, unknown real topic or partition) goes to the
forwarder group's dead-letter topic with the reason.

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
from typing import Any

from confluent_kafka.admin import AdminClient

from delay.config import DelayConfig, current
from delay.metrics import ForwarderMetrics
from delay.routing import DELAY_HEADERS, now_ms, provision
from delay.tiers import Deliver, Hold, Hop, Tiers, Wait
from facade.admin import TopicAdmin
from facade.codec import MalformedRecordError, decode
from facade.config import Settings
from facade.errors import SendError, StateError, TopicNotFoundError
from facade.logs import record_fields
from facade.message import MessageExt
from facade.names import Header
from facade.retry import Reconsumer
from facade.sender import Sender
from ordering.orderly import Progress

log = logging.getLogger(__name__)

_DELIVER_AT, _REAL_TOPIC, _REAL_QID = Header.DELIVER_AT, Header.REAL_TOPIC, Header.REAL_QUEUE_ID

#: Consumer group of the forwarders (one group per topic prefix is enough: offsets are per topic).
DEFAULT_GROUP = "delay-forwarder"

#: Consumer options the forwarder starts from (``ConsumerOptions`` fields, ms where timed).
FORWARDER_OPTIONS: dict[str, Any] = {
    "consume_batch_size": 500,  # most records one batch-listener call gets
    "pull_batch_size": 2000,
    "pull_threshold_per_partition": 10_000,
    "consume_thread_max": 8,
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
        metrics_port: serve Prometheus metrics on this port (``0``: a free one, then in ``metrics.port``).
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
        self._max_ahead = self.config.max_delay + 86_400_000  # a due time further out is garbage
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
        self._kafka = self._sender.kafka
        self._reconsumer = Reconsumer(self._sender, self.group)
        self._holds = HoldTimer()
        self._poller = threading.Thread(target=self._serve_deliveries, name="rk-delay-acks", daemon=True)
        self._poller.start()
        self._consumer = PushConsumer(self.group, self._consumer_config, settings=self.settings, orderly=True,
                                      **{**self._options, "metrics": True})
        self.metrics.registry.register(self._consumer.metrics)  # its lag and lock series next to ours
        for topic in self.tiers.topics():
            self._consumer.subscribe(topic, self)  # a batch listener: see consume_batch
        self._consumer.start()
        if self._metrics_port is not None:
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
        self.metrics.close()
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
    def consume_batch(self, records: list[Any]) -> Progress:
        """Forward, re-route or hold the due records at the front of one partition's ``records``.

        Stops at the first record whose hop is not over (``suspend_ms`` until it is): the
        records behind it in a delay topic are due no earlier.
        """
        tier = self.tiers.by_topic[records[0].topic()]
        ack = BatchAck()
        on_delivery = ack.track_many()
        kafka, partitions, on_forward = self._kafka, self._partitions, self.metrics.on_forward
        now = now_ms()
        handled = 0
        delay_headers = DELAY_HEADERS
        for record in records:
            if handled & 63 == 63:
                now = now_ms()
            headers = record.headers() or []
            raw_due = raw_topic = raw_qid = None
            cut = len(headers)  # delay headers come last (the router appends them): kept = headers[:cut]
            for i in range(cut - 1, -1, -1):
                name = headers[i][0]
                if name not in delay_headers:
                    break
                cut = i
                if name == _DELIVER_AT:
                    raw_due = headers[i][1]
                elif name == _REAL_TOPIC:
                    raw_topic = headers[i][1]
                elif name == _REAL_QID:
                    raw_qid = headers[i][1]
            try:
                if raw_due is None or raw_topic is None or raw_qid is None:  # not at the end: look everywhere
                    due, real_topic, real_partition = self._delay_fields(headers, now)
                    cut = -1
                else:
                    due, real_topic, real_partition = int(raw_due), raw_topic.decode(), int(raw_qid)
                    if not real_topic or real_partition < 0 or due > now + self._max_ahead:
                        self._delay_fields(headers, now)  # raises with the reason
            except (DelayRecordError, ValueError, UnicodeDecodeError) as exc:
                reason = str(exc) if isinstance(exc, DelayRecordError) else f"garbled delay header ({exc})"
                self._dead_letter(record, reason)
                handled += 1
                continue
            if due <= now:  # the common case of a backlog: due, deliver (never before the due time)
                kind = Deliver
            else:
                action = self.tiers.decide(tier, record.timestamp()[1], due, now_ms())
                kind = type(action)
                if kind is Wait:
                    return Progress(handled, ack.close(), action.ms)
            if kind is Hop:
                partition = self.tiers.partition_for(real_topic, real_partition, partitions[action.tier.topic])
                self._send(action.tier.topic, partition, record.key(), record.value(), headers, ack.track())
                self.metrics.on_reroute()
                handled += 1
                continue
            known = partitions.get(real_topic)
            if known is None or real_partition >= known:
                try:
                    self._check_destination(real_topic, real_partition)
                except DelayRecordError as exc:
                    self._dead_letter(record, str(exc))
                    handled += 1
                    continue
            kept = headers[:cut] if cut >= 0 else [(k, v) for k, v in headers if k not in delay_headers]
            if kind is Hold:
                ack.follow(self._holds.add(due, lambda t=real_topic, p=real_partition, r=record, h=kept, d=due:
                                           self._deliver(t, p, r.key(), r.value(), h, d)))
            else:
                on_delivery.add()
                try:
                    kafka.produce(real_topic, record.value(), record.key(), partition=real_partition, headers=kept,
                                  on_delivery=on_delivery)
                except BufferError:  # the producer's queue is full: wait for room
                    on_delivery.cancel()
                    self._send(real_topic, real_partition, record.key(), record.value(), kept, ack.track())
                on_forward(now - due)
            handled += 1
        return Progress(handled, ack.close())

    def __call__(self, msg: MessageExt) -> Any:
        raise StateError("the delay forwarder takes raw batches of an orderly consumer (consume_batch)")

    def _delay_fields(self, headers: list[tuple[str, bytes | None]], now: int) -> tuple[int, str, int]:
        raw_due = raw_topic = raw_qid = None
        for name, value in headers:
            if name == _DELIVER_AT:
                raw_due = value
            elif name == _REAL_TOPIC:
                raw_topic = value
            elif name == _REAL_QID:
                raw_qid = value
        for name, value in ((_DELIVER_AT, raw_due), (_REAL_TOPIC, raw_topic), (_REAL_QID, raw_qid)):
            if value is None:
                raise DelayRecordError(f"missing header {name}")
        try:
            due, topic, partition = int(raw_due), raw_topic.decode(), int(raw_qid)
        except (TypeError, ValueError, UnicodeDecodeError) as exc:
            raise DelayRecordError(f"garbled delay header ({exc})") from None
        if not topic:
            raise DelayRecordError("empty real topic")
        if partition < 0:
            raise DelayRecordError(f"real partition {partition} is negative")
        if due > now + self._max_ahead:
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

    def _send(self, topic: str, partition: int, key: bytes | None, value: bytes | None,
              headers: list[tuple[str, bytes | None]], on_delivery: Callable[[Any, Any], None]) -> None:
        kafka = self._kafka
        while True:
            try:
                kafka.produce(topic, value, key, partition=partition, headers=headers, on_delivery=on_delivery)
                return
            except BufferError:
                kafka.poll(0.01)

    def _deliver(self, topic: str, partition: int, key: bytes | None, value: bytes | None,
                 headers: list[tuple[str, bytes | None]], due: int) -> Ack:
        """A held record's delivery, at its due time (the hold timer's thread)."""
        ack = BatchAck()
        self._send(topic, partition, key, value, headers, ack.track())
        self.metrics.on_forward(now_ms() - due)
        return ack.close() or ack

    def _dead_letter(self, record: Any, reason: str) -> None:
        """Dead-letter ``record`` with ``reason`` (durably, before its offset may commit)."""
        log.error("delay record %s[%d]@%d cannot be forwarded: %s", record.topic(), record.partition(),
                  record.offset(), reason, extra=record_fields(record))
        self.metrics.on_dead_letter(reason)
        try:
            msg = decode(record)
        except MalformedRecordError:  # undecodable system headers: the record goes as it is
            error = MalformedRecordError(record.topic(), record.partition(), record.offset(), reason)
            self._consumer.write_durably(lambda: self._reconsumer.dead_letter_raw(record, error))
            return
        self._consumer.write_durably(lambda: self._reconsumer.dead_letter(msg, reason))

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


class Ack:
    """A light future of one delivery report: what the orderly consumer needs of a listener's future.

    ``done()``, ``exception()``, ``add_done_callback(fn)`` and ``result(timeout)`` behave as
    :class:`concurrent.futures.Future`'s; creating and resolving one takes no lock (the GIL makes
    ``list.pop`` atomic, so each callback runs exactly once, in whichever thread gets it).
    """

    __slots__ = ("_done", "_error", "_callbacks")

    def __init__(self) -> None:
        self._done = False
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Ack], Any]] = []

    def resolve(self, error: BaseException | None = None) -> None:
        self._error = error
        self._done = True
        self._run_callbacks()

    def done(self) -> bool:
        return self._done

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._error

    def result(self, timeout: float | None = None) -> None:
        self._wait(timeout)
        if self._error is not None:
            raise self._error

    def add_done_callback(self, fn: Callable[[Ack], Any]) -> None:
        self._callbacks.append(fn)
        if self._done:
            self._run_callbacks()

    def _run_callbacks(self) -> None:
        callbacks = self._callbacks
        while callbacks:
            try:
                fn = callbacks.pop()
            except IndexError:
                return
            fn(self)

    def _wait(self, timeout: float | None) -> None:
        if not self._done:
            event = threading.Event()
            self.add_done_callback(lambda _ack: event.set())
            if not event.wait(timeout):
                raise TimeoutError("delivery report not in yet")


class BatchAck(Ack):
    """The ack of several deliveries: resolves once it is closed and every tracked delivery is in.

    The first failure becomes its error (the consumer then rewinds to the first record of the batch).
    """

    __slots__ = ("_pending", "_tracked", "_closed", "_lock", "_trackers")

    def __init__(self) -> None:
        super().__init__()
        self._pending = self._tracked = 0  # _pending may dip below 0 before close(): reports can beat the count
        self._closed = False
        self._lock = threading.Lock()
        self._trackers: list[_Tracker] = []

    def track(self) -> Callable[[Any, Any], None]:
        """One more delivery to wait for; returns its ``on_delivery(err, msg)`` callback."""
        with self._lock:
            self._pending += 1
            self._tracked += 1
        return self._one_done

    def track_many(self) -> _Tracker:
        """A delivery callback for many deliveries: call ``add()`` before each produce (cheaper than track())."""
        tracker = _Tracker(self)
        with self._lock:
            self._trackers.append(tracker)
        return tracker

    def follow(self, other: Ack) -> None:
        """Wait for ``other`` too."""
        done = self.track()
        other.add_done_callback(lambda ack: done(ack.exception(), None))

    def close(self) -> BatchAck | None:
        """No more deliveries will be tracked; None when there were none (nothing to wait for)."""
        with self._lock:
            for tracker in self._trackers:
                self._pending += tracker.added
                self._tracked += tracker.added
            self._closed = True
            if self._pending:
                return self
        if self._tracked:
            self.resolve(self._error)
            return self
        return None

    def _one_done(self, err: Any, _msg: Any) -> None:
        with self._lock:
            self._pending -= 1
            if err is not None and self._error is None:
                self._error = err if isinstance(err, BaseException) else SendError("?", err.str())
            fire = self._closed and not self._pending
        if fire:
            self.resolve(self._error)


class _Tracker:
    """``on_delivery`` for many produces of one :class:`BatchAck`: counts without a lock on the produce side.

    ``add()`` runs on the worker before each produce; the count moves into the ack at
    :meth:`BatchAck.close` time and with each report (both under the ack's lock).
    """

    __slots__ = ("ack", "added")

    def __init__(self, ack: BatchAck) -> None:
        self.ack = ack
        self.added = 0

    def add(self) -> None:
        self.added += 1

    def cancel(self) -> None:
        self.added -= 1

    def __call__(self, err: Any, msg: Any) -> None:
        self.ack._one_done(err, msg)


class HoldTimer:
    """Delivers held records at their exact due time: one thread, one heap (no thread per message).

    :meth:`add` returns at once with a future that resolves when the record's delivery is
    acknowledged; the consumer's commit point stays on the record until then.
    """

    def __init__(self) -> None:
        self._wake = threading.Condition()
        self._heap: list[tuple[int, int, Callable[[], Ack], Ack]] = []
        self._seq = itertools.count()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="rk-delay-holds", daemon=True)
        self._thread.start()

    def add(self, due_ms: int, produce: Callable[[], Ack]) -> Ack:
        """Run ``produce`` once the wall clock reaches ``due_ms``; its outcome becomes the returned ack's."""
        done = Ack()
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
                produce().add_done_callback(lambda ack, done=done: done.resolve(ack.exception()))
            except Exception as exc:
                done.resolve(exc)
