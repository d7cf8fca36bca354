"""Kafka access of the Python reader: partition discovery, log ends, range reads into Arrow.

Log ends come from fetched watermarks, never from ListOffsets "latest" (Tansu
answers it with the last batch's first offset + 1, see DESIGN §4): a probe
consumer fetches each partition once, and the high watermark that arrives with
the fetch (``get_watermark_offsets(cached=True)``, or partition EOF) is the end.
ListOffsets answers only serve as a hint of where to start that fetch, so it
transfers the last batch rather than the whole log; a wrong hint costs time,
never correctness (a hint past the end resets to the earliest offset).

On a secured cluster every consumer logs in with the source's ``kafka.*`` settings, and a refusal
ends the read at once with an error that names what is missing: a topic the user may not
describe or read raises :class:`~rocketkafka.spark.errors.KafkaAuthorizationError` (the topic and
the ACL to grant), a refused login :class:`~rocketkafka.errors.AuthenticationError` (credentials,
TLS or protocol, told by :mod:`rocketkafka.connection_check` from what librdkafka reported).
The reader's consumers never join their group, but librdkafka looks its coordinator up; a broker
refusing that (no Group DESCRIBE ACL) costs nothing and is logged once.

Range reads yield :class:`pyarrow.RecordBatch` objects in Spark's Kafka source
schema, built column-wise with ``map`` over the messages of one ``consume()``
call, so no Python code runs per row beyond the client's own accessors.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import logging
import re
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any, NoReturn

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from rocketkafka.connection_check import authentication_error
from rocketkafka.errors import AuthenticationError, TopicNotFoundError
from rocketkafka.refusals import secured
from rocketkafka.spark.errors import DataLossError, KafkaAuthorizationError, KafkaReadError, SourceOptionError
from rocketkafka.spark.options import SourceOptions
from rocketkafka.spark.schema import kafka_schema
from rocketkafka.topic_partition import TP

log = logging.getLogger(__name__)


#: Arrow type of the ``timestamp`` column as PySpark expects it from a data source.
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

_CONSUME_BATCH = 10_000


class ReaderConsumer(Consumer):
    """A consumer of the reader: remembers what librdkafka reported of its connections (its ``error_cb``), which
    tells a refused login apart from a broker that does not answer."""

    refused: list[KafkaError]


#: librdkafka's error codes that may tell a refused login: SASL, TLS, a connection closed at the first request.
_LOGIN_CODES = frozenset({KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError._TRANSPORT})


def open_consumer(options: SourceOptions, purpose: str, **extra: Any) -> ReaderConsumer:
    """A consumer for ``assign()`` use only (never joins a group, never commits).

    Raises:
        SourceOptionError: a ``kafka.*`` setting is unknown to the client (or a Java setting has no
            librdkafka counterpart).
    """
    refused: list[KafkaError] = []

    def on_error(err: KafkaError) -> None:
        if err.code() in _LOGIN_CODES and len(refused) < 10:
            refused.append(err)
        elif err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
            _group_refused(options)

    config = options.consumer_config(**{"group.id": options.group(purpose, uuid.uuid4().hex[:12]),
                                        "error_cb": on_error, **extra})
    try:
        consumer = ReaderConsumer(config)
    except (KafkaException, ValueError, TypeError) as exc:
        raise SourceOptionError("kafka.*", f"the Kafka client refused the settings: {exc}") from None
    consumer.refused = refused
    return consumer


def _login_refused(consumer: Consumer, options: SourceOptions) -> AuthenticationError | None:
    """The :class:`AuthenticationError` of a consumer whose broker refused its login (what its ``error_cb`` saw,
    once served), else ``None``."""
    refused = getattr(consumer, "refused", None)
    if refused is None:
        return None
    consumer.consume(num_messages=1, timeout=0)  # serves the callbacks of errors already reported
    try:
        config = options.consumer_config()
    except SourceOptionError:
        return None
    return authentication_error([err.str() for err in refused], config, options.bootstrap_servers)


def refusal(err: KafkaError | None, options: SourceOptions | None, topic: str | None, operation: str = "READ"
            ) -> KafkaAuthorizationError | None:
    """The authorization error a client error stands for (``None``: not a refusal that ends the read).

    A refused group coordinator lookup is not one: the reader never uses its group (logged once).
    """
    if not isinstance(err, KafkaError):
        return None
    if err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        return KafkaAuthorizationError(topic or "?", operation, options.user if options else None, err)
    if err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED and options is not None:
        _group_refused(options)
    return None


_groups_refused: set[str] = set()


def _group_refused(options: SourceOptions) -> None:
    prefix = options.group_id or options.group_id_prefix
    if prefix in _groups_refused:
        return
    _groups_refused.add(prefix)
    kind = "group" if options.group_id else "prefix"
    log.warning("the broker refused the coordinator lookup of the reader's group %s %r (no ACL Group DESCRIBE); "
                "the reader never joins or commits, so it reads on. Grant Group DESCRIBE on %s %r to stop the "
                "broker's denials", kind, prefix, kind, prefix)


def discover(consumer: Consumer, options: SourceOptions, timeout: float = 10.0) -> list[TP]:
    """The partitions the source reads now, sorted; never auto-creates a topic.

    Raises:
        TopicNotFoundError: a subscribed or assigned topic does not exist.
        SourceOptionError: an assigned partition does not exist.
        KafkaReadError: the broker did not answer.
    """
    try:
        metadata = consumer.list_topics(timeout=timeout)  # no topic argument: Tansu would auto-create it
    except KafkaException as exc:
        raise _login_refused(consumer, options) or KafkaReadError(
            f"cannot list topics at {options.bootstrap_servers}: {exc}") from None
    topics = metadata.topics
    found: list[TP] = []
    if options.pattern is not None:
        regex = re.compile(options.pattern)
        for name, meta in topics.items():
            if regex.fullmatch(name) and not name.startswith("__"):
                found.extend((name, p) for p in meta.partitions)
    elif options.assignment is not None:
        for name, partitions in options.assignment.items():
            if name not in topics:
                _hidden_or_missing(consumer, options, name, timeout)
            missing = set(partitions) - set(topics[name].partitions)
            if missing:
                raise SourceOptionError("assign", f"topic {name!r} has no partitions {sorted(missing)} "
                                                  f"(it has {len(topics[name].partitions)})")
            found.extend((name, p) for p in partitions)
    else:
        for name in options.topics:
            meta = topics.get(name)
            if meta is not None and (denied := refusal(meta.error, options, name, "DESCRIBE")) is not None:
                raise denied
            if meta is None or (meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
                _hidden_or_missing(consumer, options, name, timeout)
            found.extend((name, p) for p in meta.partitions)
    return sorted(found)


def _hidden_or_missing(consumer: Consumer, options: SourceOptions, name: str, timeout: float) -> NoReturn:
    """Raise for a topic the listing lacks: not authorized (asked by name on a secured cluster), else not found.

    A listing hides the topics a user may not describe. Only on a secured connection is the topic asked
    for by name: consumers never ask for auto-creation, and Apache Kafka honours that, but Tansu creates
    any topic asked for by name (DESIGN §4).
    """
    if secured(options.kafka_params):
        try:
            meta = consumer.list_topics(topic=name, timeout=timeout).topics.get(name)
        except KafkaException:
            meta = None
        if meta is not None and (denied := refusal(meta.error, options, name, "DESCRIBE")) is not None:
            raise denied
    raise TopicNotFoundError(name)


def watermarks(consumer: Consumer, tps: Iterable[TP], hints: dict[TP, int] | None = None,
               timeout: float = 30.0, committed: bool = False, options: SourceOptions | None = None
               ) -> dict[TP, tuple[int, int]]:
    """``(low, high)`` watermarks of each partition, the high one learnt from a fetch.

    With ``committed`` (a read_committed consumer) the end is the last stable offset: where the
    fetch reports the partition's end, i.e. before the first record of a transaction still open.
    The high watermark is past such records, which a read_committed reader is never given.

    Parameters:
        consumer: a consumer from :func:`open_consumer` (its assignment is replaced).
        tps: the partitions.
        hints: offsets known to be at or below the end (e.g. a previous end); the fetch
            starts just before ``max(hint, ListOffsets latest)`` (read_committed: before ListOffsets latest).
        timeout: seconds to wait for every partition's first fetch.
        options: the source's options (what a refusal names: the user; its group).

    Raises:
        KafkaReadError: some partition did not answer in time.
        KafkaAuthorizationError: the broker refused to describe or fetch a topic.
    """
    tps = list(tps)
    if not tps:
        return {}
    hints = hints or {}
    lows: dict[TP, int] = {}
    assignment = []
    for tp in tps:
        try:
            low, listed_high = consumer.get_watermark_offsets(TopicPartition(*tp), timeout=timeout, cached=False)
        except KafkaException as exc:
            raise refusal(exc.args[0], options, tp[0], "DESCRIBE") or KafkaReadError(
                f"cannot query offsets of {tp[0]}-{tp[1]}: {exc}") from None
        lows[tp] = low
        listed = max(low, listed_high)
        # read_committed: the end event comes only at the last stable offset (ListOffsets' answer here), so a hint
        # past it is no start
        start = (listed if committed else max(listed, hints.get(tp, 0))) - 1
        assignment.append(TopicPartition(tp[0], tp[1], start if start >= low else OFFSET_BEGINNING))
    consumer.assign(assignment)
    pending = set(tps)
    stable: dict[TP, int] = {}  # committed: the offset each partition's end-of-partition event names
    deadline = time.monotonic() + timeout
    try:
        while pending:
            if time.monotonic() > deadline:
                missing = ", ".join(f"{t}-{p}" for t, p in sorted(pending))
                raise KafkaReadError(f"no fetch answer within {timeout:.0f} s for {missing}")
            for msg in consumer.consume(num_messages=_CONSUME_BATCH, timeout=0.05):
                err = msg.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    denied = refusal(err, options, msg.topic() or ",".join(sorted({t for t, _ in pending})))
                    if denied is not None:
                        raise denied
                    if err.code() == KafkaError._AUTO_OFFSET_RESET or not err.fatal():
                        log.debug("watermark probe: %s", err)
                        continue
                    raise KafkaReadError(f"watermark probe failed: {err}")
                where = (msg.topic() or "", msg.partition() or 0)
                if not committed:
                    pending.discard(where)
                elif err is not None:  # end of partition, at the last stable offset
                    stable[where] = msg.offset() or 0
                    pending.discard(where)
        result: dict[TP, tuple[int, int]] = {}
        for tp in tps:  # the watermarks that came with the fetches
            low, high = consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)
            if high < 0:
                raise KafkaReadError(f"no high watermark arrived for {tp[0]}-{tp[1]}")
            result[tp] = (lows[tp] if low < 0 else low, min(high, stable.get(tp, high)))
        return result
    finally:
        consumer.unassign()


def offsets_for_times(options: SourceOptions, times: dict[TP, int], timeout: float = 30.0) -> dict[TP, int | None]:
    """The first offset of each partition whose timestamp is at or after its time (``None``: no such record).

    The broker's ListOffsets by timestamp decides; Kafka compares record timestamps
    (CreateTime or LogAppendTime), Tansu the time each batch was written (DESIGN §4).
    An answer is trusted only if the record there is at or after the time (Tansu answers
    ``0`` instead of "none" for a time after its last batch): else the partition has none.

    Raises:
        KafkaReadError: the broker did not answer.
    """
    if not times:
        return {}
    consumer = open_consumer(options, "times")
    try:
        answered = consumer.offsets_for_times([TopicPartition(t, p, ts) for (t, p), ts in sorted(times.items())],
                                              timeout=timeout)
    except KafkaException as exc:
        topics = ",".join(sorted({t for t, _ in times}))
        raise refusal(exc.args[0], options, topics, "DESCRIBE") or KafkaReadError(
            f"offsets_for_times failed at {options.bootstrap_servers}: {exc}") from None
    finally:
        consumer.close()
    result: dict[TP, int | None] = {}
    for tp in answered:
        if tp.error is not None:
            raise refusal(tp.error, options, tp.topic, "DESCRIBE") or KafkaReadError(
                f"offsets_for_times {tp.topic}-{tp.partition}: {tp.error}")
        result[(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else None
    stamps = first_timestamps(options, {tp: o for tp, o in result.items() if o is not None})
    for key, stamp in stamps.items():
        if stamp is None or stamp < times[key]:
            result[key] = None
    return result


def first_timestamps(options: SourceOptions, offsets: dict[TP, int], timeout: float = 30.0) -> dict[TP, int | None]:
    """The timestamp (epoch ms) of the record at each given offset (``None``: no record there, e.g. at the end)."""
    if not offsets:
        return {}
    consumer = open_consumer(options, "times", **{"fetch.wait.max.ms": 10, "auto.offset.reset": "latest"})
    found: dict[TP, int | None] = {}
    try:
        consumer.assign([TopicPartition(t, p, o) for (t, p), o in offsets.items()])
        deadline = time.monotonic() + timeout
        while len(found) < len(offsets):
            if time.monotonic() > deadline:
                missing = ", ".join(f"{t}-{p}" for t, p in sorted(set(offsets) - set(found)))
                raise KafkaReadError(f"no record arrived within {timeout:.0f} s for {missing}")
            for msg in consumer.consume(num_messages=len(offsets), timeout=0.1):
                topic, partition, err = msg.topic(), msg.partition(), msg.error()
                denied = refusal(err, options, topic or ",".join(sorted({t for t, _ in offsets})))
                if denied is not None:
                    raise denied
                if topic is None or partition is None:  # an error of the client, of no partition
                    if err is not None and err.fatal():
                        raise KafkaReadError(f"{topic}-{partition}: {err.str()}")
                    continue
                tp = (topic, partition)
                if tp in found:
                    continue
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        found[tp] = None
                    elif err.fatal():
                        raise KafkaReadError(f"{tp[0]}-{tp[1]}: {err.str()}")
                    continue
                found[tp] = msg.timestamp()[1] if msg.offset() == offsets[tp] else None
        return found
    finally:
        consumer.close()


def log_ends(options: SourceOptions, tps: Iterable[TP], hints: dict[TP, int] | None = None) -> dict[TP, tuple[int, int]]:
    """:func:`watermarks` with a throw-away consumer, retried ``fetchOffset.numRetries`` times."""
    attempts = options.fetch_retries + 1
    for attempt in range(attempts):
        # a stale hint past the end resets to ListOffsets latest, which is at or below the end
        consumer = open_consumer(options, "probe", **{"fetch.wait.max.ms": 10, "auto.offset.reset": "latest"})
        try:
            return watermarks(consumer, tps, hints, timeout=min(30.0, options.poll_timeout_ms / 1000),
                              committed=options.read_committed, options=options)
        except KafkaAuthorizationError:
            raise  # asking again will not grant the ACL
        except KafkaReadError:
            if attempt + 1 == attempts:
                raise
            time.sleep(options.fetch_retry_interval_ms / 1000)
        finally:
            consumer.close()
    raise AssertionError("unreachable")


# -- reading one offset range ------------------------------------------------------------
def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema PySpark expects from a Python data source with Spark's Kafka source schema."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(kafka_schema(include_headers), timezone="UTC")


def to_record_batch(messages: list[Message], topic: str, partition: int, schema: pa.Schema) -> pa.RecordBatch:
    """One Arrow batch in Spark's Kafka source layout from fetched messages (no errors among them)."""
    n = len(messages)
    stamps = list(map(Message.timestamp, messages))
    kinds = [kind for kind, _ in stamps]
    millis = [ms for _, ms in stamps]
    # confluent-kafka: 0 = not available, 1 = CreateTime, 2 = LogAppendTime; Kafka ids are one less
    timestamp_type = pc.subtract(pa.array(kinds, pa.int32()), pa.scalar(1, pa.int32()))
    timestamp = pc.multiply(pa.array(millis, pa.int64()), pa.scalar(1000, pa.int64())).cast(TIMESTAMP_TYPE)
    columns = [
        pa.array(list(map(Message.key, messages)), pa.binary()),
        pa.array(list(map(Message.value, messages)), pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(list(map(Message.offset, messages)), pa.int64()),
        timestamp,
        timestamp_type,
    ]
    if len(schema) == 8:
        headers = [h or None for h in map(Message.headers, messages)]  # Spark: null when a record has none
        columns.append(pa.array(headers, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC: each consume() allocates thousands of tracked objects that it
    would rescan over and over (measured: -25% read throughput). Nothing here makes cycles,
    and the GC runs again before each batch is handed to Spark."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_range(options: SourceOptions, topic: str, partition: int, start: int, end: int) -> Iterator[pa.RecordBatch]:
    """Records ``start <= offset < end`` of one partition as Arrow batches.

    ``start`` may be ``-2`` (earliest). The read stops at ``end`` or at the end of
    the log once it is at or past ``end`` (offsets taken by transaction markers
    or compaction leave gaps). Records missing within the poll timeout raise
    :class:`DataLossError` with ``failOnDataLoss`` (the default), else end the range.
    """
    schema = arrow_schema(options.include_headers)
    if 0 <= end <= start:
        return
    reset = "error" if options.fail_on_data_loss else "earliest"
    consumer = open_consumer(options, "reader", **{"auto.offset.reset": reset})
    poll_timeout = options.poll_timeout_ms / 1000
    try:
        consumer.assign([TopicPartition(topic, partition, start if start >= 0 else OFFSET_BEGINNING)])
        position = start
        deadline = time.monotonic() + poll_timeout
        while position < end:
            with _gc_paused():
                batch, position, got_any = _next_batch(consumer, options, topic, partition, position, end, schema)
            if batch is not None:
                yield batch
            if got_any:
                deadline = time.monotonic() + poll_timeout
            elif time.monotonic() > deadline:
                problem = f"{topic}-{partition}: no records for offsets {position}..{end - 1} within {poll_timeout:.0f} s"
                if options.fail_on_data_loss:
                    raise DataLossError(problem + " (set failOnDataLoss=false to skip them)")
                log.warning("%s; skipping", problem)
                return
    finally:
        consumer.close()


def _offset(msg: Message) -> int:
    """The offset of a record or of a partition-EOF event (both carry one)."""
    offset = msg.offset()
    assert offset is not None
    return offset


def _next_batch(consumer: Consumer, options: SourceOptions, topic: str, partition: int, position: int, end: int,
                schema: pa.Schema) -> tuple[pa.RecordBatch | None, int, bool]:
    """One ``consume()``: ``(batch or None, next position, whether the broker sent anything)``."""
    # consume() waits until it has all it asked for: ask for no more than the range still holds
    wanted = _CONSUME_BATCH if position < 0 else max(1, min(_CONSUME_BATCH, end - position))
    messages = consumer.consume(num_messages=wanted, timeout=min(0.2, options.poll_timeout_ms / 1000))
    if not messages:
        return None, position, False
    if any(map(Message.error, messages)):
        good = []
        for msg in messages:
            err = msg.error()
            if err is None:
                good.append(msg)
            elif err.code() == KafkaError._PARTITION_EOF:
                position = max(position, _offset(msg))  # the log ends here
            elif err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                raise DataLossError(f"{topic}-{partition}: offset {position} is out of range ({err.str()}); "
                                    "set failOnDataLoss=false to read from the earliest offset instead")
            elif (denied := refusal(err, options, topic)) is not None:
                raise denied
            elif err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                pass  # logged once by refusal(): the reader never uses its group
            elif err.fatal():
                raise KafkaReadError(f"{topic}-{partition}: {err.str()}")
            else:
                log.warning("%s-%s: %s", topic, partition, err.str())
        messages = good
    if not messages:
        return None, position, True
    last = _offset(messages[-1])
    if last >= end:
        offsets = list(map(_offset, messages))
        messages = messages[:bisect.bisect_left(offsets, end)]
    batch = to_record_batch(messages, topic, partition, schema) if messages else None
    return batch, max(position, last + 1), True
