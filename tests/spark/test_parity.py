"""Spark source parity on the real broker: Spark's JVM source and ours give the same rows (batch options,
a restarted streaming query into a file sink); register(), the timestamp options, kafka.group.id, one-line errors."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql.datasource import DataSource

from rocketkafka.spark import (
    SourceOptionError,
    jvm_kafka_available,
    read_message_stream,
    read_messages,
    register,
    spark_error_line,
)
from tests.spark.conftest import Record, rows_by, run_available_now

pytestmark = pytest.mark.integration

COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp", "timestampType")
ENGINES = ("jvm", "python")


@pytest.fixture
def jvm(spark):
    if not jvm_kafka_available(spark):
        pytest.skip("Spark's Kafka connector is not in this session (no mvn, or ROCKETKAFKA_SPARK_CONNECTOR=off)")
    return spark


def _rows(df, headers: bool) -> list[tuple]:
    columns = COLUMNS + (("headers",) if headers else ())
    return sorted(rows_by(df, *columns), key=lambda r: (r[0], r[1], r[2]))


def _both(spark, options: dict, **more) -> list[tuple]:
    """The rows both engines read for the same options; fails unless they are equal row for row."""
    headers = str(more.get("includeHeaders", "false")).lower() == "true"
    by_engine = {e: _rows(read_messages(spark, options, engine=e, **more), headers) for e in ENGINES}
    assert by_engine["jvm"] == by_engine["python"], (more, len(by_engine["jvm"]), len(by_engine["python"]))
    return by_engine["jvm"]


def _mixed(topic: str, partitions: int, n: int, start: int = 0) -> list[Record]:
    """Keys, null keys, null values, headers (repeated names, none at all), set CreateTimes (recent: Kafka's
    retention would delete records stamped days ago)."""
    base = int(time.time() * 1000) - 60_000
    records = []
    for i in range(start, start + n):
        headers = [] if i % 5 == 0 else [("rk.TAGS", b"t%d" % (i % 3)), ("seq", b"%d" % i), ("seq", b"again")]
        records.append(Record(value=None if i % 7 == 3 else b"v%d" % i, key=None if i % 4 == 1 else b"k%d" % (i % 6),
                              partition=i % partitions, headers=headers, timestamp=base + i))
    return records


def test_both_engines_read_the_same_rows_for_every_batch_option(jvm, rk_topic, produce, source):
    a, b = rk_topic(partitions=2, suffix="-a"), rk_topic(partitions=1, suffix="-b")
    produce(a, _mixed(a, 2, 60))
    produce(b, _mixed(b, 1, 25))
    bs = source(a)["kafka.bootstrap.servers"]

    everything = _both(jvm, source(a), includeHeaders=True)
    assert len(everything) == 60 and everything[0][7] is None  # record 0 has no headers: null, not []
    assert [(h["key"], h["value"]) for h in everything[1][7]] == [("rk.TAGS", b"t2"), ("seq", b"2"), ("seq", b"again")]
    assert len(_both(jvm, source(a))) == 60  # no headers column
    ranged = _both(jvm, source(a), startingOffsets=json.dumps({a: {"0": 3, "1": -2}}),
                   endingOffsets=json.dumps({a: {"0": 20, "1": -1}}), includeHeaders=True)
    assert [(r[1], r[2]) for r in ranged] == [(0, o) for o in range(3, 20)] + [(1, o) for o in range(30)]
    assert len(_both(jvm, {"kafka.bootstrap.servers": bs, "assign": json.dumps({a: [1], b: [0]})})) == 30 + 25
    pattern = f"({re.escape(a)}|{re.escape(b)})"
    assert len(_both(jvm, {"kafka.bootstrap.servers": bs, "subscribePattern": pattern}, includeHeaders=True)) == 85


def test_both_engines_start_at_the_same_offsets_by_timestamp(jvm, rk_topic, produce, source):
    topic = rk_topic(partitions=2)
    t1, t2 = _batches(produce, topic)
    got = _both(jvm, source(topic), startingOffsetsByTimestamp=json.dumps({topic: {"0": t2, "1": t1}}))
    assert sorted(int(r[4]) for r in got) == sorted([i for i in range(60, 90) if i % 2 == 0]
                                                    + [i for i in range(30, 90) if i % 2 == 1])
    assert len(_both(jvm, source(topic), startingTimestamp=t1, endingTimestamp=t2)) == 30


def _stream_to_files(spark, engine: str, options: dict, out: Path, checkpoint: Path) -> None:
    stream = read_message_stream(spark, options, engine=engine, includeHeaders=True, startingOffsets="earliest")
    run_available_now(stream.writeStream.format("parquet").option("path", str(out))
                      .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True))


@pytest.mark.alone  # a stream of ours: Spark's fixed 10 s for its Python worker (conftest)
def test_a_restarted_streaming_query_writes_the_same_rows_once_on_either_engine(jvm, rk_topic, produce, source,
                                                                                 tmp_path):
    topic = rk_topic(partitions=2)
    records = _mixed(topic, 2, 80)

    def send(part: list[Record]) -> None:  # a record per batch: Tansu's ListOffsets is right then (DESIGN §4)
        for r in part:
            produce(topic, [r])

    send(records[:40])
    for engine in ENGINES:
        _stream_to_files(jvm, engine, source(topic), tmp_path / engine, tmp_path / f"{engine}-cp")
    send(records[40:])
    for engine in ENGINES:  # stopped and restarted from its checkpoint
        _stream_to_files(jvm, engine, source(topic), tmp_path / engine, tmp_path / f"{engine}-cp")
    written = {e: _rows(jvm.read.parquet(str(tmp_path / e)), headers=True) for e in ENGINES}
    assert written["jvm"] == written["python"]
    assert [(r[1], r[2]) for r in written["jvm"]] == [(p, o) for p in (0, 1) for o in range(40)]  # each once


def test_register_gives_a_working_format_name_and_kafka_stays_reserved(spark, rk_topic, produce, source):
    topic = rk_topic(partitions=2)
    produce(topic, [Record(value=b"%d" % i, partition=i % 2) for i in range(40)])
    name = register(spark)
    assert name == "rocketkafka-kafka"
    assert spark.read.format(name).options(**source(topic)).load().count() == 40

    class Kafka(DataSource):  # why the short name cannot be ours: Spark keeps "kafka" for its JVM connector
        @classmethod
        def name(cls) -> str:
            return "kafka"

    with pytest.raises(Exception, match="DATA_SOURCE_ALREADY_EXISTS"):
        spark.dataSource.register(Kafka)


def test_option_errors_show_the_one_line_that_matters_first(spark, rk_topic, source):
    topic = rk_topic(partitions=1)
    register(spark)
    with pytest.raises(AnalysisException) as caught:
        spark.read.format("rocketkafka-kafka").options(**source(topic), colour="blue").load()
    first = str(caught.value).strip().splitlines()[0]
    assert "SourceOptionError: Kafka source option 'colour': unknown option" in first, str(caught.value)
    assert "Traceback" not in str(caught.value)
    assert spark_error_line(caught.value).startswith("SourceOptionError: Kafka source option 'colour': unknown option")
    with pytest.raises(AnalysisException) as missing:  # an error raised while planning, in another worker
        spark.read.format("rocketkafka-kafka").options(**source(topic + "-gone")).load().collect()
    assert spark_error_line(missing.value).startswith("TopicNotFoundError"), str(missing.value)


def _batches(produce, topic: str) -> tuple[int, int]:
    """Three batches A (ids 0-29), B (30-59), C (60-89) written >= 1.1 s apart; returns the times between them.

    Tansu answers offsets_for_times with the time each batch was written, so the records keep
    the producer's clock and the batches are apart in wall time."""
    marks = []
    for batch in range(3):
        if batch:
            time.sleep(1.1)
            marks.append(int(time.time() * 1000))
            time.sleep(0.1)
        produce(topic, [Record(value=b"%d" % (batch * 30 + i), partition=i % 2) for i in range(30)])
    return marks[0], marks[1]


