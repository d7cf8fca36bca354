"""Each package's public surface, pinned: what ``from rocketkafka.<package> import *`` gives, resolvable and documented.

A name added to or dropped from a package's ``__all__`` is an API change; this test makes
it a visible one (update the list here in the same change). Every exported class and
function has a docstring, and lazily exported names (the root package's consumer and
transaction classes) resolve.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

SURFACE: dict[str, list[str]] = {
    "rocketkafka": [
        'AvroSerde', 'ConfigError', 'ConsumeFromWhere', 'ConsumeOrderlyStatus', 'ConsumeStatus',
        'ConsumerOptions', 'DelayConfig', 'DelayError', 'IdempotentConsumer', 'InvalidTopicNameError', 'LockError', 'Message',
        'MessageError', 'MessageExt', 'MessageModel', 'MessageSelector', 'MessageTooLargeError', 'Producer',
        'PushConsumer', 'RedisAuthError', 'RedisUnavailableError', 'RegistryAvroSerde', 'RocketKafkaError', 'SelectorError', 'SelectorSyntaxError', 'SendError', 'SendResult',
        'SendStatus', 'Settings', 'StackError', 'StateError', 'Suspend', 'TagExpressionError', 'TagFilter',
        'TopicAdmin', 'TopicNotFoundError', 'TransactionMQProducer', 'TransactionStatus', '__version__',
        'hash_selector', 'key_selector', 'random_selector',
    ],
    "rocketkafka.kafka": [
        'Consumer', 'Producer',
    ],
    "rocketkafka.operations": [
        'DeadLetter', 'FoundMessage', 'GroupStatus', 'InternalTopicHealth', 'LevelBacklog', 'LockView',
        'PartitionProgress', 'PendingHalf', 'Resent', 'ResetError', 'ResetOutcome', 'TraceEvent', 'consumer_progress',
        'consumer_status', 'dead_letter', 'dead_letters', 'delay_backlog', 'group_topics', 'internal_topics',
        'lock_views',
        'parse_target', 'pending_transactions', 'query_by_id', 'query_by_key', 'resend_dead_letters',
        'reset_offset', 'trace_of',
    ],
    "rocketkafka.ordering": [
        'MESSAGE_KEY', 'PARTITION', 'AllocationStrategy', 'Averagely', 'AveragelyByCircle', 'BatchFailure',
        'BatchHandler', 'ByConfig', 'Claim', 'ClaimContext', 'ConsistentHash', 'ConsumerMetrics',
        'ConsumerOptions', 'Health', 'Held', 'IdempotentConsumer', 'LockSettings', 'LockTable',
        'MachineRoomNearby', 'MarkState', 'Member', 'Membership', 'MembershipSettings', 'MessageBatch',
        'Outcome', 'OwnershipEngine', 'OwnershipOptions', 'PartitionSample', 'PartitionState', 'PushConsumer',
        'Run', 'State', 'Step', 'order_key_of', 'parse_json_path', 'strategy_named',
    ],
    "rocketkafka.ordering.locks": [
        'Held', 'LockSettings', 'LockTable', 'agree', 'issue_token', 'quorum', 'quorum_ttl',
        'valid_until',
    ],
    "rocketkafka.schedule": [
        'DEFAULT_LEVELS', 'DEFAULT_STEPS', 'DelayConfig', 'Tier', 'Tiers', 'format_duration',
        'parse_duration', 'step_topic',
    ],
    "rocketkafka.delay": [
        'DEFAULT_GROUP', 'DelayForwarder', 'ForwarderMetrics',
    ],
    "rocketkafka.txn": [
        'CheckerMetrics', 'CheckerOptions', 'CheckerStats', 'TransactionCheckMessage', 'TransactionChecker',
        'TransactionError', 'TransactionListenerError', 'TransactionMQProducer', 'TransactionMessageError',
        'TransactionOptions', 'TransactionSendResult', 'TransactionStatus',
    ],
    "rocketkafka.spark": [
        'AuditEmptyError', 'AuditResult', 'DataLossError', 'ENGINE_ENV', 'EngineUnavailableError',
        'KafkaDataSource', 'KafkaReadError', 'SOURCE_NAME', 'SourceOptionError', 'TRACE_SCHEMA', 'audit_delay', 'audit_order',
        'audit_txn', 'choose_engine', 'decode_avro', 'dedup_by_msg_id', 'filter_tags', 'header_value',
        'jvm_kafka_available', 'kafka_schema', 'read_message_stream', 'read_messages', 'register',
        'register_source', 'rocketmq_view', 'spark_error_line', 'spark_session', 'trace_view', 'user_properties',
    ],
    "rocketkafka.testing": [
        'BACKENDS', 'Backend', 'DevStack', 'EmbeddedBackend', 'ExternalBackend', 'HandlerCall', 'History',
        'HistoryReport', 'select_backend', 'wait_for',
    ],
}


@pytest.mark.parametrize("package", sorted(SURFACE))
def test_exports_are_pinned(package):
    assert list(importlib.import_module(package).__all__) == SURFACE[package]


@pytest.mark.parametrize("package", sorted(SURFACE))
def test_every_export_resolves_and_is_documented(package):
    module = importlib.import_module(package)
    undocumented = []
    for name in module.__all__:
        value = getattr(module, name)  # lazy names import their layer here
        if (inspect.isclass(value) or inspect.isfunction(value)) and not inspect.getdoc(value):
            undocumented.append(name)
    assert undocumented == [], f"{package}: exported without a docstring"
