"""Batch audit jobs over rocketkafka topics: ordering, delay lateness, transaction outcomes.

Each job reads through :func:`spark.read_messages` (so either engine), computes a
per-item table with Spark, prints a summary table, optionally writes the table
as Parquet or CSV (a Spark output directory), and returns an :class:`AuditResult`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from facade.errors import ConfigError, TopicNotFoundError
from facade.names import DEFAULT_TOPIC_PREFIX, Header, TopicNames
from spark.engine import read_messages
from spark.rocketmq import header_long, header_value, message_id
from spark.schema import kafka_schema

log = logging.getLogger(__name__)

#: Upper bounds (ms, exclusive) of the lateness histogram buckets; the last bucket is open.
LATENESS_BUCKETS_MS = (0, 10, 25, 50, 100, 250, 500, 1000, 5000)


@dataclass
class AuditResult:
    """What an audit found.

    Attributes:
        name: the audit.
        summary: headline counts, in print order.
        table: the per-item Spark DataFrame (per key, per level, per transaction).
        rows: ``table`` collected (audits produce small tables), dicts in print order.
        output: where ``table`` was written, if anywhere.
        chart: the PNG chart, if one was drawn.
        extra: further tables (e.g. the lateness histogram), collected.
    """

    name: str
    summary: dict[str, Any]
    table: DataFrame
    rows: list[dict[str, Any]]
    output: Path | None = None
    chart: Path | None = None
    extra: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def render(self, limit: int = 20) -> str:
        """The summary and the first ``limit`` rows of the table as text."""
        parts = [f"== {self.name} ==", format_table([{"metric": k, "value": v} for k, v in self.summary.items()])]
        if self.rows:
            shown = self.rows[:limit]
            more = f"\n... {len(self.rows) - limit} more rows" if len(self.rows) > limit else ""
            parts.append(format_table(shown) + more)
        for title, rows in self.extra.items():
            if rows:
                parts.append(f"-- {title} --\n" + format_table(rows[:limit * 5]))
        if self.output:
            parts.append(f"table written to {self.output}")
        if self.chart:
            parts.append(f"chart written to {self.chart}")
        return "\n".join(parts)


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A plain text table (columns from the first row)."""
    if not rows:
        return "(no rows)"
    columns = list(rows[0].keys())

    def text(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.1f}"
        return "" if value is None else str(value)

    cells = [[text(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = "+".join("-" * (w + 2) for w in widths)
    out = ["|".join(f" {c.ljust(w)} " for c, w in zip(columns, widths)), line]
    out += ["|".join(f" {v.rjust(w) if _numeric(v) else v.ljust(w)} " for v, w in zip(row, widths)) for row in cells]
    return "\n".join(line.rstrip() for line in out)


def _numeric(value: str) -> bool:
    try:
        float(value)
        return True
    except ValueError:
        return False


def write_table(table: DataFrame, output: str | Path | None, fmt: str = "parquet") -> Path | None:
    """Write ``table`` as one Parquet or CSV file inside the Spark output directory ``output``."""
    if output is None:
        return None
    if fmt not in ("parquet", "csv"):
        raise ConfigError(f"output format must be parquet or csv, got {fmt!r}")
    if fmt == "csv":  # CSV has no nested types: those columns become JSON text
        flat = table.select([F.to_json(F.col(c)).alias(c) if _is_complex(table, c) else F.col(c) for c in table.columns])
        flat.coalesce(1).write.mode("overwrite").option("header", "true").csv(str(output))
    else:
        table.coalesce(1).write.mode("overwrite").parquet(str(output))
    return Path(output)


def _is_complex(df: DataFrame, column: str) -> bool:
    return df.schema[column].dataType.typeName() in ("array", "map", "struct")


def _read(spark: SparkSession, bootstrap_servers: str, topics: Iterable[str], engine: str | None,
          kafka: Mapping[str, str] | None, allow_missing: bool = False) -> DataFrame:
    topics = sorted(set(topics))
    options = {"kafka.bootstrap.servers": bootstrap_servers, "subscribe": ",".join(topics),
               "startingOffsets": "earliest", "endingOffsets": "latest", "includeHeaders": "true",
               **{f"kafka.{k}": v for k, v in (kafka or {}).items()}}
    try:
        return read_messages(spark, options, engine=engine)
    except TopicNotFoundError as exc:
        if not allow_missing:
            raise
        present = [t for t in topics if t != exc.topic]
        log.info("topic %s does not exist; audited as empty", exc.topic)
        if present:
            return _read(spark, bootstrap_servers, present, engine, kafka, allow_missing)
        return spark.createDataFrame([], kafka_schema(include_headers=True))


# -- ordering ----------------------------------------------------------------------------
def _order_column(spec: str, what: str) -> Column:
    kind, _, arg = spec.partition(":")
    if what == "sequence":
        if spec == "born":
            return header_long(Header.BORN_TIMESTAMP)
        if spec == "value":
            return F.col("value").cast("string").try_cast("long")
        if kind == "header" and arg:
            return header_long(arg)
        if kind == "json" and arg:
            path = arg if arg.startswith("$") else f"$.{arg}"
            return F.get_json_object(F.col("value").cast("string"), path).try_cast("long")
        raise ConfigError(f"sequence source {spec!r}: use born, value, header:<name> or json:<field>")
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
        path = arg if arg.startswith("$") else f"$.{arg}"
        return F.get_json_object(F.col("value").cast("string"), path)
    raise ConfigError(f"order key source {spec!r}: use sharding, key, keys, partition, header:<name> or json:<field>")


def audit_order(spark: SparkSession, bootstrap_servers: str, topic: str, *, sequence: str = "born",
                key: str = "sharding", output: str | Path | None = None, fmt: str = "parquet",
                engine: str | None = None, kafka: Mapping[str, str] | None = None, echo: bool = True) -> AuditResult:
    """Ordering violations per order key of ``topic``.

    Producers stamp each message with a per-key sequence (``sequence``). Within a
    partition, reading a key's messages in offset order must give increasing
    sequences; every message whose sequence is lower than that of the key's
    previous message in the same partition is one violation (so one swapped pair
    is one violation), an equal sequence is a duplicate (a resend, not a reorder).

    Parameters:
        sequence: ``born`` (the BORN_TS header, default), ``header:<name>``,
            ``json:<field>`` (a number in a JSON body) or ``value`` (the body is a number).
        key: ``sharding`` (SHARDING_KEY header, else the record key; default), ``key``,
            ``keys`` (first of KEYS), ``partition`` (queue order), ``header:<name>``, ``json:<field>``.

    Summary: keys, messages, unsequenced (no key or no sequence), violations,
    keys_with_violations, duplicates, keys_in_several_partitions.
    """
    key_column, seq_column = _order_column(key, "key"), _order_column(sequence, "sequence")
    raw = _read(spark, bootstrap_servers, [topic], engine, kafka)
    base = raw.select("partition", "offset", key_column.alias("order_key"), seq_column.alias("seq")).cache()
    order = Window.partitionBy("order_key", "partition").orderBy("offset")
    marked = (base.where(F.col("order_key").isNotNull() & F.col("seq").isNotNull())
              .withColumn("prev_seq", F.lag("seq").over(order))
              .withColumn("violation", (F.col("seq") < F.col("prev_seq")).cast("int"))
              .withColumn("duplicate", (F.col("seq") == F.col("prev_seq")).cast("int")))
    table = (marked.groupBy("order_key").agg(
        F.count(F.lit(1)).alias("messages"),
        F.countDistinct("partition").alias("partitions"),
        F.coalesce(F.sum("violation"), F.lit(0)).alias("violations"),
        F.coalesce(F.sum("duplicate"), F.lit(0)).alias("duplicates"),
        F.min(F.when(F.col("violation") == 1, F.struct("partition", "offset"))).alias("first_violation"),
    ).withColumn("first_violation", F.when(F.col("first_violation").isNotNull(), F.concat_ws(
        "@", F.col("first_violation.partition").cast("string"), F.col("first_violation.offset").cast("string"))))
        .orderBy(F.desc("violations"), "order_key")).cache()
    totals = table.agg(
        F.count(F.lit(1)).alias("keys"), F.sum("messages").alias("messages"), F.sum("violations").alias("violations"),
        F.sum(F.when(F.col("violations") > 0, 1).otherwise(0)).alias("keys_with_violations"),
        F.sum("duplicates").alias("duplicates"),
        F.sum(F.when(F.col("partitions") > 1, 1).otherwise(0)).alias("keys_in_several_partitions"),
    ).first()
    total_records = base.count()
    summary = {
        "topic": topic,
        "keys": int(totals["keys"] or 0),
        "messages": int(totals["messages"] or 0),
        "unsequenced": total_records - int(totals["messages"] or 0),
        "violations": int(totals["violations"] or 0),
        "keys_with_violations": int(totals["keys_with_violations"] or 0),
        "duplicates": int(totals["duplicates"] or 0),
        "keys_in_several_partitions": int(totals["keys_in_several_partitions"] or 0),
    }
    rows = [r.asDict() for r in table.where("violations > 0 OR duplicates > 0 OR partitions > 1").limit(1000).collect()]
    output_path = write_table(table, output, fmt)
    base.unpersist()
    result = AuditResult("audit-order", summary, table, rows, output_path)
    if echo:
        print(result.render())
    return result


# -- delay -------------------------------------------------------------------------------
def delay_topic_pattern(topic_prefix: str) -> str:
    """``subscribePattern`` of the delay topics under ``topic_prefix`` (level topics, and the delay
    forwarder's step topics when the ``delay`` package is installed)."""
    names = TopicNames(topic_prefix)
    samples = [names.delay_level(1)]
    try:
        from delay.tiers import step_topic
    except Exception:  # noqa: BLE001 - the delay package is optional here
        pass
    else:
        samples.append(step_topic(names, 1))
    return "|".join(re.escape(sample.rstrip("0123456789")) + r"[0-9]+" for sample in samples)


def audit_delay(spark: SparkSession, bootstrap_servers: str, topics: Sequence[str], *,
                topic_prefix: str | None = DEFAULT_TOPIC_PREFIX, output: str | Path | None = None,
                fmt: str = "parquet", chart: str | Path | None = None, engine: str | None = None,
                kafka: Mapping[str, str] | None = None, echo: bool = True) -> AuditResult:
    """Lateness of delayed messages on their real topics, per delay level.

    lateness = store time − deliver-at. The store time is the record timestamp on
    the real topic (the time the forwarder produced it, or the broker's append
    time with LogAppendTime). The deliver-at time (DELIVER_AT header, epoch ms) and
    the level (DELAY header; 0 = an arbitrary deliver-at time without a level) come
    from the real record itself when it still carries them, else from the
    message's records on the delay topics under ``topic_prefix`` (level and step
    topics), joined on the message id (the forwarder strips the delay headers on
    delivery but keeps the id). ``topic_prefix=None`` skips the join. Real records
    without a deliver-at time either way are not delayed messages and are not
    counted. Negative lateness means delivered early.

    Summary: messages, early, p50/p99/max lateness (ms). Table: per level
    count, early, mean, p50, p95, p99, max. ``extra['histogram']``: counts per
    level and bucket (:data:`LATENESS_BUCKETS_MS`). ``chart``: a PNG of the histogram.
    """
    if not topics:
        raise ConfigError("audit_delay needs at least one real topic")
    raw = _read(spark, bootstrap_servers, topics, engine, kafka)
    real = raw.select(
        message_id(raw).alias("msg_id"),
        header_long(Header.DELIVER_AT).alias("own_due"),
        header_long(Header.DELAY_LEVEL).cast("int").alias("own_level"),
        F.unix_millis(F.col("timestamp")).alias("store_ms"))
    if topic_prefix is not None:
        options = {"kafka.bootstrap.servers": bootstrap_servers, "subscribePattern": delay_topic_pattern(topic_prefix),
                   "startingOffsets": "earliest", "endingOffsets": "latest", "includeHeaders": "true",
                   **{f"kafka.{k}": v for k, v in (kafka or {}).items()}}
        scheduled = read_messages(spark, options, engine=engine)
        schedule = (scheduled.select(
            header_value(Header.MSG_ID).alias("msg_id"), header_long(Header.DELIVER_AT).alias("due"),
            header_long(Header.DELAY_LEVEL).cast("int").alias("level"))
            .where(F.col("msg_id").isNotNull() & F.col("due").isNotNull())
            .groupBy("msg_id").agg(F.max("due").alias("sched_due"), F.max("level").alias("sched_level")))
        real = real.join(schedule, "msg_id", "left")
    else:
        real = real.withColumn("sched_due", F.lit(None).cast("long")).withColumn("sched_level", F.lit(None).cast("int"))
    delayed = (real.select(
        F.coalesce("own_level", "sched_level", F.lit(0)).alias("level"),
        (F.col("store_ms") - F.coalesce("own_due", "sched_due")).alias("lateness_ms"))
        .where(F.col("lateness_ms").isNotNull())).cache()
    bucket = F.lit(f">={LATENESS_BUCKETS_MS[-1]}")
    for upper, lower in reversed(list(zip(LATENESS_BUCKETS_MS, (None, *LATENESS_BUCKETS_MS[:-1])))):
        label = "<0 (early)" if lower is None else f"{lower}-{upper}"
        bucket = F.when(F.col("lateness_ms") < upper, F.lit(label)).otherwise(bucket)
    order_of = {("<0 (early)" if lo is None else f"{lo}-{up}"): i
                for i, (up, lo) in enumerate(zip(LATENESS_BUCKETS_MS, (None, *LATENESS_BUCKETS_MS[:-1])))}
    order_of[f">={LATENESS_BUCKETS_MS[-1]}"] = len(LATENESS_BUCKETS_MS)
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
    histogram = [r.asDict() for r in delayed.withColumn("bucket", bucket).groupBy("level", "bucket").count().collect()]
    histogram.sort(key=lambda r: (r["level"], order_of[r["bucket"]]))
    overall = delayed.agg(F.count(F.lit(1)).alias("n"), F.sum(F.when(F.col("lateness_ms") < 0, 1).otherwise(0)).alias("early"),
                          F.percentile("lateness_ms", 0.5).alias("p50"), F.percentile("lateness_ms", 0.99).alias("p99"),
                          F.max("lateness_ms").alias("max")).first()
    summary = {
        "topics": ",".join(topics),
        "messages": int(overall["n"] or 0),
        "early": int(overall["early"] or 0),
        "p50_ms": float(overall["p50"]) if overall["p50"] is not None else None,
        "p99_ms": float(overall["p99"]) if overall["p99"] is not None else None,
        "max_ms": int(overall["max"]) if overall["max"] is not None else None,
    }
    chart_path = None
    if chart is not None:
        from spark.charts import lateness_chart

        labels = sorted(order_of, key=order_of.get)
        chart_path = lateness_chart(histogram, labels, Path(chart))
    output_path = write_table(table, output, fmt)
    delayed.unpersist()
    result = AuditResult("audit-delay", summary, table, rows, output_path, chart_path, extra={"histogram": histogram})
    if echo:
        print(result.render())
    return result


# -- transactions --------------------------------------------------------------------------
def _state_kind(state: Column) -> Column:
    upper = F.upper(F.trim(state))
    return (F.when(upper.startswith("COMMIT"), F.lit("commit"))
            .when(upper.startswith("ROLLBACK"), F.lit("rollback"))
            .otherwise(F.lit("other")))


def audit_txn(spark: SparkSession, bootstrap_servers: str, *, topic_prefix: str = DEFAULT_TOPIC_PREFIX,
              real_topics: Sequence[str] | None = None, output: str | Path | None = None, fmt: str = "parquet",
              engine: str | None = None, kafka: Mapping[str, str] | None = None, echo: bool = True) -> AuditResult:
    """Outcome of every transaction, joined from the half, op, real and max-check topics.

    What is assumed of the records (the names come from :class:`facade.names.Header`):

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
    Missing internal topics count as empty.
    """
    names = TopicNames(topic_prefix)
    half = _read(spark, bootstrap_servers, [names.half()], engine, kafka, allow_missing=True)
    halves = half.select(
        header_value(Header.TRANSACTION_ID).alias("txn_id"),
        F.col("partition").alias("half_partition"), F.col("offset").alias("half_offset"),
        header_value(Header.REAL_TOPIC).alias("real_topic"),
    ).where(F.col("txn_id").isNotNull()).cache()

    def settle(records: DataFrame, extra: list[Column], same_partition: bool) -> DataFrame:
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
        return joined.select(F.coalesce("own_id", "h.txn_id").alias("txn_id"), *[c for c in refs.columns if c not in
                                                                                 ("own_id", "ref_offset", "ref_partition")])

    op = _read(spark, bootstrap_servers, [names.op()], engine, kafka, allow_missing=True)
    ops = settle(op, [_state_kind(header_value(Header.TRANSACTION_STATE)).alias("kind")], same_partition=True)
    op_counts = ops.where(F.col("txn_id").isNotNull()).groupBy("txn_id").agg(
        F.sum(F.when(F.col("kind") == "commit", 1).otherwise(0)).alias("commit_ops"),
        F.sum(F.when(F.col("kind") == "rollback", 1).otherwise(0)).alias("rollback_ops"))
    maxcheck = _read(spark, bootstrap_servers, [names.max_check()], engine, kafka, allow_missing=True)
    max_checked = settle(maxcheck, [], same_partition=False).where(F.col("txn_id").isNotNull()).groupBy("txn_id").agg(
        F.count(F.lit(1)).alias("max_check_records"))

    if real_topics is None:
        real_topics = sorted(r["real_topic"] for r in halves.select("real_topic").distinct().collect() if r["real_topic"])
    if real_topics:
        real = _read(spark, bootstrap_servers, real_topics, engine, kafka, allow_missing=True)
        real_counts = (real.select(header_value(Header.TRANSACTION_ID).alias("txn_id"))
                       .where(F.col("txn_id").isNotNull()).groupBy("txn_id").agg(F.count(F.lit(1)).alias("real_messages")))
    else:
        real_counts = spark.createDataFrame([], "txn_id string, real_messages long")

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
    anomalies = table.agg(
        F.sum(F.when((F.col("outcome") == "committed") & (F.col("real_messages") == 0), 1).otherwise(0)).alias("missing_real"),
        F.sum(F.when(F.col("real_messages") > 1, 1).otherwise(0)).alias("duplicate_real"),
        F.sum(F.when((F.col("outcome") == "rolled_back") & (F.col("real_messages") > 0), 1).otherwise(0)).alias("rollback_leaked"),
    ).first()
    summary = {
        "transactions": sum(counts.values()),
        "committed": counts.get("committed", 0),
        "rolled_back": counts.get("rolled_back", 0),
        "unresolved": counts.get("unresolved", 0),
        "max_checked": counts.get("max_checked", 0),
        "conflict": counts.get("conflict", 0),
        "missing_real": int(anomalies["missing_real"] or 0),
        "duplicate_real": int(anomalies["duplicate_real"] or 0),
        "rollback_leaked": int(anomalies["rollback_leaked"] or 0),
    }
    rows = [r.asDict() for r in table.where(
        "outcome NOT IN ('committed', 'rolled_back') OR real_messages > 1 "
        "OR (outcome = 'committed' AND real_messages = 0) OR (outcome = 'rolled_back' AND real_messages > 0)"
    ).limit(1000).collect()]
    halves.unpersist()
    result = AuditResult("audit-txn", summary, table, rows, write_table(table, output, fmt))
    if echo:
        print(result.render())
    return result
