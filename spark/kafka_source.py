"""Spark's Kafka source, rewritten with PySpark's Python Data Source API.

Registered as ``rocketkafka-kafka`` (Spark refuses a Python source named
``kafka``); same options (:mod:`rocketkafka.spark.options`), same schema
(:func:`kafka_schema`), batch and streaming::

    spark.dataSource.register(KafkaDataSource)
    df = (spark.read.format("rocketkafka-kafka")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders").option("includeHeaders", "true").load())

Plans one Spark input partition per Kafka partition and offset range (more with
``minPartitions`` / ``maxRecordsPerPartition``); ``read()`` yields Arrow batches.
Streaming offsets are Spark's Kafka offset JSON, ``{"topic": {"0": 42}}`` (the
next offset to read per partition), so a checkpoint restarts exactly where the
last committed micro-batch ended.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from rocketkafka.spark.errors import DataLossError, SourceOptionError
from rocketkafka.spark.kafka_io import discover, log_ends, offsets_for_times, open_consumer, read_range
from rocketkafka.spark.options import EARLIEST, LATEST, SourceOptions, parse_options
from rocketkafka.spark.schema import kafka_schema
from rocketkafka.topic_partition import TP

log = logging.getLogger(__name__)

#: Short name of the Python Kafka source.
SOURCE_NAME = "rocketkafka-kafka"

Offsets = dict[TP, int]


class KafkaRange(InputPartition):
    """Offsets ``start <= o < end`` of one Kafka partition (``start`` -2: from the earliest)."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end

    def __repr__(self) -> str:
        return f"KafkaRange({self.topic}-{self.partition} [{self.start}, {self.end}))"


# -- offsets ---------------------------------------------------------------------------
def encode_offsets(offsets: Offsets) -> dict[str, dict[str, int]]:
    """Spark's Kafka offset JSON object, topics and partitions in a stable order."""
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = int(offset)
    return result


def decode_offsets(data: dict) -> Offsets:
    """Inverse of :func:`encode_offsets`."""
    return {(topic, int(p)): int(o) for topic, parts in (data or {}).items() for p, o in parts.items()}


def resolve_offsets(spec: str | dict[str, dict[int, int]], name: str, tps: list[TP],
                    marks: dict[TP, tuple[int, int]]) -> Offsets:
    """Concrete offsets for ``earliest`` / ``latest`` / JSON (all partitions must be named, as in Spark)."""
    if spec == "earliest":
        return {tp: marks[tp][0] for tp in tps}
    if spec == "latest":
        return {tp: marks[tp][1] for tp in tps}
    assert isinstance(spec, dict)  # parse_offsets: earliest, latest or the JSON's dict
    named = _every_partition(spec, name, tps, "JSON offsets must name every partition (use -2 for earliest, -1 for latest)")
    return {tp: marks[tp][0] if named[tp] == EARLIEST else marks[tp][1] if named[tp] == LATEST else named[tp]
            for tp in tps}


def times_by_partition(spec: int | dict[str, dict[int, int]], name: str, tps: list[TP]) -> dict[TP, int]:
    """Epoch-ms time per partition: one time for all, or Spark's JSON (which must name every partition)."""
    if isinstance(spec, int):
        return dict.fromkeys(tps, spec)
    named = _every_partition(spec, name, tps, "JSON timestamps must name every partition")
    return {tp: named[tp] for tp in tps}


def _every_partition(spec: dict[str, dict[int, int]], name: str, tps: list[TP], rule: str) -> dict[TP, int]:
    """Spark's per-partition JSON as ``{(topic, partition): value}``; it must name each of ``tps`` and no other."""
    named = {(t, p): value for t, parts in spec.items() for p, value in parts.items()}
    missing = sorted(set(tps) - set(named))
    if missing:
        raise SourceOptionError(name, f"{rule}; missing {', '.join(f'{t}-{p}' for t, p in missing)}")
    unknown = sorted(set(named) - set(tps))
    if unknown:
        raise SourceOptionError(name, f"partitions {', '.join(f'{t}-{p}' for t, p in unknown)} do not exist")
    return named


def _times_name(spec: int | dict, single: str, by_partition: str) -> str:
    return single if isinstance(spec, int) else by_partition


