"""``audit-order``: ordering per order key, re-ordering by design (delays, retries) apart from real violations.

Producers stamp each message with a per-key sequence. Reading a key's records of one
partition in offset order, the sequence must increase. Two kinds of records are
*out of order by design* and are judged apart:

- **delayed** records (a ``rk.DELIVER_AT`` or ``rk.DELAY`` header, which the delay
  forwarder keeps on delivery): they reach the topic when due, after later messages;
- **retried** records (``rk.RECONSUME_TIME`` > 0): copies sent back after a failed
  consume, through the delay levels.

A **violation** is a record of neither kind whose sequence is lower than that of the
key's previous such record in the partition (one swapped pair is one violation); an
equal sequence is a **duplicate** (a resend, not a re-order). A delayed or retried
record is **reordered by design** when its sequence is lower than one read before it
in the partition. ``--strict`` fails on violations only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pyspark.sql import Column, SparkSession, Window
from pyspark.sql import functions as F

from rocketkafka.errors import ConfigError
from rocketkafka.names import Header
from rocketkafka.spark.audit.reading import count_rows, read_topics
from rocketkafka.spark.audit.result import AuditResult, nothing_to_report, write_table
from rocketkafka.spark.rocketmq import header_long, header_value

#: ``sequence=`` choices (besides ``header:<name>`` and ``json:<field>``).
SEQUENCES = ("born", "value")
#: ``key=`` choices (besides ``header:<name>`` and ``json:<field>``).
ORDER_KEYS = ("sharding", "key", "keys", "partition")


def _json_path(field: str) -> str:
    return field if field.startswith("$") else f"$.{field}"


def sequence_column(spec: str) -> Column:
    """The per-key sequence of a record: ``born`` | ``value`` | ``header:<name>`` | ``json:<field>``."""
    kind, _, arg = spec.partition(":")
    if spec == "born":
        return header_long(Header.BORN_TIMESTAMP)
    if spec == "value":
        return F.col("value").cast("string").try_cast("long")
    if kind == "header" and arg:
        return header_long(arg)
    if kind == "json" and arg:
        return F.get_json_object(F.col("value").cast("string"), _json_path(arg)).try_cast("long")
    raise ConfigError(f"sequence source {spec!r}: use born, value, header:<name> or json:<field>")


def key_column(spec: str) -> Column:
    """The order key of a record: ``sharding`` | ``key`` | ``keys`` | ``partition`` | ``header:<name>`` | ``json:<field>``."""
    kind, _, arg = spec.partition(":")
    if spec == "sharding":
        return F.coalesce(header_value(Header.SHARDING_KEY), F.col("key").cast("string"))
    if spec == "key":
        return F.col("key").cast("string")
    if spec == "keys":
        return F.split(F.trim(header_value(Header.KEYS)), r"\s+")[0]
    if spec == "partition":
        return F.col("partition").cast("string")
    if kind == "header" and arg:
        return header_value(arg)
    if kind == "json" and arg:
        return F.get_json_object(F.col("value").cast("string"), _json_path(arg))
    raise ConfigError(f"order key source {spec!r}: use sharding, key, keys, partition, header:<name> or json:<field>")


def audit_order(spark: SparkSession, bootstrap_servers: str, topics: str | Sequence[str], *, sequence: str = "born",
                key: str = "sharding", output: str | Path | None = None, fmt: str = "parquet",
                engine: str | None = None, kafka: Mapping[str, str] | None = None,
                allow_empty: bool = False) -> AuditResult:
    """Ordering per order key of ``topics`` (see the module docstring).

    Parameters:
        topics: one topic or several (e.g. a topic and its group's retry topic); each
            (topic, partition) is its own queue.
        sequence: ``born`` (the BORN_TS header, default), ``header:<name>``,
            ``json:<field>`` (a number in a JSON body) or ``value`` (the body is a number).
        key: ``sharding`` (SHARDING_KEY header, else the record key; default), ``key``,
            ``keys`` (first of KEYS), ``partition`` (queue order), ``header:<name>``, ``json:<field>``.
        allow_empty: return zeros instead of raising when no record has a key and a sequence.

    Summary: topics, records, keys, messages (with key and sequence), unsequenced,
    delayed, retried, reordered_by_design, violations, keys_with_violations, duplicates,
    keys_in_several_partitions.

    Raises:
        AuditEmptyError: no record has both an order key and a sequence.
    """
    topic_list = [topics] if isinstance(topics, str) else list(topics)
    if not topic_list:
        raise ConfigError("audit_order needs at least one topic")
    keys, seqs = key_column(key), sequence_column(sequence)
    source = read_topics(spark, bootstrap_servers, topic_list, engine=engine, kafka=kafka, role="read")
    raw = source.frame
    delayed = header_value(Header.DELIVER_AT).isNotNull() | header_value(Header.DELAY_LEVEL).isNotNull()
    retried = F.coalesce(header_long(Header.RECONSUME_TIMES), F.lit(0)) > 0
    base = raw.select("topic", "partition", "offset", keys.alias("order_key"), seqs.alias("seq"),
                      delayed.alias("delayed"), retried.alias("retried")).cache()
    try:
        report = count_rows(base, source.report)
        sequenced = base.where(F.col("order_key").isNotNull() & F.col("seq").isNotNull())
        queue = Window.partitionBy("order_key", "topic", "partition").orderBy("offset")
        before = queue.rowsBetween(Window.unboundedPreceding, -1)
        by_design = F.col("delayed") | F.col("retried")
        in_order = (sequenced.where(~by_design)
                    .withColumn("prev_seq", F.lag("seq").over(queue))
                    .select("order_key", "topic", "partition", "offset",
                            (F.col("seq") < F.col("prev_seq")).cast("int").alias("violation"),
                            (F.col("seq") == F.col("prev_seq")).cast("int").alias("duplicate")))
        marked = (sequenced.withColumn("max_before", F.max("seq").over(before))
                  .withColumn("reordered", (by_design & (F.col("seq") < F.col("max_before"))).cast("int"))
                  .join(in_order, ["order_key", "topic", "partition", "offset"], "left"))
        table = (marked.groupBy("order_key").agg(
            F.count(F.lit(1)).alias("messages"),
            F.countDistinct("topic", "partition").alias("partitions"),
            F.sum(F.col("delayed").cast("int")).alias("delayed"),
            F.sum(F.col("retried").cast("int")).alias("retried"),
            F.coalesce(F.sum("reordered"), F.lit(0)).alias("reordered_by_design"),
            F.coalesce(F.sum("violation"), F.lit(0)).alias("violations"),
            F.coalesce(F.sum("duplicate"), F.lit(0)).alias("duplicates"),
            F.min(F.when(F.col("violation") == 1, F.struct("topic", "partition", "offset"))).alias("first_violation"),
        ).withColumn("first_violation", F.when(F.col("first_violation").isNotNull(), F.concat_ws(
            "@", F.col("first_violation.topic"), F.col("first_violation.partition").cast("string"),
            F.col("first_violation.offset").cast("string"))))
            .orderBy(F.desc("violations"), F.desc("reordered_by_design"), "order_key")).cache()
        totals = table.agg(
            F.count(F.lit(1)).alias("keys"), F.sum("messages").alias("messages"),
            F.sum("delayed").alias("delayed"), F.sum("retried").alias("retried"),
            F.sum("reordered_by_design").alias("reordered_by_design"), F.sum("violations").alias("violations"),
            F.sum(F.when(F.col("violations") > 0, 1).otherwise(0)).alias("keys_with_violations"),
            F.sum("duplicates").alias("duplicates"),
            F.sum(F.when(F.col("partitions") > 1, 1).otherwise(0)).alias("keys_in_several_partitions"),
        ).first()
        assert totals is not None  # an aggregate without grouping has exactly one row
        messages = int(totals["messages"] or 0)
        if messages == 0:
            nothing_to_report("audit-order", f"no record has both an order key ({key}) and a sequence ({sequence})",
                              [report], allow_empty)

        def total(name: str) -> int:
            return int(totals[name] or 0)

        summary = {
            "topics": ",".join(topic_list),
            "records": report.rows,
            "keys": total("keys"),
            "messages": messages,
            "unsequenced": report.rows - messages,
            "delayed": total("delayed"),
            "retried": total("retried"),
            "reordered_by_design": total("reordered_by_design"),
            "violations": total("violations"),
            "keys_with_violations": total("keys_with_violations"),
            "duplicates": total("duplicates"),
            "keys_in_several_partitions": total("keys_in_several_partitions"),
        }
        rows = [r.asDict() for r in table.where("violations > 0 OR duplicates > 0 OR partitions > 1").limit(1000).collect()]
        notes = [f"order key: {key}; sequence: {sequence}; delayed (rk.DELIVER_AT / rk.DELAY) and retried "
                 "(rk.RECONSUME_TIME > 0) records are judged apart: re-ordered by design, never violations"]
        output_path = write_table(table, output, fmt)
    finally:
        base.unpersist()
    return AuditResult("audit-order", summary, table, rows, [report], notes, output_path)
