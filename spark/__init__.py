"""PySpark over rocketkafka topics: the Kafka source (JVM or Python), RocketMQ columns, audits.

- :func:`read_messages` / :func:`read_message_stream`: Spark's Kafka source options
  and schema; the JVM ``kafka`` source where it loads, else :class:`KafkaDataSource`
  (``rocketkafka-kafka``, PySpark's Python Data Source API).
- :func:`rocketmq_view`, :func:`filter_tags`, :func:`dedup_by_msg_id`, :func:`decode_avro`:
  RocketMQ semantics as DataFrame transformations.
- :func:`audit_order`, :func:`audit_delay`, :func:`audit_txn`: batch audit jobs
  (``rocketkafka spark audit-*``) that say what they read and refuse to report on nothing.
- :func:`spark_session` (classic masters and Spark Connect) and :func:`register`
  (the Python source in any session; returns its format name).

Needs the ``[spark]`` extra (PySpark, pyarrow, pandas); without it importing this
package raises :class:`~rocketkafka.extras.MissingExtraError` naming the extra.
"""

from rocketkafka.extras import require

for _module in ("pyspark", "pyarrow", "pandas"):
    require(_module, "spark", "rocketkafka.spark")

from rocketkafka.spark.audit import AuditResult, audit_delay, audit_order, audit_txn
from rocketkafka.spark.engine import ENGINE_ENV, choose_engine, jvm_kafka_available, read_message_stream, read_messages
from rocketkafka.spark.errors import (
    AuditEmptyError,
    DataLossError,
    EngineUnavailableError,
    KafkaAuthorizationError,
    KafkaReadError,
    SourceOptionError,
    spark_error_line,
)
from rocketkafka.spark.kafka_source import SOURCE_NAME, KafkaDataSource
from rocketkafka.spark.avro_bodies import decode_avro
from rocketkafka.spark.rocketmq import (
    dedup_by_msg_id,
    filter_tags,
    header_value,
    rocketmq_view,
    user_properties,
)
from rocketkafka.spark.schema import kafka_schema
from rocketkafka.spark.session import register, register_source, spark_session
from rocketkafka.spark.trace_table import TRACE_SCHEMA, trace_view

__all__ = [
    "AuditEmptyError",
    "AuditResult",
    "DataLossError",
    "ENGINE_ENV",
    "EngineUnavailableError",
    "KafkaAuthorizationError",
    "KafkaDataSource",
    "KafkaReadError",
    "SOURCE_NAME",
    "SourceOptionError",
    "TRACE_SCHEMA",
    "audit_delay",
    "audit_order",
    "audit_txn",
    "choose_engine",
    "decode_avro",
    "dedup_by_msg_id",
    "filter_tags",
    "header_value",
    "jvm_kafka_available",
    "kafka_schema",
    "read_message_stream",
    "read_messages",
    "register",
    "register_source",
    "rocketmq_view",
    "spark_error_line",
    "spark_session",
    "trace_view",
    "user_properties",
]