def resolve_start(options: SourceOptions, tps: list[TP], marks: dict[TP, tuple[int, int]]) -> Offsets:
    """Starting offsets: from ``startingTimestamp`` / ``startingOffsetsByTimestamp`` when given, else ``startingOffsets``.

    A partition without a record at or after its time fails the query
    (``startingOffsetsByTimestampStrategy=error``, Spark's default) or starts at its end (``latest``).
    """
    if options.starting_times is None:
        return resolve_offsets(options.starting, "startingOffsets", tps, marks)
    name = _times_name(options.starting_times, "startingTimestamp", "startingOffsetsByTimestamp")
    wanted = times_by_partition(options.starting_times, name, tps)
    found = offsets_for_times(options, wanted)
    starts: Offsets = {}
    for tp in tps:
        low, high = marks[tp]
        offset = found.get(tp)
        if offset is None:
            if options.timestamp_strategy != "latest":
                raise SourceOptionError(name, f"{tp[0]}-{tp[1]} has no record at or after {wanted[tp]} (epoch ms); "
                                              "set startingOffsetsByTimestampStrategy=latest to start at its end")
            offset = high
        starts[tp] = min(max(offset, low), high)
    return starts


def resolve_end(options: SourceOptions, tps: list[TP], marks: dict[TP, tuple[int, int]]) -> Offsets:
    """Ending offsets: from ``endingTimestamp`` / ``endingOffsetsByTimestamp`` when given (a partition
    without a record at or after its time ends at its end, as in Spark), else ``endingOffsets``."""
    if options.ending_times is None:
        return resolve_offsets(options.ending, "endingOffsets", tps, marks)
    name = _times_name(options.ending_times, "endingTimestamp", "endingOffsetsByTimestamp")
    wanted = times_by_partition(options.ending_times, name, tps)
    found = offsets_for_times(options, wanted)
    return {tp: min(max(marks[tp][1] if (offset := found.get(tp)) is None else offset, marks[tp][0]), marks[tp][1])
            for tp in tps}


