"""The send engine behind both producer doors: validate, encode, choose a partition, produce.

Everything that can be wrong with a message is checked before the first byte
reaches librdkafka, so a bad call raises and sends nothing.

This is every RocketMQ-style send's hot path, so the common message (bytes body, a tag,
keys, no properties, no delay, no selector) is prepared by :meth:`Sender.produce_message`
without building a :class:`Record`: the per-message work is the id, the born time, the
header list and one ``produce`` call (measured by ``rocketkafka.tools.bench.produce``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Producer as _KafkaProducer

from rocketkafka.admin import TopicAdmin
from rocketkafka.codec import encode_headers
from rocketkafka.config import SAFE_PRODUCER_CONFIG, Settings, kafka_client
from rocketkafka.errors import BrokerUnavailableError, MessageTooLargeError, SendError, StateError
from rocketkafka.message import Message, SendResult, SendStatus, require_message
from rocketkafka.msgid import new_msg_id_and_born, new_msg_id_at
from rocketkafka.names import Header
from rocketkafka.partitioning import DEFAULT_PARTITIONER, key_partition, partitioner_of
from rocketkafka.queue_selectors import Selector, select_partition, sharding_key_bytes
from rocketkafka.record import Record
from rocketkafka.refusals import RESOURCE_OF, principal_of, send_error
from rocketkafka.topic_listing import TopicListing

log = logging.getLogger(__name__)

#: librdkafka's default ``message.max.bytes``.
DEFAULT_MAX_MESSAGE_BYTES = 1_000_000
_HEADER_OVERHEAD = 8  # per header, rough upper bound of the record framing


class _DelayRouting(Protocol):
    """What the sender asks of ``rocketkafka.schedule.routing.DelayRouter`` (imported lazily, on first use)."""

    def route(self, msg: Message, record: Record, partitions: int) -> Record: ...


class Sender:
    """Owns one confluent-kafka producer and turns :class:`Message` objects into records.

    Parameters:
        settings: broker address and internal topic names.
        producer_config: extra confluent-kafka producer settings (``partitioner`` defaults to
            ``murmur2_random``: :mod:`rocketkafka.partitioning`).
        group_id: producer group (stamped on transactional records only, as RocketMQ's ``PGROUP``).
        kafka: a confluent-kafka producer to send with instead of making one (the drop-in producer
            is one); its ``produce``/``poll``/``flush`` of :class:`confluent_kafka.Producer` are used.
        send_timeout: seconds a send may take in all (metadata look-up included); also librdkafka's
            ``message.timeout.ms`` unless the config sets it.
    """

    def __init__(self, settings: Settings, producer_config: dict[str, Any] | None = None, group_id: str | None = None,
                 *, kafka: _KafkaProducer | None = None, send_timeout: float | None = None) -> None:
        self.settings = settings
        self.group_id = group_id
        # a record queued while no broker answers must not auto-create its topic when one does
        extra: dict[str, Any] = {"linger.ms": 5, **SAFE_PRODUCER_CONFIG, "partitioner": DEFAULT_PARTITIONER,
                                 "allow.auto.create.topics": False}
        if send_timeout is not None:
            extra["message.timeout.ms"] = max(1, int(send_timeout * 1000))
        config = settings.kafka_config(**{**extra, **(producer_config or {})})
        #: the librdkafka settings of the producer this sender makes (tests, diagnostics)
        self.config = config
        self.partitioner = partitioner_of(config)
        #: who the broker knows this producer as (``User:<sasl.username>``), for the errors of refused sends
        self.principal = principal_of(config)
        #: threads that must never wait in librdkafka's full queue (an asyncio door's loop): BufferError reaches them
        self.never_wait: set[int] = set()
        self.max_bytes = int(config.get("message.max.bytes", DEFAULT_MAX_MESSAGE_BYTES))
        self.send_timeout = send_timeout if send_timeout is not None else 30.0
        self.admin = TopicAdmin(settings)
        #: existing topics, learnt in the background: sends that need no partition count never wait for it
        self.topics = TopicListing(self.admin.list)
        self._kafka: _KafkaProducer | None = kafka if kafka is not None else kafka_client(_KafkaProducer, config)
        self._owns_kafka = kafka is None
        # confluent-kafka's own methods, bound once: the drop-in overrides produce() on the same object
        self._produce = _KafkaProducer.produce.__get__(self._kafka)
        #: confluent-kafka's ``poll`` of the producer: serves delivery reports
        self.poll: Callable[..., int] = _KafkaProducer.poll.__get__(self._kafka)
        self._closed = False
        self._partitions: dict[str, tuple[float, int]] = {}
        self._fast_limit = self.max_bytes // 2  # a message below this (body + tags + keys) needs no size sum
        self._delay_router: _DelayRouting | None = None  # built on first delayed send (the delay package's seam)

    # -- preparing -------------------------------------------------------------------
    def partitions(self, topic: str, timeout: float | None = None) -> int:
        """Partition count of an existing topic (cached 30 s).

        Raises:
            TopicNotFoundError: the topic does not exist.
            SendError: no broker answered within ``timeout`` s (default: the send timeout); it carries
                librdkafka's KafkaError (``_TRANSPORT``, ``_TIMED_OUT``...).
        """
        cached = self._partitions.get(topic)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        if cached is not None:  # aged out: a fresh count if the broker answers, else the last one (an outage)
            fresh = self.topics.lookup(topic)
            self.assume_partitions(topic, cached[1] if fresh is None else fresh, 30.0 if fresh else 1.0)
            return cached[1] if fresh is None else fresh
        return self.look_up(topic, timeout)  # never counted: ask the broker

    def look_up(self, topic: str, timeout: float | None = None) -> int:
        """:meth:`partitions`, asking the broker even while a count is cached (a caller that keeps the cache fresh
        off its own thread: the asyncio producer).

        Raises:
            TopicNotFoundError, SendError: as :meth:`partitions`.
        """
        try:
            count = self.admin.partitions(topic, timeout=min(10.0, self.send_timeout) if timeout is None else timeout)
        except BrokerUnavailableError as exc:
            cached = self._partitions.get(topic)
            if cached is not None:  # an outage: go on with the last count for a while, as partitions() does
                self.assume_partitions(topic, cached[1], 1.0)
                return cached[1]
            raise SendError(topic, str(exc), exc.error, retriable=True) from exc
        self.assume_partitions(topic, count)
        return count

    def existing(self, topic: str) -> int:
        """``topic``'s partition count, or -1 when no broker answers (the record may wait in librdkafka's queue
        for one: its partitioner places it when metadata arrives). Never waits long for a broker that is down.

        Raises:
            TopicNotFoundError: the broker answered and does not list the topic.
        """
        cached = self._partitions.get(topic)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        count = self.topics.lookup(topic)
        if count is None:
            return cached[1] if cached is not None else -1
        self.assume_partitions(topic, count)
        return count

    def fresh(self, topic: str, margin: float = 0.0) -> bool:
        """Whether ``topic``'s partition count is cached for ``margin`` s more: a send now asks no broker."""
        cached = self._partitions.get(topic)
        return cached is not None and cached[0] > time.monotonic() + margin

    def assume_partitions(self, topic: str, count: int, seconds: float = 30.0) -> None:
        """Cache ``topic``'s partition count for ``seconds`` as if the broker had just said it
        (a caller that knows it already: benchmarks timing the send path without a broker)."""
        self._partitions[topic] = (time.monotonic() + seconds, count)

    def key_partition(self, key: bytes, topic: str) -> int:
        """Where this producer's partitioner puts ``key`` in ``topic`` (:mod:`rocketkafka.partitioning`)."""
        return key_partition(key, self.partitions(topic), self.partitioner)

    def prepare(self, msg: Message, selector: Selector | None = None, arg: Any = None,
                sharding_key: str | None = None, system: dict[str, str] | None = None,
                timeout: float | None = None, wait_for_route: bool = True) -> Record:
        """Validate and encode ``msg``; nothing is sent. Looking the topic up takes at most ``timeout`` s
        (default: the send timeout, at most 10 s).

        A ``sharding_key`` becomes the record key and places the record by this producer's
        partitioner (unless a selector chose); otherwise the message's first key is the record key.

        Raises:
            MessageError, TopicNotFoundError, SelectorError, DelayError: the message cannot be sent as given.
            SendError: no broker answered the topic lookup within ``timeout`` s.
        """
        require_message(msg, "send")
        if self._closed:
            raise StateError("producer is shut down")
        msg.validate()
        delayed = msg.delay_time_level or msg.deliver_at is not None or msg.delay is not None
        partitions = self.partitions(msg.topic, timeout) if wait_for_route or selector or sharding_key is not None \
            or delayed else self.existing(msg.topic)
        partition = select_partition(selector, partitions, msg, arg) if selector else -1
        now_ms = time.time_ns() // 1_000_000
        msg_id = new_msg_id_at(now_ms)
        extra = dict(system or {})
        key: bytes | None
        if sharding_key is not None:
            key = sharding_key_bytes(sharding_key)
            extra[Header.SHARDING_KEY] = key.decode("utf-8", "replace")
            if partition == -1:
                partition = key_partition(key, partitions, self.partitioner)
        else:
            key = msg.keys.split()[0].encode() if msg.keys else None
        record = Record(msg.topic, partition, key, bytes(msg.body),
                        encode_headers(msg, msg_id, now_ms, extra), msg_id)
        if delayed:
            record = self._route_delayed(msg, record, partitions)
        self.check_size(record)
        msg.id = msg_id
        return record

    def produce_message(self, msg: Message, on_delivery: Callable[[KafkaError | None, Any], None] | None = None) -> str:
        """Validate, encode and produce ``msg`` (no selector): the hot path of ``send_async``/``send_oneway``.

        Returns the message id (also set on ``msg.id``). Messages with properties, a delay or a
        large body take :meth:`prepare`; the rest are checked here with the same rules.
        """
        if msg.properties or msg.delay_time_level or msg.deliver_at is not None or msg.delay is not None:
            return self._produce_prepared(msg, on_delivery)
        msg_id = self.produce_tagged(msg.topic, msg.body, msg.tags, msg.keys, on_delivery)
        if msg_id is None:
            return self._produce_prepared(msg, on_delivery)
        msg.id = msg_id
        return msg_id

    def produce_tagged(self, topic: str, body: bytes, tags: str | None, keys: str | None,
                       on_delivery: Callable[[KafkaError | None, Any], None] | None = None) -> str | None:
        """Produce a plain message (bytes body, a tag, space-separated keys) without building a :class:`Message`;
        the message id, or ``None`` (nothing sent) when it needs :meth:`prepare`'s checks: a topic not
        looked up yet, a large body, a tag or keys that are not plain strings or break a rule.

        Raises:
            SendError: librdkafka refused the record.
        """
        if (type(body) is not bytes or type(topic) is not str or topic not in self._partitions or self._closed
                or len(body) >= self._fast_limit
                or (tags is not None and (type(tags) is not str or not tags.strip() or "||" in tags or len(tags) > 1024))
                or (keys is not None and (type(keys) is not str or len(keys) > 1024))):
            return None
        id_bytes, born = new_msg_id_and_born()
        if keys:
            key = keys.split(None, 1)[0].encode()
            headers = [(_MSG_ID, id_bytes), (_BORN, born), (_TAGS, tags.encode()), (_KEYS, keys.encode())] if tags \
                else [(_MSG_ID, id_bytes), (_BORN, born), (_KEYS, keys.encode())]
        else:
            key = None
            headers = [(_MSG_ID, id_bytes), (_BORN, born), (_TAGS, tags.encode())] if tags \
                else [(_MSG_ID, id_bytes), (_BORN, born)]
        try:
            self._produce(topic, body, key, headers=headers, on_delivery=on_delivery)
        except BufferError:
            self._produce_waiting(topic, body, key, headers, on_delivery)
        except KafkaException as exc:
            raise produce_error(topic, exc, self.principal) from exc
        return id_bytes.decode()

    def _produce_prepared(self, msg: Message, on_delivery: Callable[[KafkaError | None, Any], None] | None) -> str:
        """The general path: every check, delays, size sums."""
        record = self.prepare(msg, wait_for_route=False)
        self.produce(record, on_delivery)
        return record.msg_id

    def check_size(self, record: Record) -> None:
        """Raise :class:`MessageTooLargeError` when the record would exceed ``message.max.bytes``."""
        size = len(record.value or b"") + len(record.key or b"")
        if size < self._fast_limit and len(record.headers) <= 8 and self._small_headers(record):
            return  # the common case, decided without summing every header
        size += sum(len(k) + len(v or b"") + _HEADER_OVERHEAD for k, v in record.headers)
        if size > self.max_bytes:
            raise MessageTooLargeError(record.topic, size, self.max_bytes)

    def _small_headers(self, record: Record) -> bool:
        return all(v is None or len(v) < 1024 for _, v in record.headers)

    def _route_delayed(self, msg: Message, record: Record, partitions: int) -> Record:
        if self._delay_router is None:
            from rocketkafka.schedule.routing import DelayRouter  # narrow seam into the rocketkafka.delay package

            self._delay_router = DelayRouter(self.settings, self.admin, partitioner=self.partitioner)
        return self._delay_router.route(msg, record, partitions)

    # -- sending ---------------------------------------------------------------------
    def produce(self, record: Record, on_delivery: Callable[[KafkaError | None, Any], None] | None = None) -> None:
        """Hand ``record`` to librdkafka (waiting for queue space rather than failing)."""
        partition = record.partition if record.partition >= 0 else _ANY_PARTITION
        try:
            self._produce(record.topic, record.value, record.key, partition, on_delivery, headers=record.headers)
        except BufferError:
            self._produce_waiting(record.topic, record.value, record.key, record.headers, on_delivery, partition)
        except KafkaException as exc:
            raise produce_error(record.topic, exc, self.principal) from exc

    def _produce_waiting(self, topic: str, value: bytes | None, key: bytes | None,
                         headers: Sequence[tuple[str, bytes | None]],
                         on_delivery: Callable | None, partition: int = -1) -> None:
        """librdkafka's queue is full: serve delivery reports until there is room (RocketMQ's send blocks too); on a
        thread in :attr:`never_wait`, the BufferError goes to the caller instead (it waits for room its own way)."""
        if self.never_wait and threading.get_ident() in self.never_wait:
            raise BufferError("Local: Queue full")
        while True:
            self.poll(0.05)
            try:
                self._produce(topic, value, key, partition, on_delivery, headers=headers)
                return
            except BufferError:
                continue
            except KafkaException as exc:
                raise produce_error(topic, exc, self.principal) from exc

    def send_sync(self, record: Record, timeout: float | None = None) -> SendResult:
        """Produce and wait for the broker's ack (at most ``timeout`` s, default the send timeout).

        Raises:
            SendError: the broker refused the record, or no acknowledgement came in time; its
                ``error`` is the KafkaError (``code()``, ``retriable()``).
        """
        timeout = self.send_timeout if timeout is None else timeout
        done = threading.Event()
        outcome: dict[str, Any] = {}

        def delivered(err: KafkaError | None, kmsg: Any) -> None:
            outcome["err"], outcome["msg"] = err, kmsg
            done.set()

        deadline = time.monotonic() + timeout
        self.produce(record, delivered)
        while not done.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                reason = self._unacknowledged(record, f"no acknowledgement within {timeout:g} s")
                raise SendError(record.topic, reason, KafkaError(KafkaError._TIMED_OUT, reason, retriable=True))
            try:
                self.poll(min(0.01, left))
            except KafkaException as exc:  # a fatal error of the producer (an idempotent id refused: no grant)
                raise produce_error(record.topic, exc, self.principal) from exc
        err = outcome["err"]
        if err is not None and err.code() == KafkaError._MSG_TIMED_OUT:
            reason = self._unacknowledged(record, err.str())
            raise SendError(record.topic, reason, KafkaError(err.code(), reason, retriable=True))
        return self.result(record, err, outcome["msg"], self.principal)

    def check_access(self, timeout: float = 10.0) -> None:
        """Ask the broker once whether it takes who this producer is (a start); one that does not answer is
        no error here: sends wait for it as before.

        Raises:
            AuthenticationError: the broker refused the credentials, TLS failed, or it expects another
                ``security.protocol`` (the error says which and what to set).
        """
        self.admin.check_access(timeout)

    def _unacknowledged(self, record: Record, what: str) -> str:
        """``what`` went wrong, and why when the cluster can tell (a short ISR, no leader)."""
        partition = record.partition if record.partition >= 0 else None
        why = self.admin.write_blocker(record.topic, partition)
        return f"{what}: {why}" if why else what

    @staticmethod
    def result_error(topic: str, err: KafkaError, principal: str | None = None) -> SendError:
        """The :class:`SendError` of a failed delivery report (a :class:`~rocketkafka.errors.SendNotAuthorizedError`
        naming the topic and ``principal`` when no ACL allows the write)."""
        return send_error(topic, err, principal)

    @staticmethod
    def result(record: Record, err: KafkaError | None, kmsg: Any, principal: str | None = None) -> SendResult:
        """The SendResult of a delivery report, or :class:`SendError`."""
        if err is not None:
            raise Sender.result_error(record.topic, err, principal)
        return SendResult(SendStatus.OK, record.msg_id, kmsg.offset(), kmsg.topic(), kmsg.partition())

    @property
    def kafka(self) -> _KafkaProducer:
        """The confluent-kafka producer this sender sends with.

        Raises:
            StateError: the sender is closed and the producer, its own, was let go.
        """
        if self._kafka is None:
            raise StateError("this sender is closed: its producer is gone")
        return self._kafka

    def flush(self, timeout: float = 30.0) -> int:
        return self._kafka.flush(timeout) if self._kafka is not None else 0

    def close(self, timeout: float = 30.0) -> None:
        """Deliver what is queued, then refuse new sends and let the clients this sender made go. Idempotent.

        Let go here, a client is destroyed now, in the caller's thread (see :meth:`TopicAdmin.close`);
        a producer given to the sender stays its owner's.
        """
        if not self._closed:
            try:
                remaining = self.kafka.flush(timeout)
            except KafkaException as exc:  # a producer failed for good (fatal): nothing more to deliver
                log.warning("producer closed after a fatal error: %s", produce_error("", exc, self.principal))
                remaining = 0
            if remaining:
                log.warning("producer closed with %d messages undelivered", remaining)
            self._closed = True
            self.topics.close()
            self.admin.close()
            if self._owns_kafka:
                self._kafka = None
                self._produce = _closed_produce
                self.poll = _nothing_to_poll


def produce_error(topic: str, exc: KafkaException, principal: str | None) -> SendError:
    """The :class:`SendError` of a produce or poll that raised: a refusal named (no ACL allows the write, or the
    idempotent producer's id), else librdkafka's words."""
    error = exc.args[0] if exc.args else None
    if isinstance(error, KafkaError) and error.code() in RESOURCE_OF:
        return send_error(topic, error, principal)
    return SendError(topic, str(exc), error)


def _closed_produce(*_args: Any, **_kwargs: Any) -> None:
    raise StateError("this sender is closed")


def _nothing_to_poll(_timeout: float = 0.0) -> int:
    """``poll`` of a closed sender: its producer is gone, and every delivery report was served at close."""
    return 0


_MSG_ID, _BORN, _TAGS, _KEYS = Header.MSG_ID, Header.BORN_TIMESTAMP, Header.TAGS, Header.KEYS
#: confluent-kafka's "let the partitioner choose" partition (``RD_KAFKA_PARTITION_UA``).
_ANY_PARTITION = -1
