"""Spark source parity on the real broker: register(), the timestamp options, kafka.group.id, one-line errors."""

from __future__ import annotations

import json
import time

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql.datasource import DataSource

from rocketkafka.spark import SourceOptionError, read_message_stream, read_messages, register, spark_error_line
from tests.spark.conftest import Record, rows_by

pytestmark = pytest.mark.integration


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


def test_timestamp_options_are_served_with_offsets_for_times(spark, rk_topic, produce, source, tmp_path):
    topic = rk_topic(partitions=2)
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
    query = (stream.select("value").writeStream.format("memory").queryName("by_time")
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(int(r.value) for r in spark.table("by_time").collect()) == list(range(60, 90))


def test_kafka_group_id_is_honoured_or_refused_never_ignored(spark, rk_topic, produce, source):
    topic = rk_topic(partitions=2)
    produce(topic, [Record(value=b"x", partition=i % 2) for i in range(20)])
    assert read_messages(spark, source(topic), **{"kafka.group.id": "audit-readers"}).count() == 20
    with pytest.raises(SourceOptionError, match="not both"):
        read_messages(spark, source(topic), **{"kafka.group.id": "audit-readers", "groupIdPrefix": "x"})