def split_ranges(ranges: list[KafkaRange], min_partitions: int | None, max_records: int | None) -> list[KafkaRange]:
    """Split ranges for ``maxRecordsPerPartition`` and ``minPartitions`` (Spark's calculator)."""
    def divide(r: KafkaRange, parts: int) -> list[KafkaRange]:
        size = r.end - r.start
        if parts <= 1 or r.start < 0 or size <= 1:
            return [r]
        parts = min(parts, size)
        bounds = [r.start + size * i // parts for i in range(parts + 1)]
        return [KafkaRange(r.topic, r.partition, a, b) for a, b in zip(bounds, bounds[1:]) if b > a]

    if max_records:
        ranges = [piece for r in ranges for piece in divide(r, -(-(r.end - r.start) // max_records))]
    if min_partitions and len(ranges) < min_partitions:
        sizes = [max(r.end - r.start, 0) if r.start >= 0 else 0 for r in ranges]
        total = sum(sizes)
        if total > 0:
            # every range gets its share of min_partitions (at least 1); the parts left over by
            # rounding down go to the largest remainders, so the plan reaches min_partitions
            shares = [s * min_partitions / total for s in sizes]
            parts = [max(int(share), 1) for share in shares]
            by_remainder = sorted(range(len(ranges)), key=lambda i: shares[i] - int(shares[i]), reverse=True)
            for i in by_remainder[:max(min_partitions - sum(parts), 0)]:
                parts[i] += 1
            ranges = [piece for r, n in zip(ranges, parts) for piece in divide(r, n)]
    return ranges


def plan_batch(options: SourceOptions) -> list[KafkaRange]:
    """Input partitions of a batch read: resolve starting/ending offsets against the log now."""
    consumer = open_consumer(options, "planner")
    try:
        tps = discover(consumer, options)
    finally:
        consumer.close()
    if not tps:
        return []
    marks = log_ends(options, tps)
    starts = resolve_start(options, tps, marks)
    ends = resolve_end(options, tps, marks)
    ranges = []
    for tp in tps:
        low, high = marks[tp]
        start, end = starts[tp], ends[tp]
        if start < low:
            if options.fail_on_data_loss:
                raise DataLossError(f"{tp[0]}-{tp[1]}: starting offset {start} is below the earliest offset {low} "
                                    "(records deleted); set failOnDataLoss=false to start at the earliest")
            start = low
        if end > high:
            raise SourceOptionError("endingOffsets", f"{tp[0]}-{tp[1]}: offset {end} is past the end of the log ({high})")
        if start > end:
            raise SourceOptionError("startingOffsets", f"{tp[0]}-{tp[1]}: starting offset {start} is after the ending offset {end}")
        if end > start:
            ranges.append(KafkaRange(tp[0], tp[1], start, end))
    return split_ranges(ranges, options.min_partitions, options.max_records_per_partition)


def rate_limit(starts: Offsets, ends: Offsets, limit: int) -> Offsets:
    """Spark's ``maxOffsetsPerTrigger`` split: each partition gets its share of ``limit`` by lag."""
    sizes = {tp: end - starts[tp] for tp, end in ends.items() if tp in starts and end - starts[tp] > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(ends)
    limited = {}
    for tp, end in ends.items():
        if tp not in sizes:
            limited[tp] = end
            continue
        prorate = limit * (sizes[tp] / total)
        share = int(prorate) if prorate >= 1 else (1 if prorate > 0 else 0)
        limited[tp] = min(end, starts[tp] + share)
    return limited


# -- readers ---------------------------------------------------------------------------
def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, KafkaRange):  # Spark's single placeholder partition of an empty plan
        return iter(())
    return read_range(options, partition.topic, partition.partition, partition.start, partition.end)


class KafkaBatchReader(DataSourceReader):
    """Batch reads: ranges planned from the log at query planning time."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[KafkaRange]:
        return plan_batch(self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reads: per-partition offsets, ``maxOffsetsPerTrigger``, ``availableNow``."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._target: Offsets | None = None  # availableNow: the ends seen when the query started
        self._latest: Offsets = {}

    def _ends(self, known: Offsets) -> tuple[list[TP], dict[TP, tuple[int, int]]]:
        consumer = open_consumer(self.options, "planner")
        try:
            tps = discover(consumer, self.options)
        finally:
            consumer.close()
        marks = log_ends(self.options, tps, hints={**known, **self._latest})
        self._latest.update({tp: high for tp, (_, high) in marks.items()})
        return tps, marks

    def initialOffset(self) -> dict:
        tps, marks = self._ends({})
        return encode_offsets(resolve_start(self.options, tps, marks))

    def prepareForTriggerAvailableNow(self) -> None:
        _, marks = self._ends({})
        self._target = {tp: high for tp, (_, high) in marks.items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = decode_offsets(start)
        tps, marks = self._ends(begin)
        starts = {tp: begin.get(tp, marks[tp][0]) for tp in tps}  # new partitions: from the earliest
        ends: Offsets = {}
        for tp in tps:
            high = marks[tp][1]
            if self._target is not None:
                high = min(high, self._target.get(tp, starts[tp]))
            if high < starts[tp]:
                if self.options.fail_on_data_loss:
                    raise DataLossError(f"{tp[0]}-{tp[1]}: the log ends at {high}, before the next offset to read "
                                        f"{starts[tp]} (topic re-created?); set failOnDataLoss=false to continue from there")
                log.warning("%s-%s went back from %s to %s; continuing from %s", tp[0], tp[1], starts[tp], high, high)
            ends[tp] = high
        if isinstance(limit, ReadMaxRows):
            ends = rate_limit(starts, ends, limit.max_rows)
        for tp, offset in begin.items():  # partitions no longer listed keep their position
            ends.setdefault(tp, offset)
        return encode_offsets(ends)

    def reportLatestOffset(self) -> dict | None:
        return encode_offsets(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> list[KafkaRange]:
        begin, until = decode_offsets(start), decode_offsets(end)
        ranges = []
        for tp, stop in sorted(until.items()):
            first = begin.get(tp, EARLIEST)
            if stop > first or (first == EARLIEST and stop > 0):
                ranges.append(KafkaRange(tp[0], tp[1], first, stop))
        return split_ranges(ranges, self.options.min_partitions, self.options.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def commit(self, end: dict) -> None:
        pass  # nothing is committed to Kafka; Spark's checkpoint holds the offsets


def parse_any_mode(options) -> SourceOptions:
    """Check options that must hold for both ``read`` and ``readStream`` (mode rules come later)."""
    try:
        return parse_options(options, streaming=False)
    except SourceOptionError as batch_error:
        try:
            return parse_options(options, streaming=True)
        except SourceOptionError:
            raise batch_error from None


class KafkaDataSource(DataSource):
    """The ``rocketkafka-kafka`` data source (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return kafka_schema(parse_any_mode(self.options).include_headers)

    def _check_schema(self, schema: StructType, options: SourceOptions) -> None:
        expected = kafka_schema(options.include_headers)
        if schema != expected:
            raise SourceOptionError("schema", f"the Kafka source has a fixed schema; got {schema.simpleString()}, "
                                              f"expected {expected.simpleString()}")

    def reader(self, schema: StructType) -> KafkaBatchReader:
        options = parse_options(self.options, streaming=False)
        self._check_schema(schema, options)
        return KafkaBatchReader(options)

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        options = parse_options(self.options, streaming=True)
        self._check_schema(schema, options)
        return KafkaStreamReader(options)
