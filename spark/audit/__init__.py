"""Batch audit jobs over rocketkafka topics: ordering, delay lateness, transaction outcomes.

Each job pins the offset ranges it reads (:mod:`.reading`), computes a per-item table
with Spark, optionally writes it as Parquet or CSV, and returns an
:class:`AuditResult` that says what was read (topics, partitions, offset ranges, rows)
beside the figures. A job that would report on nothing (no topics under the prefix,
a join or filter that leaves no rows) raises
:class:`~rocketkafka.spark.errors.AuditEmptyError` instead, unless ``allow_empty``.
Nothing here prints: ``rocketkafka spark audit-*`` renders the results.
"""

from rocketkafka.spark.audit.delay import LATENESS_BUCKET_NAMES, LATENESS_BUCKETS_MS, audit_delay, delay_topic_pattern
from rocketkafka.spark.audit.order import audit_order
from rocketkafka.spark.audit.reading import PartitionRead, ReadReport, read_topics, snapshot
from rocketkafka.spark.audit.result import AuditResult, describe_reads, write_table
from rocketkafka.spark.audit.txn import audit_txn

__all__ = [
    "AuditResult", "LATENESS_BUCKETS_MS", "LATENESS_BUCKET_NAMES", "PartitionRead", "ReadReport", "audit_delay",
    "audit_order", "audit_txn", "delay_topic_pattern", "describe_reads", "read_topics", "snapshot", "write_table",
]
