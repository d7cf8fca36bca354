"""What we may do, refused: a missing ACL is one error naming the resource, the operation and the principal, at
start or at the call -- a send without WRITE, a consumer without READ on its topic or its group, a transactional
id without WRITE."""

from __future__ import annotations

import pytest

from rocketkafka import AuthorizationError, Message, Producer, PushConsumer, SendError
from rocketkafka.admin import TopicAdmin
from rocketkafka.errors import SendNotAuthorizedError
from rocketkafka.exactly_once import aborted_records_hidden, probe_topic
from rocketkafka.refusals import GRANT_HINT

pytestmark = [pytest.mark.integration, pytest.mark.rk_needs("secure")]


def _redis_rule(settings) -> list[str]:
    return [f"~{settings.redis_prefix}:*", f"&{settings.redis_prefix}:*", "+@all"]


def _provision_dead_letters(rk_settings, group: str) -> str:
    """The orderly group's dead-letter topic, made by the super user (a least-privilege consumer may not create)."""
    dlq = rk_settings.topics.dead_letter(group)
    with TopicAdmin(rk_settings) as admin:
        admin.create_internal({dlq: 1})
    return dlq


def test_a_send_without_write_names_the_topic_and_the_principal(rk_user, rk_topic):
    topic, writable = rk_topic(partitions=1), rk_topic(partitions=1)
    user = rk_user(acls=[("TOPIC", topic, "LITERAL", "DESCRIBE"), ("TOPIC", writable, "LITERAL", "WRITE")])
    with Producer("pg-no-write", settings=user.settings) as producer:
        assert producer.send_sync(Message(writable, body=b"allowed")).offset >= 0
        with pytest.raises(SendError) as info:
            producer.send_sync(Message(topic, body=b"refused"))
    assert isinstance(info.value, SendNotAuthorizedError) and isinstance(info.value, AuthorizationError)
    assert str(info.value) == (f"Kafka refused WRITE on topic {topic!r} to {user.principal} "
                               f"(TOPIC_AUTHORIZATION_FAILED); {GRANT_HINT}")
    assert info.value.retriable is False


def test_a_producer_without_any_write_grant_is_told_what_an_idempotent_producer_needs(rk_user, rk_topic):
    topic = rk_topic(partitions=1)
    user = rk_user(acls=[("TOPIC", topic, "LITERAL", "DESCRIBE")])
    with Producer("pg-no-grant", settings=user.settings) as producer:
        with pytest.raises(AuthorizationError) as info:
            producer.send_sync(Message(topic, body=b"refused"))
    assert info.value.code_name == "CLUSTER_AUTHORIZATION_FAILED" and info.value.operation == "IDEMPOTENT_WRITE"
    assert "needs WRITE on the topics it writes" in str(info.value) and user.principal in str(info.value)


def test_a_push_consumer_without_read_on_its_topic_is_refused_at_start(rk_user, rk_topic, rk_group, rk_settings):
    topic = rk_topic(partitions=2)
    dlq = _provision_dead_letters(rk_settings, rk_group)
    user = rk_user(acls=[("TOPIC", topic, "LITERAL", "DESCRIBE"), ("TOPIC", dlq, "LITERAL", "WRITE"),
                         ("GROUP", rk_group, "LITERAL", "READ")], redis_rule=_redis_rule(rk_settings))
    consumer = PushConsumer(rk_group, settings=user.settings, orderly=True)
    consumer.subscribe(topic, lambda msg: None)
    with pytest.raises(AuthorizationError) as info:
        consumer.start()
    assert str(info.value).startswith(f"Kafka refused READ on topic {topic!r} to {user.principal} "
                                      "(TOPIC_AUTHORIZATION_FAILED: its grants on it allow DESCRIBE only)")
    assert consumer.state.value == "closed"


def test_a_push_consumer_without_read_on_its_group_is_refused_at_start(rk_user, rk_topic, rk_group, rk_settings):
    topic = rk_topic(partitions=2)
    dlq = _provision_dead_letters(rk_settings, rk_group)
    user = rk_user(acls=[("TOPIC", topic, "LITERAL", "READ"), ("TOPIC", dlq, "LITERAL", "WRITE")],
                   redis_rule=_redis_rule(rk_settings))
    consumer = PushConsumer(rk_group, settings=user.settings, orderly=True)
    consumer.subscribe(topic, lambda msg: None)
    with pytest.raises(AuthorizationError) as info:
        consumer.start()
    assert str(info.value) == (f"Kafka refused READ on group {rk_group!r} to {user.principal} "
                               f"(GROUP_AUTHORIZATION_FAILED); {GRANT_HINT}")


def test_a_topic_the_principal_may_not_describe_is_not_called_missing(rk_user, rk_topic):
    topic = rk_topic(partitions=1)
    user = rk_user(acls=[])
    with TopicAdmin(user.settings) as admin:
        with pytest.raises(AuthorizationError) as info:
            admin.partitions(topic)
    assert str(info.value).startswith(f"Kafka refused DESCRIBE on topic {topic!r} to {user.principal} "
                                      "(TOPIC_AUTHORIZATION_FAILED: Kafka hides from this principal whether")


def test_a_transactional_id_without_write_is_named(rk_user, rk_settings, rk_group):
    probe = probe_topic(rk_settings)
    with TopicAdmin(rk_settings) as admin:
        admin.create_internal({probe: 1})
    user = rk_user(acls=[("TOPIC", probe, "LITERAL", "WRITE")])
    with pytest.raises(AuthorizationError) as info:  # the first init_transactions of every exactly-once start
        aborted_records_hidden(user.settings, timeout=30, transactional_id_prefix="pg-eos.", group=rk_group)
    refusal = info.value
    assert (refusal.code_name, refusal.resource_type, refusal.operation, refusal.principal) == (
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "transactional id", "WRITE", user.principal)
    assert refusal.resource.startswith("pg-eos.~probe-") and repr(refusal.resource) in str(refusal)
