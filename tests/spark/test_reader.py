"""The Kafka reader against a real broker: batch exactly-once, Spark's schema, options, streaming restarts.

These pin the Python reader (``ROCKETKAFKA_SPARK_ENGINE=python``); test_parity.py holds it equal to Spark's JVM source."""

from __future__ import annotations

import json
import os
import time
from collections import Counter

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from rocketkafka.errors import TopicNotFoundError
from rocketkafka.names import Header
from rocketkafka.spark import (
    ENGINE_ENV,
    EngineUnavailableError,
    SourceOptionError,
    choose_engine,
    jvm_kafka_available,
    read_message_stream,
    read_messages,
)
from tests.spark.conftest import Record, rows_by, run_available_now

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def python_engine(monkeypatch):
    monkeypatch.setenv(ENGINE_ENV, "python")

#: Spark's Kafka source schema as the Structured Streaming + Kafka Integration Guide documents it.
SPARK_KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),
    StructField("topic", StringType(), True),
    StructField("partition", IntegerType(), True),
    StructField("offset", LongType(), True),
    StructField("timestamp", TimestampType(), True),
    StructField("timestampType", IntegerType(), True),
])
SPARK_KAFKA_SCHEMA_WITH_HEADERS = StructType([
    *SPARK_KAFKA_SCHEMA.fields,
    StructField("headers", ArrayType(StructType([
        StructField("key", StringType(), True),
        StructField("value", BinaryType(), True),
    ]), True), True),
])

BASE_TS = 1_700_000_000_000


def test_batch_read_is_exactly_once_with_sparks_schema(spark, rk_topic, produce, source):
    topic = rk_topic(partitions=8)
    n = 100_000
    records = [Record(value=b"v%07d" % i + b"x" * 92, key=(b"k%d" % i) if i % 10 else None, partition=i % 8,
                      headers=[(Header.MSG_ID, b"id-%d" % i), ("n", str(i).encode())] if i % 3 else [],
                      timestamp=BASE_TS + i)
               for i in range(n)]
    produce(topic, records)

    plain = read_messages(spark, source(topic))
    assert plain.schema == SPARK_KAFKA_SCHEMA
    df = read_messages(spark, source(topic), includeHeaders=True)
    assert df.schema == SPARK_KAFKA_SCHEMA_WITH_HEADERS
    assert df.rdd.getNumPartitions() == 8  # one Spark partition per Kafka partition

    started = time.perf_counter()
    got = list(rows_by(df, "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"))
    elapsed = time.perf_counter() - started
    print(f"\nbatch read {n} rows with headers in {elapsed:.2f} s ({n / elapsed:,.0f} rows/s incl. collect)")

    assert len(got) == n
    assert len({(p, o) for _, _, _, p, o, *_ in got}) == n  # every record once
    by_value = {value: row for row in got for value in [row[1]]}
    assert len(by_value) == n
    offsets_seen = Counter()
    for i, expected in enumerate(records):
        key, value, t, partition, offset, ts, ts_type, headers = by_value[expected.value]
        assert (key, t, partition) == (expected.key, topic, expected.partition)
        assert int(ts.timestamp() * 1000) == expected.timestamp and ts_type == 0  # CreateTime
        if expected.headers:
            assert [(h["key"], h["value"]) for h in headers] == expected.headers
        else:
            assert headers is None  # Spark: null when a record has no headers
        offsets_seen[partition] += 1
    # offsets are dense from 0 in every partition, in produce order
    for partition in range(8):
        offsets = sorted(o for _, _, _, p, o, *_ in got if p == partition)
        assert offsets == list(range(offsets_seen[partition]))
    assert plain.count() == n


def test_offset_options_select_exact_ranges(spark, rk_topic, produce, source):
    topic = rk_topic(partitions=3)
    produce(topic, [Record(value=b"%d" % i, partition=i % 3) for i in range(300)])  # 100 per partition
    starting = {topic: {"0": 10, "1": -2, "2": 95}}
    ending = {topic: {"0": 20, "1": 5, "2": -1}}
    df = read_messages(spark, source(topic), startingOffsets=starting, endingOffsets=ending)
    got = sorted(rows_by(df, "partition", "offset"))
    assert got == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(0, 5)] + [(2, o) for o in range(95, 100)]

    assigned = read_messages(spark, {"kafka.bootstrap.servers": source(topic)["kafka.bootstrap.servers"],
                                     "assign": json.dumps({topic: [1]})})
    assert {p for (p,) in rows_by(assigned, "partition")} == {1} and assigned.count() == 100

    pattern = read_messages(spark, {"kafka.bootstrap.servers": source(topic)["kafka.bootstrap.servers"],
                                    "subscribePattern": topic.replace("-", ".")})
    assert pattern.count() == 300

    split = read_messages(spark, source(topic), minPartitions=7)
    assert split.rdd.getNumPartitions() >= 7 and split.count() == 300
    capped = read_messages(spark, source(topic), maxRecordsPerPartition=30)
    assert capped.rdd.getNumPartitions() == 12 and sorted(rows_by(capped, "partition", "offset")) == sorted(
        rows_by(read_messages(spark, source(topic)), "partition", "offset"))


