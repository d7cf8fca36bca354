"""Operating rocketkafka (``rocketkafka admin``): what ``mqadmin`` and the RocketMQ dashboard answer.

Each function takes :class:`~rocketkafka.config.Settings` and returns plain dataclasses;
the CLI (:mod:`rocketkafka.tools.admin_cli`) renders them as tables or JSON.

- groups: :func:`consumer_progress`, :func:`consumer_status`, :func:`lock_views`
- :func:`reset_offset`: move a running group to a time or offset
- :func:`delay_backlog`: per delay level, what waits and when it is due
- :func:`pending_transactions`: open half messages
- dead letters: :func:`dead_letters`, :func:`dead_letter`, :func:`resend_dead_letters`
- :func:`query_by_id`, :func:`query_by_key`: find messages
- :func:`trace_of`: the life of one message (needs tracing on, :mod:`rocketkafka.trace`)
- :func:`internal_topics`: replication and ISR of the internal topics
"""

from rocketkafka.operations.dead_letters import DeadLetter, Resent, dead_letter, dead_letters, resend_dead_letters
from rocketkafka.operations.delays import LevelBacklog, delay_backlog
from rocketkafka.operations.groups import (
    GroupStatus,
    LockView,
    PartitionProgress,
    consumer_progress,
    consumer_status,
    group_topics,
    lock_views,
)
from rocketkafka.operations.query import FoundMessage, query_by_id, query_by_key
from rocketkafka.operations.reset import ResetError, ResetOutcome, parse_target, reset_offset
from rocketkafka.operations.topics import InternalTopicHealth, internal_topics
from rocketkafka.operations.traces import TraceEvent, trace_of
from rocketkafka.operations.transactions import PendingHalf, pending_transactions

__all__ = [
    "DeadLetter",
    "FoundMessage",
    "GroupStatus",
    "InternalTopicHealth",
    "LevelBacklog",
    "LockView",
    "PartitionProgress",
    "PendingHalf",
    "Resent",
    "ResetError",
    "ResetOutcome",
    "TraceEvent",
    "consumer_progress",
    "consumer_status",
    "dead_letter",
    "dead_letters",
    "delay_backlog",
    "group_topics",
    "internal_topics",
    "lock_views",
    "parse_target",
    "pending_transactions",
    "query_by_id",
    "query_by_key",
    "resend_dead_letters",
    "reset_offset",
    "trace_of",
]
