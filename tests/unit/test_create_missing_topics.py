"""A client creates only the topics the broker does not list, so a principal without CREATE runs where its
topics exist; a missing one it may not create fails naming the topic and the grant (issue 32)."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.errors import AuthorizationError, ConfigError


class _Broker:
    """An AdminClient stand-in: lists ``topics``; creating answers TOPIC_AUTHORIZATION_FAILED unless ``may_create``
    (as Kafka does without the grant, for existing topics too)."""

    def __init__(self, topics: set[str], may_create: bool) -> None:
        self.topics, self.may_create, self.asked = set(topics), may_create, []

    def list_topics(self, timeout=None):
        meta = {t: SimpleNamespace(partitions={0: None}, error=None) for t in self.topics}
        return SimpleNamespace(topics=meta, brokers={1: None})

    def create_topics(self, new, **_):
        answers = {}
        for topic in new:
            self.asked.append(topic.topic)
            future: Future = Future()
            if self.may_create:
                self.topics.add(topic.topic)
                future.set_result(None)
            else:
                future.set_exception(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))
            answers[topic.topic] = future
        return answers

    def list_offsets(self, specs, **_):
        answers = {}
        for tp in specs:
            future: Future = Future()
            future.set_result(None)
            answers[tp] = future
        return answers


def _admin(broker: _Broker) -> TopicAdmin:
    admin = TopicAdmin(Settings(bootstrap_servers="127.0.0.1:1"))
    admin._admin = broker  # type: ignore[assignment]
    return admin


def test_existing_topics_are_not_asked_for_so_no_create_grant_is_needed():
    broker = _Broker({"rk.retry.g", "rk.dlq.g"}, may_create=False)
    assert _admin(broker).create_many({"rk.retry.g": 1, "rk.dlq.g": 1}) == []
    assert broker.asked == []


def test_only_the_missing_topics_are_created():
    broker = _Broker({"rk.retry.g"}, may_create=True)
    assert _admin(broker).create_many({"rk.retry.g": 1, "rk.dlq.g": 1}) == ["rk.dlq.g"]
    assert broker.asked == ["rk.dlq.g"]


def test_a_missing_topic_it_may_not_create_names_the_topic_and_the_grant():
    broker = _Broker({"rk.retry.g"}, may_create=False)
    with pytest.raises(ConfigError) as refused:
        _admin(broker).create_many({"rk.retry.g": 1, "rk.dlq.g": 1})
    message = str(refused.value)
    assert "rk.dlq.g" in message and "rk.retry.g" not in message
    assert isinstance(refused.value, AuthorizationError) and refused.value.operation == "CREATE"
    assert refused.value.topics == ["rk.dlq.g"] and refused.value.resource == "rk.dlq.g"
    assert "lacks CREATE on TOPIC rk.dlq.g" in message and "rocketkafka admin provision" in message


def test_a_missing_topic_it_may_not_create_names_the_principal_refused():
    sasl = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "app",
            "sasl.password": "pw-Secret-1"}
    admin = TopicAdmin(Settings(bootstrap_servers="127.0.0.1:1", kafka=sasl))
    admin._admin = _Broker(set(), may_create=False)  # type: ignore[assignment]
    with pytest.raises(ConfigError, match=r"or User:app may not DESCRIBE them.*User:app lacks CREATE on TOPIC rk\.dlq\.g"):
        admin.create_many({"rk.dlq.g": 1})


def test_exist_ok_false_still_asks_for_every_topic():
    broker = _Broker({"t"}, may_create=True)
    _admin(broker).create_many({"t": 1, "u": 1}, exist_ok=False)
    assert broker.asked == ["t", "u"]
