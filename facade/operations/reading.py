"""Reading a broker the way an operator needs it: log ends, committed offsets, ranges, times.

Log ends come from fetched watermarks, never from ListOffsets "latest", which Tansu
answers wrongly after batched produce (DESIGN §4): each partition is fetched once from
just before the listed end, and the high watermark that arrives with the fetch (or its
partition EOF) is the end. Every consumer here is ``assign()``-only with a throw-away
group id (:func:`reader_group`): reading never joins, never commits, never moves a group.

On a secured cluster a refusal is named (:class:`~rocketkafka.errors.AuthorizationError`), never
waited out as an unanswered broker nor taken for a missing topic or an empty group: a fetch Kafka
refuses, a group whose offsets this principal may not describe (asked first: librdkafka would
only time out), a topic it does not list because it may not describe it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from concurrent.futures import TimeoutError as FutureTimeout

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.errors import BrokerUnavailableError, ConfigError, TopicNotFoundError
from rocketkafka.refusals import kafka_refusal, principal_of, refusal_in, secured
from rocketkafka.topic_partition import TP

#: Errors of a group coordinator that is moving or loading: asked again in a moment, it answers.
COORDINATOR_MOVING = frozenset({KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                KafkaError.COORDINATOR_NOT_AVAILABLE})


#: Seconds a read waits for the broker before giving up on a partition.
READ_TIMEOUT_S = 30.0


def reader_group(topic_prefix: str, unique: str) -> str:
    """The throw-away group id of an admin reader, under the deployment's prefix. It needs no grant: the reader
    only assigns and fetches (a refused coordinator look-up of its group stops nothing, and is not logged)."""
    return f"{topic_prefix}.admin.{unique}"


class LogReader:
    """An assign-only consumer for admin reads (context manager).

    Parameters:
        settings: where the broker is.
        timeout: seconds to wait for any single answer of the broker.
    """

    def __init__(self, settings: Settings, timeout: float = READ_TIMEOUT_S) -> None:
        self.settings, self.timeout = settings, timeout
        self.admin = TopicAdmin(settings)
        self._consumer = Consumer(settings.kafka_config(**{
            "group.id": reader_group(settings.topic_prefix, uuid.uuid4().hex[:10]), "enable.auto.commit": False,
            "enable.auto.offset.store": False, "enable.partition.eof": True, "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 10}))

    def __enter__(self) -> LogReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._consumer.close()
        self.admin.close()

    @property
    def principal(self) -> str | None:
        """Who the broker knows this reader as (``User:<name>``), named in its refusals."""
        return principal_of(self.settings.kafka)

    # -- topics and offsets ------------------------------------------------------------
    def partitions(self, topic: str) -> list[TP]:
        """Every partition of ``topic``; :class:`TopicNotFoundError` when it does not exist."""
        return [(topic, p) for p in range(self.admin.partitions(topic))]

    def exists(self, topic: str) -> bool:
        """Whether ``topic`` exists (never creates it).

        Raises:
            AuthorizationError: a secured cluster does not list it because this principal may not describe it.
        """
        if self.admin.exists(topic):
            return True
        if secured(self.settings.kafka):
            try:
                self.admin.partitions(topic)  # a topic not listed: missing, or hidden from us (asked by name)
            except TopicNotFoundError:
                return False
        return False

    def _refused(self, err: KafkaError, topic: str | None) -> None:
        """Raise the refusal a fetch's error event stands for (a topic this principal may not read)."""
        if err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            refusal = kafka_refusal(err, topic, "READ", self.principal)
            assert refusal is not None
            raise refusal

    def ends(self, tps: Iterable[TP]) -> dict[TP, tuple[int, int]]:
        """``(low, high)`` of each partition, the high watermark learnt from a fetch."""
        tps = list(tps)
        if not tps:
            return {}
        lows: dict[TP, int] = {}
        assignment = []
        for tp in tps:
            low, listed = self._listed(tp)
            lows[tp] = low
            start = max(low, listed - 1)
            assignment.append(TopicPartition(*tp, start if listed > low else OFFSET_BEGINNING))
        pending = set(tps)
        self._consumer.assign(assignment)
        try:
            deadline = time.monotonic() + self.timeout
            while pending:
                if time.monotonic() > deadline:
                    raise BrokerUnavailableError(self.settings.bootstrap_servers, self.timeout)
                for msg in self._consumer.consume(1000, 0.05):
                    err = msg.error()
                    if err is not None and err.code() != KafkaError._PARTITION_EOF:
                        if err.fatal():
                            raise KafkaException(err)
                        self._refused(err, msg.topic() or next(iter(pending))[0])
                        continue
                    pending.discard((msg.topic(), msg.partition()))
            out = {}
            for tp in tps:
                low, high = self._consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)
                out[tp] = (lows[tp] if low < 0 else low, max(high, lows[tp]))
            return out
        finally:
            self._consumer.unassign()

    def _listed(self, tp: TP) -> tuple[int, int]:
        try:
            return self._consumer.get_watermark_offsets(TopicPartition(*tp), timeout=self.timeout, cached=False)
        except KafkaException as exc:
            raise BrokerUnavailableError(self.settings.bootstrap_servers, self.timeout, exc) from exc

    def committed(self, group: str, tps: Iterable[TP]) -> dict[TP, int | None]:
        """``group``'s committed offset of each partition (``None``: never committed).

        Raises:
            AuthorizationError: this principal may not describe ``group`` (a secured cluster).
        """
        tps = list(tps)
        if not tps:
            return {}
        self._check_group(group)
        consumer = Consumer(self.settings.kafka_config(**{"group.id": group, "enable.auto.commit": False}))
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                try:
                    answered = consumer.committed([TopicPartition(*tp) for tp in tps], timeout=self.timeout)
                    break
                except KafkaException as exc:
                    # a group coordinator that is moving or still loading (NOT_COORDINATOR, COORDINATOR_LOAD_
                    # IN_PROGRESS: Apache Kafka right after a start) answers again in a moment
                    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                    transient = error is not None and (error.retriable() or error.code() in COORDINATOR_MOVING)
                    if not transient or time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        finally:
            consumer.close()
        return {(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else None for tp in answered}

    def _check_group(self, group: str) -> None:
        """On a secured cluster, refuse a group whose offsets this principal may not describe: without the grant
        librdkafka finds no coordinator for it and only times out ("Failed to get committed offsets")."""
        if not secured(self.settings.kafka):
            return
        future = self.admin.client.describe_consumer_groups([group], request_timeout=self.timeout)[group]
        try:
            future.result(self.timeout)
        except KafkaException as exc:
            refusal = refusal_in(exc, group, "DESCRIBE", self.principal)
            if refusal is not None:
                raise refusal from None
        except FutureTimeout:
            pass  # no answer is no refusal: the read below says what it finds

    def committed_topics(self, group: str) -> set[str]:
        """Topics ``group`` has committed offsets for (the broker's group offsets; empty when unsupported)."""
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka.admin import AdminClient

        client = AdminClient(self.settings.kafka_config())
        try:
            future = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                        request_timeout=self.timeout)[group]
            result = future.result()
        except KafkaException:
            return set()
        return {tp.topic for tp in result.topic_partitions or [] if tp.offset >= 0}

    # -- records -----------------------------------------------------------------------
    def read(self, tp: TP, start: int, end: int, progress: Callable[[int], None] | None = None) -> Iterator[Any]:
        """Records of ``tp`` with ``start <= offset < end`` (fewer when the log ends first), in order.

        ``progress(n)`` is called every 10,000 records read.
        """
        if end <= start:
            return
        self._consumer.assign([TopicPartition(*tp, start)])
        try:
            position, read = start, 0
            deadline = time.monotonic() + self.timeout
            while position < end:
                if time.monotonic() > deadline:
                    return  # the log ends before ``end`` (a gap, or records deleted meanwhile)
                for msg in self._consumer.consume(min(10_000, end - position), 0.1):
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            return
                        if err.fatal():
                            raise KafkaException(err)
                        self._refused(err, msg.topic() or tp[0])
                        continue
                    deadline = time.monotonic() + self.timeout
                    offset = msg.offset()
                    assert offset is not None  # a record (events are errors, handled above)
                    position = offset + 1
                    if offset >= end:
                        return
                    read += 1
                    if progress is not None and read % 10_000 == 0:
                        progress(read)
                    yield msg
        finally:
            self._consumer.unassign()

    def record_at(self, tp: TP, offset: int) -> Any | None:
        """The record at ``offset`` of ``tp``, or ``None`` when there is none (past the end, or deleted)."""
        for msg in self.read(tp, offset, offset + 1):
            return msg if msg.offset() == offset else None
        return None

    # -- times ---------------------------------------------------------------------------
    def offsets_for_times(self, times: dict[TP, int]) -> dict[TP, int]:
        """The broker's answer: the first offset at or after each time (epoch ms); ``-1`` when there is none."""
        if not times:
            return {}
        try:
            answered = self._consumer.offsets_for_times([TopicPartition(*tp, ms) for tp, ms in times.items()],
                                                        timeout=self.timeout)
        except KafkaException as exc:
            raise BrokerUnavailableError(self.settings.bootstrap_servers, self.timeout, exc) from exc
        return {(tp.topic, tp.partition): tp.offset for tp in answered}

    def times_reliable(self, tps: Iterable[TP], ends: dict[TP, tuple[int, int]]) -> bool:
        """Whether the broker answers ``offsets_for_times`` correctly, probed with a time after every record.

        A correct broker has no record at or after a time a day ahead; Tansu answers offset 0
        (DESIGN §4). Only non-empty partitions can tell; with none, the broker is trusted.
        """
        probe = int(time.time() * 1000) + 86_400_000
        filled = [tp for tp in tps if ends[tp][1] > ends[tp][0]]
        if not filled:
            return True
        answers = self.offsets_for_times({tp: probe for tp in filled})
        return all(answers[tp] < 0 or answers[tp] >= ends[tp][1] for tp in filled)

    def first_at_or_after(self, tp: TP, ms: int, low: int, high: int, trust_broker: bool) -> int:
        """The first offset of ``tp`` whose record timestamp is at or after ``ms`` (``high`` when none).

        With ``trust_broker`` the broker's ``offsets_for_times`` answers. Otherwise its answer is
        used only when the records around it prove it (the one before is earlier than ``ms``, the
        one there is not); else the partition is scanned from its start (assumes timestamps that
        grow with offsets, as a producer's CreateTime does).
        """
        answer = self.offsets_for_times({tp: ms})[tp]
        if trust_broker:
            return high if answer < 0 else max(low, min(answer, high))
        if low < answer < high:
            before, at = self.record_at(tp, answer - 1), self.record_at(tp, answer)
            if before is not None and at is not None and before.timestamp()[1] < ms <= at.timestamp()[1]:
                return answer
        for msg in self.read(tp, low, high):
            if msg.timestamp()[1] >= ms:
                return msg.offset()
        return high


def header_strings(record: Any) -> dict[str, str]:
    """A read record's headers as text (undecodable bytes replaced, ``None`` values left out): admin output
    shows foreign and garbled headers too, where :func:`rocketkafka.headers.read_headers` would refuse them."""
    return {k: v.decode("utf-8", "replace") for k, v in record.headers() or [] if v is not None}


def parse_offset_spec(text: str) -> tuple[TP, int]:
    """``topic@partition@offset`` -> ``((topic, partition), offset)``; :class:`ConfigError` otherwise."""
    parts = text.rsplit("@", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        raise ConfigError(f"{text!r} is not topic@partition@offset")
    return (parts[0], int(parts[1])), int(parts[2])
