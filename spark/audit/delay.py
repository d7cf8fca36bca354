"""``audit-delay``: lateness of delayed messages on their real topics, per delay level.

lateness = store time − deliver-at. The store time is the record timestamp on the
real topic (when the forwarder produced it, or the broker's append time with
LogAppendTime). The delay forwarder keeps ``rk.DELIVER_AT`` (when the message was
due, epoch ms) and ``rk.DELAY`` (its level) on the delivered record, so the real
records say themselves which were delayed (``direct``). Records delivered by older
forwarders lost those headers; the join mode finds them on the delay topics under a
prefix (level and step topics), by message id. Real records without a deliver-at
time either way were not delayed and are not counted; negative lateness is early.

The audit fails (:class:`~rocketkafka.spark.errors.AuditEmptyError`) rather than
print zeros when the prefix has no delay topics or no delayed record is found.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from rocketkafka.errors import ConfigError
from rocketkafka.names import DEFAULT_TOPIC_PREFIX, Header, TopicNames
from rocketkafka.spark.audit.reading import count_rows, read_topics
from rocketkafka.spark.audit.result import AuditResult, nothing_to_report, write_table
from rocketkafka.spark.rocketmq import header_long, header_value, message_id

#: Upper bounds (ms, exclusive) of the lateness histogram buckets; the last bucket is open.
LATENESS_BUCKETS_MS = (0, 10, 25, 50, 100, 250, 500, 1000, 5000)
#: The histogram's bucket names, in order (``"<0 (early)"``, ``"0-10"``, ..., ``">=5000"``).
LATENESS_BUCKET_NAMES = ("<0 (early)", *(f"{lo}-{up}" for lo, up in zip(LATENESS_BUCKETS_MS, LATENESS_BUCKETS_MS[1:])),
                         f">={LATENESS_BUCKETS_MS[-1]}")


def delay_topic_pattern(topic_prefix: str) -> str:
    """``subscribePattern`` of the delay topics under ``topic_prefix`` (level topics, and the delay
    forwarder's step topics when the ``delay`` package is installed)."""
    names = TopicNames(topic_prefix)
    samples = [names.delay_level(1)]
    try:
        from rocketkafka.schedule.tiers import step_topic
    except Exception:  # noqa: BLE001 - the delay package is optional here
        pass
    else:
        samples.append(step_topic(names, 1))
    return "|".join(re.escape(sample.rstrip("0123456789")) + r"[0-9]+" for sample in samples)


def _bucket_column():
    bucket = F.lit(LATENESS_BUCKET_NAMES[-1])
    for upper, name in reversed(list(zip(LATENESS_BUCKETS_MS, LATENESS_BUCKET_NAMES))):
        bucket = F.when(F.col("lateness_ms") < upper, F.lit(name)).otherwise(bucket)
    return bucket


def audit_delay(spark: SparkSession, bootstrap_servers: str, topics: Sequence[str], *,
                topic_prefix: str | None = DEFAULT_TOPIC_PREFIX, output: str | Path | None = None,
                fmt: str = "parquet", engine: str | None = None, kafka: Mapping[str, str] | None = None,
                allow_empty: bool = False) -> AuditResult:
    """Lateness of delayed messages on the real ``topics``, per delay level (see the module docstring).

    Parameters:
        topic_prefix: prefix of the delay topics to join with (records whose own headers lack
            the deliver-at time); ``None``: the real records' own headers only (``--direct``).
        allow_empty: return zeros instead of raising when nothing delayed is found.

    Summary: topics, records, messages (delayed), from_headers, from_delay_topics, early,
    p50/p99/max lateness (ms). Table: per level count, early, mean, p50, p95, p99, max.
    ``extra["histogram"]``: counts per level and bucket (:data:`LATENESS_BUCKET_NAMES`).

    Raises:
        AuditEmptyError: no delay topics under ``topic_prefix``, or no delayed record found.
    """
    if not topics:
        raise ConfigError("audit_delay needs at least one real topic")
    source = read_topics(spark, bootstrap_servers, topics, engine=engine, kafka=kafka, role="real")
    raw = source.frame
    real = raw.select(
        "topic", "partition",
        message_id(raw).alias("msg_id"),
        header_long(Header.DELIVER_AT).alias("own_due"),
        header_long(Header.DELAY_LEVEL).cast("int").alias("own_level"),
        F.unix_millis(F.col("timestamp")).alias("store_ms"))
    reads = [source.report]
    if topic_prefix is not None:
        scheduled = read_topics(spark, bootstrap_servers, pattern=delay_topic_pattern(topic_prefix), engine=engine,
                                kafka=kafka, role="delay")
        if not scheduled.report.partitions:
            nothing_to_report("audit-delay", f"no delay topics under the prefix {topic_prefix!r} "
                              f"({TopicNames(topic_prefix).delay_level(1)}, ...): wrong --topic-prefix? "
                              "Records delivered by this forwarder carry their own delay headers: try --direct",
                              reads, allow_empty)
        schedule = (scheduled.frame.select(
            header_value(Header.MSG_ID).alias("msg_id"), header_long(Header.DELIVER_AT).alias("due"),
            header_long(Header.DELAY_LEVEL).cast("int").alias("level"))
            .where(F.col("msg_id").isNotNull() & F.col("due").isNotNull())
            .groupBy("msg_id").agg(F.max("due").alias("sched_due"), F.max("level").alias("sched_level")))
        real = real.join(schedule, "msg_id", "left")
    else:
        scheduled = None
        real = real.withColumn("sched_due", F.lit(None).cast("long")).withColumn("sched_level", F.lit(None).cast("int"))
    marked = real.select(
        "topic", "partition",
        F.coalesce("own_level", "sched_level", F.lit(0)).alias("level"),
        (F.col("store_ms") - F.coalesce("own_due", "sched_due")).alias("lateness_ms"),
        F.col("own_due").isNotNull().alias("from_headers")).cache()
    try:
        reads[0] = count_rows(marked, source.report)
        if scheduled is not None:
            reads.append(count_rows(scheduled.frame, scheduled.report))
        delayed = marked.where(F.col("lateness_ms").isNotNull())
        overall = delayed.agg(
            F.count(F.lit(1)).alias("n"), F.sum(F.col("from_headers").cast("int")).alias("own"),
            F.sum(F.when(F.col("lateness_ms") < 0, 1).otherwise(0)).alias("early"),
            F.percentile("lateness_ms", 0.5).alias("p50"), F.percentile("lateness_ms", 0.99).alias("p99"),
            F.max("lateness_ms").alias("max")).first()
        assert overall is not None  # an aggregate without grouping has exactly one row
        count = int(overall["n"] or 0)
        if count == 0:
            where = (f"and none of their message ids is on the delay topics under {topic_prefix!r}"
                     if topic_prefix is not None else "(--direct: the delay topics were not consulted)")
            nothing_to_report("audit-delay", f"no delayed message: none of the {reads[0].rows} records read carries "
                              f"{Header.DELIVER_AT} {where}", reads, allow_empty)
        table = (delayed.groupBy("level").agg(
            F.count(F.lit(1)).alias("messages"),
            F.sum(F.when(F.col("lateness_ms") < 0, 1).otherwise(0)).alias("early"),
            F.avg("lateness_ms").alias("mean_ms"),
            F.percentile("lateness_ms", 0.5).alias("p50_ms"),
            F.percentile("lateness_ms", 0.95).alias("p95_ms"),
            F.percentile("lateness_ms", 0.99).alias("p99_ms"),
            F.max("lateness_ms").alias("max_ms"),
        ).orderBy("level"))
        rows = [r.asDict() for r in table.collect()]
        order_of = {name: i for i, name in enumerate(LATENESS_BUCKET_NAMES)}
        histogram = [r.asDict() for r in delayed.withColumn("bucket", _bucket_column()).groupBy("level", "bucket").count()
                     .collect()]
        histogram.sort(key=lambda r: (r["level"], order_of[r["bucket"]]))
        own = int(overall["own"] or 0)
        summary = {
            "topics": ",".join(topics),
            "records": reads[0].rows,
            "messages": count,
            "from_headers": own,
            "from_delay_topics": count - own,
            "early": int(overall["early"] or 0),
            "p50_ms": float(overall["p50"]) if overall["p50"] is not None else None,
            "p99_ms": float(overall["p99"]) if overall["p99"] is not None else None,
            "max_ms": int(overall["max"]) if overall["max"] is not None else None,
        }
        notes = [f"delayed = records with {Header.DELIVER_AT}" + (
            f", or whose message id is on the delay topics under {topic_prefix!r}" if topic_prefix is not None else "")
            + "; lateness = record timestamp - deliver-at; level 0 = a deliver-at time without a level"]
        output_path = write_table(table, output, fmt)
    finally:
        marked.unpersist()
    return AuditResult("audit-delay", summary, table, rows, reads, notes, output_path, extra={"histogram": histogram})
