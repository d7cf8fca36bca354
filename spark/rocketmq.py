"""RocketMQ semantics on a Kafka-schema DataFrame: columns from headers, tags, dedup, Avro bodies.

Everything here is Spark SQL expressions (higher-order functions over the
``headers`` array); Avro bodies are decoded in :mod:`rocketkafka.spark.avro_bodies`. The same rules as :mod:`rocketkafka.codec` apply: system
properties are ``rk.*`` headers with UTF-8 values, user properties are the other
headers, the last header of a name wins, a record without a message id is
identified as ``topic@partition@offset``, a missing born time is the record time.

>>> view = rocketmq_view(read_messages(spark, opts, includeHeaders=True))  # doctest: +SKIP
>>> filter_tags(view, "TagA || TagB")                                       # doctest: +SKIP
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from rocketkafka.errors import ConfigError
from rocketkafka.names import HEADER_PREFIX, Header
from rocketkafka.tags import TagFilter

#: Columns of :func:`rocketmq_view`, in order.
VIEW_COLUMNS = (
    "topic", "queue_id", "queue_offset", "msg_id", "tags", "keys", "key", "body",
    "born_timestamp", "store_timestamp", "deliver_timestamp", "delay_level", "reconsume_times",
    "properties", "headers",
)


def _require_headers(df: DataFrame) -> None:
    if "headers" not in df.columns:
        raise ConfigError("the DataFrame has no 'headers' column: read the topic with includeHeaders=true")


def header_value(name: str, headers: str | Column = "headers") -> Column:
    """The UTF-8 value of the last header called ``name`` (null when absent)."""
    column = F.col(headers) if isinstance(headers, str) else headers
    matching = F.filter(column, lambda h: h["key"] == F.lit(name))
    return F.try_element_at(matching, F.lit(-1))["value"].cast("string")


def header_long(name: str, headers: str | Column = "headers") -> Column:
    """A header holding a decimal number, as a long (null when absent or not a number)."""
    return header_value(name, headers).try_cast("long")


def user_properties(headers: str | Column = "headers") -> Column:
    """``map<string,string>`` of the user (non ``rk.*``) headers with a value; the last of a name wins."""
    column = F.col(headers) if isinstance(headers, str) else headers
    size = F.size(column)
    last_of_name = F.filter(
        column,
        lambda h, i: (~h["key"].startswith(HEADER_PREFIX)) & h["value"].isNotNull()
        & ~F.exists(F.slice(column, i + 2, F.greatest(size, F.lit(1))), lambda later: later["key"] == h["key"]),
    )
    entries = F.transform(last_of_name, lambda h: F.struct(h["key"].alias("key"), h["value"].cast("string").alias("value")))
    return F.coalesce(F.map_from_entries(entries), F.create_map().cast("map<string,string>"))


def message_id(df: DataFrame) -> Column:
    """RocketMQ message id: ``msg_id`` / the ``rk.UNIQ_KEY`` header, else ``topic@partition@offset``."""
    if "msg_id" in df.columns:
        return F.col("msg_id")
    fallback = F.concat_ws("@", F.col("topic"), F.col("partition").cast("string"), F.col("offset").cast("string"))
    return F.coalesce(header_value(Header.MSG_ID), fallback) if "headers" in df.columns else fallback


def rocketmq_view(df: DataFrame) -> DataFrame:
    """RocketMQ message columns (:data:`VIEW_COLUMNS`) from a Kafka-schema DataFrame with headers.

    ``keys`` is an array (RocketMQ's space-separated KEYS), ``key`` the Kafka record
    key, ``store_timestamp`` the record timestamp, ``deliver_timestamp`` the
    DELIVER_AT header, ``delay_level`` the DELAY header; batch and streaming alike.
    """
    _require_headers(df)
    keys_text = F.trim(header_value(Header.KEYS))
    born_ms = header_long(Header.BORN_TIMESTAMP)
    return df.select(
        F.col("topic"),
        F.col("partition").alias("queue_id"),
        F.col("offset").alias("queue_offset"),
        message_id(df).alias("msg_id"),
        header_value(Header.TAGS).alias("tags"),
        F.when(F.length(keys_text) > 0, F.split(keys_text, r"\s+")).otherwise(F.array().cast("array<string>")).alias("keys"),
        F.col("key"),
        F.col("value").alias("body"),
        F.coalesce(F.timestamp_millis(born_ms), F.col("timestamp")).alias("born_timestamp"),
        F.col("timestamp").alias("store_timestamp"),
        F.timestamp_millis(header_long(Header.DELIVER_AT)).alias("deliver_timestamp"),
        header_long(Header.DELAY_LEVEL).cast("int").alias("delay_level"),
        F.coalesce(header_long(Header.RECONSUME_TIMES).cast("int"), F.lit(0)).alias("reconsume_times"),
        user_properties().alias("properties"),
        F.col("headers"),
    )


def filter_tags(df: DataFrame, expression: str | None) -> DataFrame:
    """Rows whose tag matches a subscription expression (``"*"``, ``"TagA || TagB"``).

    Works on the view (``tags`` column) or on the Kafka schema (``headers``).

    Raises:
        TagExpressionError: the expression does not parse (at the call, before any job).
    """
    parsed = TagFilter.parse(expression)
    if parsed.tags is None:
        return df
    if "tags" in df.columns:
        tag = F.col("tags")
    else:
        _require_headers(df)
        tag = header_value(Header.TAGS)
    return df.where(tag.isin(sorted(parsed.tags)))


def dedup_by_msg_id(df: DataFrame, watermark: str = "10 minutes", event_time: str | None = None) -> DataFrame:
    """One row per message id.

    Batch: the first copy in (event time, topic, partition, offset) order is kept.
    Streaming: ``dropDuplicatesWithinWatermark`` on the id, with a watermark of
    ``watermark`` on ``event_time`` (default ``store_timestamp`` or ``timestamp``):
    copies arriving further apart than the watermark are not recognised.
    """
    time_column = event_time or ("store_timestamp" if "store_timestamp" in df.columns else "timestamp")
    partition_column = "queue_id" if "queue_id" in df.columns else "partition"
    offset_column = "queue_offset" if "queue_offset" in df.columns else "offset"
    with_id = df.withColumn("_rk_dedup_id", message_id(df))
    if df.isStreaming:
        return (with_id.withWatermark(time_column, watermark)
                .dropDuplicatesWithinWatermark(["_rk_dedup_id"]).drop("_rk_dedup_id"))
    order = Window.partitionBy("_rk_dedup_id").orderBy(time_column, "topic", partition_column, offset_column)
    return with_id.withColumn("_rk_dedup_n", F.row_number().over(order)).where("_rk_dedup_n = 1").drop(
        "_rk_dedup_id", "_rk_dedup_n")
