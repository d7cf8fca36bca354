"""PySpark over rocketkafka topics: the Kafka source (JVM or Python), RocketMQ columns, audits.

- :func:`read_messages` / :func:`read_message_stream`: Spark's Kafka source options
  and schema; the JVM ``kafka`` source where it loads, else :class:`KafkaDataSource`
  (``rocketkafka-kafka``, PySpark's Python Data Source API).
- :func:`rocketmq_view`, :func:`filter_tags`, :func:`dedup_by_msg_id`, :func:`decode_avro`:
  RocketMQ semantics as DataFrame transformations.
- :func:`audit_order`, :func:`audit_delay`, :func:`audit_txn`: batch audit jobs
  (``rocketkafka spark audit-*``); :func:`bench_spark`: the read benchmark.
"""

from spark.audit import AuditResult, audit_delay, audit_order, audit_txn
from spark.bench import bench_spark
from spark.engine import ENGINE_ENV, choose_engine, jvm_kafka_available, read_message_stream, read_messages
from spark.errors import DataLossError, EngineUnavailableError, KafkaReadError, SourceOptionError
from spark.kafka_source import SOURCE_NAME, KafkaDataSource
from spark.rocketmq import (
    decode_avro,
    dedup_by_msg_id,
    filter_tags,
    header_value,
    rocketmq_view,
    user_properties,
)
from spark.schema import kafka_schema
from spark.session import register_source, spark_session

__all__ = [
    "AuditResult",
    "DataLossError",
    "ENGINE_ENV",
    "EngineUnavailableError",
    "KafkaDataSource",
    "KafkaReadError",
    "SOURCE_NAME",
    "SourceOptionError",
    "audit_delay",
    "audit_order",
    "audit_txn",
    "bench_spark",
    "choose_engine",
    "decode_avro",
    "dedup_by_msg_id",
    "filter_tags",
    "header_value",
    "jvm_kafka_available",
    "kafka_schema",
    "read_message_stream",
    "read_messages",
    "register_source",
    "rocketmq_view",
    "spark_session",
    "user_properties",
]