def test_bad_options_fail_before_any_job(spark, rk_topic, source):
    topic = rk_topic(partitions=2)
    jobs_before = len(spark.sparkContext.statusTracker().getJobIdsForGroup())
    with pytest.raises(SourceOptionError, match="unknown option"):
        read_messages(spark, source(topic), startingOfsets="earliest")
    with pytest.raises(SourceOptionError, match="startingOffsets"):
        read_messages(spark, source(topic), startingOffsets='{"%s": {"0": 1' % topic)
    with pytest.raises(SourceOptionError, match="every partition"):
        read_messages(spark, source(topic), startingOffsets={topic: {"0": 0}})
    with pytest.raises(SourceOptionError, match="latest"):
        read_messages(spark, source(topic), startingOffsets="latest")
    with pytest.raises(SourceOptionError, match="streaming"):
        read_message_stream(spark, source(topic), endingOffsets="latest")
    with pytest.raises(SourceOptionError, match="exactly one"):
        read_messages(spark, {**source(topic), "assign": json.dumps({topic: [0]})})
    with pytest.raises(SourceOptionError, match="auto.offset.reset"):
        read_messages(spark, source(topic), **{"kafka.auto.offset.reset": "earliest"})
    with pytest.raises(SourceOptionError, match="kafka"):
        read_messages(spark, source(topic), **{"kafka.no.such.setting": "1"})
    with pytest.raises(TopicNotFoundError, match="no-such-topic"):
        read_messages(spark, source("no-such-topic-" + topic))
    with pytest.raises(TopicNotFoundError):
        read_message_stream(spark, source("no-such-topic-" + topic))
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup()) == jobs_before
    # the data source itself checks at load() too, for code that bypasses read_messages
    with pytest.raises(Exception, match="unknown option"):
        spark.read.format("rocketkafka-kafka").options(**source(topic), bogus="1").load()
    from rocketkafka.admin import TopicAdmin
    from rocketkafka.config import Settings

    # a missing topic was never auto-created by the checks
    assert not TopicAdmin(Settings(bootstrap_servers=source(topic)["kafka.bootstrap.servers"])).exists(
        "no-such-topic-" + topic)


def test_engine_choice(spark, monkeypatch, rk_topic, source):
    import rocketkafka.spark.engine as engine

    monkeypatch.delenv(ENGINE_ENV)
    assert choose_engine(spark, "python") == "python"
    with pytest.raises(SourceOptionError, match="engine"):
        choose_engine(spark, "scala")
    if jvm_kafka_available(spark):  # spark_session() fetched the connector: auto is Spark's own source
        assert choose_engine(spark, "auto") == choose_engine(spark, None) == "jvm"
    monkeypatch.setattr(engine, "JVM_PROVIDER", "org.example.NoSuchProvider")  # as in a session without it
    assert choose_engine(spark, "auto") == "python"
    with pytest.raises(EngineUnavailableError, match="spark-sql-kafka-0-10_2.13:"):
        choose_engine(spark, "jvm")
    monkeypatch.setenv(ENGINE_ENV, "jvm")
    with pytest.raises(EngineUnavailableError):
        read_messages(spark, source(rk_topic(partitions=1)))


def _stream_once(spark, options: dict, checkpoint: str, sink: list, max_per_trigger: int | None = None) -> list[int]:
    """One availableNow run; returns the batch sizes (rows per micro-batch with data)."""
    extra = {"maxOffsetsPerTrigger": max_per_trigger} if max_per_trigger else {}
    stream = read_message_stream(spark, options, startingOffsets="earliest", **extra)
    sizes: list[int] = []

    def collect(batch, batch_id):
        rows = [(r.partition, r.offset, r.value) for r in batch.select("partition", "offset", "value").collect()]
        if rows:
            sizes.append(len(rows))
        sink.extend(rows)

    run_available_now(stream.writeStream.foreachBatch(collect).option("checkpointLocation", checkpoint)
                      .trigger(availableNow=True), 120)
    return sizes


@pytest.mark.alone  # a stream of ours: Spark's fixed 10 s for its Python worker (conftest)
def test_streaming_available_now_resumes_from_checkpoint(spark, rk_topic, produce, source, tmp_path):
    topic = rk_topic(partitions=4)
    checkpoint = str(tmp_path / "checkpoint")
    produce(topic, [Record(value=b"first-%d" % i, partition=i % 4) for i in range(1000)])
    first: list = []
    _stream_once(spark, source(topic), checkpoint, first)
    assert len(first) == 1000 and {v for _, _, v in first} == {b"first-%d" % i for i in range(1000)}

    produce(topic, [Record(value=b"second-%d" % i, partition=i % 4) for i in range(500)])
    second: list = []
    sizes = _stream_once(spark, source(topic), checkpoint, second, max_per_trigger=200)
    assert sorted(v for _, _, v in second) == sorted(b"second-%d" % i for i in range(500))  # only the new ones
    assert sizes and max(sizes) <= 200 and sum(sizes) == 500  # maxOffsetsPerTrigger held, all read
    assert not {(p, o) for p, o, _ in first} & {(p, o) for p, o, _ in second}

    third: list = []
    _stream_once(spark, source(topic), checkpoint, third)  # nothing new: nothing read
    assert third == []
    offsets = sorted(os.listdir(os.path.join(checkpoint, "offsets")))
    latest = open(os.path.join(checkpoint, "offsets", offsets[-1])).read().splitlines()[-1]
    assert json.loads(latest) == {topic: {str(p): 375 for p in range(4)}}  # Spark's Kafka offset JSON
