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
- least privilege: :func:`permissions` of a :class:`Role` in a :class:`Deployment` (Kafka ACLs, the Redis
  rule), printed by ``rocketkafka acls`` and applied by :func:`apply_kafka_acls` / :func:`apply_redis_rule`;
  :func:`provision_topics` creates a deployment's internal topics (``rocketkafka admin provision``), and
  :func:`grant_role` gives a user a role: credential, ACLs, Redis rule (``rocketkafka admin grant``)
"""

from rocketkafka.operations.acl_output import (
    apply_kafka_acls,
    apply_redis_rule,
    kafka_acls_commands,
    permissions_json,
    remove_kafka_acls,
)
from rocketkafka.operations.granting import Granted, create_scram_user, grant_role, user_properties
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
from rocketkafka.operations.permissions import (
    Deployment,
    KafkaAcl,
    Permissions,
    RedisRule,
    Role,
    all_permissions,
    permissions,
)
from rocketkafka.operations.provisioning import deployment_topics, provision_topics
from rocketkafka.operations.query import FoundMessage, query_by_id, query_by_key
from rocketkafka.operations.reset import ResetError, ResetOutcome, parse_target, reset_offset
from rocketkafka.operations.topics import InternalTopicHealth, internal_topics
from rocketkafka.operations.traces import TraceEvent, trace_of
from rocketkafka.operations.transactions import PendingHalf, pending_transactions

__all__ = [
    "DeadLetter",
    "Deployment",
    "FoundMessage",
    "Granted",
    "GroupStatus",
    "InternalTopicHealth",
    "KafkaAcl",
    "LevelBacklog",
    "LockView",
    "PartitionProgress",
    "PendingHalf",
    "Permissions",
    "RedisRule",
    "Resent",
    "ResetError",
    "ResetOutcome",
    "Role",
    "TraceEvent",
    "all_permissions",
    "apply_kafka_acls",
    "apply_redis_rule",
    "consumer_progress",
    "consumer_status",
    "create_scram_user",
    "dead_letter",
    "dead_letters",
    "delay_backlog",
    "deployment_topics",
    "grant_role",
    "group_topics",
    "internal_topics",
    "kafka_acls_commands",
    "lock_views",
    "parse_target",
    "pending_transactions",
    "permissions",
    "permissions_json",
    "provision_topics",
    "query_by_id",
    "query_by_key",
    "remove_kafka_acls",
    "resend_dead_letters",
    "reset_offset",
    "trace_of",
    "user_properties",
]
