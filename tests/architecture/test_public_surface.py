"""Each package's public surface, pinned: what ``from rocketkafka.<package> import *`` gives, resolvable and documented.

A name added to or dropped from a package's ``__all__`` is an API change; this test makes
it a visible one (update the list here in the same change). Every exported class and
function has a docstring of its own, so has every public method and property those classes
define, and every exported constant has a ``#:`` comment (the API reference shows them all:
docs/reference/api); lazily exported names (the root package's consumer and transaction
classes) resolve.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect

import pytest

SURFACE: dict[str, list[str]] = {
    "rocketkafka": [
        'AsyncProducer', 'AuthenticationError', 'AuthorizationError', 'AvroSerde', 'ConfigError', 'ConsumeFromWhere',
        'ConsumeOrderlyStatus', 'ConsumeStatus',
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
        'DeadLetter', 'Deployment', 'FoundMessage', 'Granted', 'GroupStatus', 'InternalTopicHealth', 'KafkaAcl', 'LevelBacklog',
        'LockView', 'PartitionProgress', 'PendingHalf', 'Permissions', 'RedisRule', 'Resent', 'ResetError',
        'ResetOutcome', 'Role', 'TraceEvent', 'all_permissions', 'apply_kafka_acls', 'apply_redis_rule',
        'consumer_progress', 'consumer_status', 'create_scram_user', 'dead_letter', 'dead_letters', 'delay_backlog', 'deployment_topics', 'grant_role',
        'group_topics', 'internal_topics', 'kafka_acls_commands', 'lock_views',
        'parse_target', 'pending_transactions', 'permissions', 'permissions_json', 'provision_topics', 'query_by_id',
        'query_by_key', 'remove_kafka_acls', 'resend_dead_letters', 'reset_offset', 'trace_of', 'user_properties',
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
        'AsyncTransactionProducer', 'CheckerMetrics', 'CheckerOptions', 'CheckerStats', 'TransactionCheckMessage', 'TransactionChecker',
        'TransactionError', 'TransactionListenerError', 'TransactionMQProducer', 'TransactionMessageError',
        'TransactionOptions', 'TransactionSendResult', 'TransactionStatus',
    ],
    "rocketkafka.spark": [
        'AuditEmptyError', 'AuditResult', 'DataLossError', 'ENGINE_ENV', 'EngineUnavailableError',
        'KafkaAuthorizationError', 'KafkaDataSource', 'KafkaReadError', 'SOURCE_NAME', 'SourceOptionError', 'TRACE_SCHEMA',
        'audit_delay', 'audit_order',
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


def _own_public_members(cls: type) -> list[str]:
    """The methods and properties ``cls`` defines itself (not its dataclass or pydantic fields)."""
    fields = set(getattr(cls, "__dataclass_fields__", {})) | set(getattr(cls, "model_fields", {}))
    members = []
    for name, value in vars(cls).items():
        if name.startswith("_") or name in fields:
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if inspect.isfunction(value) or isinstance(value, property):
            members.append(name)
    return members


@pytest.mark.parametrize("package", sorted(SURFACE))
def test_every_public_method_and_property_is_documented(package):
    module = importlib.import_module(package)
    undocumented = []
    for name in module.__all__:
        value = getattr(module, name)
        if not inspect.isclass(value):
            continue
        if not vars(value).get("__doc__"):  # its own, not a base class's
            undocumented.append(name)
        # an override without a docstring of its own is documented by the method it overrides
        undocumented += [f"{name}.{member}" for member in _own_public_members(value)
                         if not inspect.getdoc(getattr(value, member))]
    assert undocumented == [], f"{package}: public classes, methods or properties without a docstring"


def _doc_comment(module_name: str, name: str) -> bool | None:
    """Whether ``name``'s module-level assignment in ``module_name`` has a ``#:`` comment above it or a
    docstring after it; None when the module does not assign it (it imports it from elsewhere)."""
    source = importlib.util.find_spec(module_name).origin
    text = open(source).read()
    lines, body = text.splitlines(), ast.parse(text).body
    for index, node in enumerate(body):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            after = body[index + 1] if index + 1 < len(body) else None
            documented_after = isinstance(after, ast.Expr) and isinstance(getattr(after, "value", None), ast.Constant) \
                and isinstance(after.value.value, str)
            return lines[node.lineno - 2].strip().startswith("#:") or documented_after
    return None


def _origin(package: str, name: str) -> str:
    """The module a package's ``__init__`` imports ``name`` from (the package itself when it assigns it)."""
    init = importlib.util.find_spec(package).origin
    for node in ast.walk(ast.parse(open(init).read())):
        if isinstance(node, ast.ImportFrom) and node.module and any(a.name == name for a in node.names):
            return node.module
    return package


@pytest.mark.parametrize("package", sorted(SURFACE))
def test_every_exported_constant_has_a_doc_comment(package):
    module = importlib.import_module(package)
    bare = [name for name in module.__all__ if not name.startswith("__")
            and not (inspect.isclass(getattr(module, name)) or callable(getattr(module, name)))
            and not _doc_comment(_origin(package, name), name)]
    assert bare == [], f"{package}: exported constants without a #: comment above their assignment"