@pytest.mark.alone  # a stream of ours: Spark's fixed 10 s for its Python worker (conftest)
def test_timestamp_options_are_served_with_offsets_for_times(spark, rk_topic, produce, source, tmp_path, monkeypatch):
    """Our reader checks the broker's offsets_for_times answer (Tansu answers 0 for a time after the last batch);
    Spark's JVM source trusts it, so this test is the Python engine's (docs/guides/spark.md: differences by design)."""
    topic = rk_topic(partitions=2)
    monkeypatch.setenv("ROCKETKAFKA_SPARK_ENGINE", "python")
    t1, t2 = _batches(produce, topic)

    def ids(df) -> list[int]:
        return sorted(int(v) for (v,) in rows_by(df, "value"))

    assert ids(read_messages(spark, source(topic), startingTimestamp=t1)) == list(range(30, 90))
    assert ids(read_messages(spark, source(topic), startingTimestamp=t1, endingTimestamp=t2)) == list(range(30, 60))
    per_partition = {topic: {"0": t2, "1": t1}}
    got = ids(read_messages(spark, source(topic), startingOffsetsByTimestamp=json.dumps(per_partition)))
    assert got == sorted([i for i in range(60, 90) if i % 2 == 0] + [i for i in range(30, 90) if i % 2 == 1])
    future = int(time.time() * 1000) + 3_600_000
    assert ids(read_messages(spark, source(topic), endingTimestamp=future)) == list(range(90))  # none after: the end
    with pytest.raises(Exception, match="has no record at or after"):
        read_messages(spark, source(topic), startingTimestamp=future).collect()
    later = read_messages(spark, source(topic), startingTimestamp=future, startingOffsetsByTimestampStrategy="latest")
    assert later.count() == 0
    with pytest.raises(SourceOptionError, match="every partition"):
        read_messages(spark, source(topic), startingOffsetsByTimestamp=json.dumps({topic: {"0": t1}}))

    stream = read_message_stream(spark, source(topic), startingTimestamp=t2)  # a new query starts at the time
    run_available_now(stream.select("value").writeStream.format("memory").queryName("by_time")
                      .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True), 120)
    assert sorted(int(r.value) for r in spark.table("by_time").collect()) == list(range(60, 90))


def test_kafka_group_id_is_honoured_or_refused_never_ignored(spark, rk_topic, produce, source):
    topic = rk_topic(partitions=2)
    produce(topic, [Record(value=b"x", partition=i % 2) for i in range(20)])
    assert read_messages(spark, source(topic), **{"kafka.group.id": "audit-readers"}).count() == 20
    with pytest.raises(SourceOptionError, match="not both"):
        read_messages(spark, source(topic), **{"kafka.group.id": "audit-readers", "groupIdPrefix": "x"})
