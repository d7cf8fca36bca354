"""``audit-txn``: the outcome of every transaction, joined from the half, op, real and max-check topics.

What is assumed of the records (the names come from :class:`rocketkafka.names.Header`):

- **half** (``TopicNames.half()``): one record per prepared message, with
  TRANSACTION_ID (the transaction's id; RocketMQ's UNIQ_KEY of the half) and
  REAL_TOPIC. A half re-written by the checker is another half record with the
  same TRANSACTION_ID, so a transaction is identified by TRANSACTION_ID, never
  by a half offset.
- **op** (``TopicNames.op()``): one record per end-transaction decision, with
  TRANSACTION_STATE (``COMMIT...`` or ``ROLLBACK...``, case-insensitive; other
  values such as the checker's PROBE are ignored) and HALF_OFFSET (+ HALF_PARTITION,
  default: the op record's own partition, as op partition p settles half
  partition p) of the half it settles; TRANSACTION_ID when present, else taken
  from the half at that position.
- **real** (REAL_TOPIC values of the halves, or ``real_topics``): a committed
  message carries the TRANSACTION_ID header of its transaction.
- **max-check** (``TopicNames.max_check()``): halves given up on after too many
  checks, with TRANSACTION_ID (or HALF_OFFSET + HALF_PARTITION; any half
  partition when HALF_PARTITION is absent).

Outcome per transaction: ``conflict`` (both a commit and a rollback op),
``committed`` (a commit op or a real message), ``rolled_back``, ``max_checked``
(no decision, moved aside), else ``unresolved``. Anomalies counted beside:
``missing_real`` (committed without a real message), ``duplicate_real``
(more than one real message), ``rollback_leaked`` (rolled back but a real message exists).

The audit fails (:class:`~rocketkafka.spark.errors.AuditEmptyError`) when the half
topic does not exist under the prefix, holds no transaction, or when commits exist
but no record of the real topics belongs to any transaction (the real-topic join is
empty). Missing op and max-check topics count as empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from rocketkafka.names import DEFAULT_TOPIC_PREFIX, Header, TopicNames
from rocketkafka.spark.audit.reading import ReadReport, count_rows, read_topics
from rocketkafka.spark.audit.result import AuditResult, nothing_to_report, write_table
from rocketkafka.spark.rocketmq import header_long, header_value


def _state_kind(state: Column) -> Column:
    upper = F.upper(F.trim(state))
    return (F.when(upper.startswith("COMMIT"), F.lit("commit"))
            .when(upper.startswith("ROLLBACK"), F.lit("rollback"))
            .otherwise(F.lit("other")))


def _settle(records: DataFrame, halves: DataFrame, extra: list[Column], same_partition: bool) -> DataFrame:
    """Attach a transaction id to op / max-check records (own header, else their half's)."""
    default_partition = F.col("partition") if same_partition else F.lit(None).cast("int")
    refs = records.select(
        header_value(Header.TRANSACTION_ID).alias("own_id"),
        header_long(Header.HALF_OFFSET).alias("ref_offset"),
        F.coalesce(header_long(Header.HALF_PARTITION).cast("int"), default_partition).alias("ref_partition"),
        *extra)
    joined = refs.join(
        halves.select("txn_id", "half_partition", "half_offset").alias("h"),
        (F.col("ref_offset") == F.col("h.half_offset"))
        & (F.col("ref_partition").isNull() | (F.col("ref_partition") == F.col("h.half_partition")))
        & F.col("own_id").isNull(),
        "left")
    kept = [c for c in refs.columns if c not in ("own_id", "ref_offset", "ref_partition")]
    return joined.select(F.coalesce("own_id", "h.txn_id").alias("txn_id"), *kept)


def audit_txn(spark: SparkSession, bootstrap_servers: str, *, topic_prefix: str = DEFAULT_TOPIC_PREFIX,
              real_topics: Sequence[str] | None = None, output: str | Path | None = None, fmt: str = "parquet",
              engine: str | None = None, kafka: Mapping[str, str] | None = None,
              allow_empty: bool = False) -> AuditResult:
    """Outcome of every transaction under ``topic_prefix`` (see the module docstring).

    Parameters:
        real_topics: the real topics (default: the REAL_TOPIC values of the halves).
        allow_empty: return zeros instead of raising when there is nothing to audit.

    Raises:
        AuditEmptyError: no half topic, no transaction, or an empty real-topic join.
    """
    names = TopicNames(topic_prefix)

    def read(topics: list[str], role: str):
        return read_topics(spark, bootstrap_servers, topics, engine=engine, kafka=kafka, role=role, allow_missing=True)

    half = read([names.half()], "half")
    if half.report.missing:
        nothing_to_report("audit-txn", f"no transaction topics under the prefix {topic_prefix!r}: "
                          f"{names.half()} does not exist (wrong --topic-prefix?)", [half.report], allow_empty)
    halves = half.frame.select(
        header_value(Header.TRANSACTION_ID).alias("txn_id"),
        F.col("topic"), F.col("partition").alias("half_partition"), F.col("offset").alias("half_offset"),
        header_value(Header.REAL_TOPIC).alias("real_topic"),
    ).cache()
    try:
        return _audit(spark, names, halves, half.report, read, real_topics, output, fmt, allow_empty)
    finally:
        halves.unpersist()


def _audit(spark: SparkSession, names: TopicNames, halves_all: DataFrame, half_report: ReadReport, read,
           real_topics: Sequence[str] | None, output: str | Path | None, fmt: str, allow_empty: bool) -> AuditResult:
    half_counted = count_rows(halves_all.withColumnRenamed("half_partition", "partition"), half_report)
    halves = halves_all.where(F.col("txn_id").isNotNull())
    op = read([names.op()], "op")
    ops = _settle(op.frame, halves, [F.col("topic"), F.col("partition"),
                                     _state_kind(header_value(Header.TRANSACTION_STATE)).alias("kind")],
                  same_partition=True).cache()
    maxcheck = read([names.max_check()], "max-check")
    if real_topics is None:
        real_topics = sorted(r["real_topic"] for r in halves.select("real_topic").distinct().collect() if r["real_topic"])
    real = read(list(real_topics), "real") if real_topics else None
    reads = [half_counted, count_rows(ops, op.report), count_rows(maxcheck.frame, maxcheck.report)]
    if real is not None:
        real_frame = real.frame.select("topic", "partition", header_value(Header.TRANSACTION_ID).alias("txn_id")).cache()
        reads.append(count_rows(real_frame, real.report))
        real_counts = (real_frame.where(F.col("txn_id").isNotNull()).groupBy("txn_id")
                       .agg(F.count(F.lit(1)).alias("real_messages")))
    else:
        real_frame = None
        real_counts = spark.createDataFrame([], "txn_id string, real_messages long")
    try:
        op_counts = ops.where(F.col("txn_id").isNotNull()).groupBy("txn_id").agg(
            F.sum(F.when(F.col("kind") == "commit", 1).otherwise(0)).alias("commit_ops"),
            F.sum(F.when(F.col("kind") == "rollback", 1).otherwise(0)).alias("rollback_ops"))
        max_checked = (_settle(maxcheck.frame, halves, [], same_partition=False).where(F.col("txn_id").isNotNull())
                       .groupBy("txn_id").agg(F.count(F.lit(1)).alias("max_check_records")))
        half_counts = halves.groupBy("txn_id").agg(F.count(F.lit(1)).alias("half_records"),
                                                  F.first("real_topic", ignorenulls=True).alias("real_topic"))
        ids = (half_counts.select("txn_id").union(op_counts.select("txn_id")).union(real_counts.select("txn_id"))
               .union(max_checked.select("txn_id")).distinct())
        joined = (ids.join(half_counts, "txn_id", "left").join(op_counts, "txn_id", "left")
                  .join(real_counts, "txn_id", "left").join(max_checked, "txn_id", "left")
                  .fillna(0, ["half_records", "commit_ops", "rollback_ops", "real_messages", "max_check_records"]))
        outcome = (F.when((F.col("commit_ops") > 0) & (F.col("rollback_ops") > 0), "conflict")
                   .when((F.col("commit_ops") > 0) | (F.col("real_messages") > 0), "committed")
                   .when(F.col("rollback_ops") > 0, "rolled_back")
                   .when(F.col("max_check_records") > 0, "max_checked")
                   .otherwise("unresolved"))
        table = joined.withColumn("outcome", outcome).select(
            "txn_id", "outcome", "real_topic", "half_records", "commit_ops", "rollback_ops", "real_messages",
            "max_check_records").orderBy("txn_id").cache()
        counts = {r["outcome"]: r["count"] for r in table.groupBy("outcome").count().collect()}
        figures = table.agg(
            F.sum(F.when((F.col("outcome") == "committed") & (F.col("real_messages") == 0), 1).otherwise(0)).alias("missing_real"),
            F.sum(F.when(F.col("real_messages") > 1, 1).otherwise(0)).alias("duplicate_real"),
            F.sum(F.when((F.col("outcome") == "rolled_back") & (F.col("real_messages") > 0), 1).otherwise(0)).alias("rollback_leaked"),
            F.sum(F.when(F.col("commit_ops") > 0, 1).otherwise(0)).alias("commit_decided"),
            F.sum("real_messages").alias("real_messages"),
        ).first()
        assert figures is not None  # an aggregate without grouping has exactly one row
        transactions = sum(counts.values())
        if transactions == 0:
            nothing_to_report("audit-txn", f"no transaction: no record of {names.half()} or {names.op()} "
                              f"carries {Header.TRANSACTION_ID} or settles a half", reads, allow_empty)
        real_joined = int(figures["real_messages"] or 0)
        if int(figures["commit_decided"] or 0) and not real_joined:
            listed = ", ".join(real_topics) if real_topics else "(none: the halves name no REAL_TOPIC)"
            nothing_to_report("audit-txn", f"{figures['commit_decided']} transactions were committed, but no record of "
                              f"the real topics {listed} carries the {Header.TRANSACTION_ID} of any transaction",
                              reads, allow_empty)
        summary = {
            "transactions": transactions,
            "committed": counts.get("committed", 0),
            "rolled_back": counts.get("rolled_back", 0),
            "unresolved": counts.get("unresolved", 0),
            "max_checked": counts.get("max_checked", 0),
            "conflict": counts.get("conflict", 0),
            "real_messages": real_joined,
            "missing_real": int(figures["missing_real"] or 0),
            "duplicate_real": int(figures["duplicate_real"] or 0),
            "rollback_leaked": int(figures["rollback_leaked"] or 0),
        }
        rows = [r.asDict() for r in table.where(
            "outcome NOT IN ('committed', 'rolled_back') OR real_messages > 1 "
            "OR (outcome = 'committed' AND real_messages = 0) OR (outcome = 'rolled_back' AND real_messages > 0)"
        ).limit(1000).collect()]
        notes = [f"real_messages: records of the real topics carrying a transaction's {Header.TRANSACTION_ID}"]
        output_path = write_table(table, output, fmt)
    finally:
        ops.unpersist()
        if real_frame is not None:
            real_frame.unpersist()
    return AuditResult("audit-txn", summary, table, rows, reads, notes, output_path)
