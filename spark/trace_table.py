"""Message trace events (:mod:`rocketkafka.trace`) as a Spark table: one row per event, one column per field.

The trace topic is read like any other (the JVM connector or our Python source,
:func:`~rocketkafka.spark.engine.read_messages`); :func:`trace_view` parses each record's JSON
value into the columns of :data:`TRACE_SCHEMA`, so the life of messages can be queried in SQL::

    >>> events = trace_view(read_messages(spark, {"kafka.bootstrap.servers": bs, "subscribe": "rk.trace"}))  # doctest: +SKIP
    >>> events.where("event = 'DEAD_LETTERED'").groupBy("group").count()                               # doctest: +SKIP
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType, StructField, StructType

from rocketkafka.errors import ConfigError
from rocketkafka.trace import TRACE_FIELDS

_TYPES = {"ts": LongType(), "partition": IntegerType(), "offset": LongType(), "level": IntegerType(),
          "due": LongType(), "to_partition": IntegerType(), "elapsed_ms": DoubleType(),
          "reconsume_times": IntegerType()}

#: Columns of :func:`trace_view` (every field an event may carry; absent ones are null).
TRACE_SCHEMA = StructType([StructField(name, _TYPES.get(name, StringType())) for name in TRACE_FIELDS])


def trace_view(df: DataFrame) -> DataFrame:
    """Trace records (Kafka source schema) as events: :data:`TRACE_SCHEMA` plus ``event_time`` (a timestamp).

    Records that are not trace JSON come out with null fields (``from_json`` is lenient).

    Raises:
        ConfigError: the DataFrame has no ``value`` column.
    """
    if "value" not in df.columns:
        raise ConfigError("the DataFrame has no 'value' column: read the trace topic with read_messages()")
    parsed = df.select(F.from_json(F.col("value").cast("string"), TRACE_SCHEMA).alias("e")).select("e.*")
    return parsed.withColumn("event_time", F.timestamp_millis(F.col("ts")))
