"""TopicAdmin's partition counts: a known count stands while no broker answers; a cluster is asked again
about a topic one broker does not list yet. A fake AdminClient answers (pure logic, no broker)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from rocketkafka import admin as admin_module
from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.errors import BrokerUnavailableError, TopicNotFoundError

NOWHERE = Settings(bootstrap_servers="127.0.0.1:9", redis_urls=[])


class FakeClient:
    """Answers ``list_topics`` from a script: a dict of topics -> partitions, or None for "no broker"."""

    def __init__(self, *answers, brokers: int = 1):
        self.answers = list(answers)
        self.brokers = brokers
        self.timeouts: list[float] = []

    def list_topics(self, timeout: float):
        self.timeouts.append(timeout)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if answer is None:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed to get metadata"))
        topics = {t: SimpleNamespace(partitions=dict.fromkeys(range(n)), error=None) for t, n in answer.items()}
        return SimpleNamespace(topics=topics, brokers=dict.fromkeys(range(self.brokers)))


def _admin(client: FakeClient, ttl: float) -> TopicAdmin:
    made = TopicAdmin(NOWHERE, metadata_ttl=ttl)
    made._admin = client
    return made


def test_a_known_count_stands_while_no_broker_answers_and_refreshing_it_waits_little(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(admin_module.time, "monotonic", lambda: clock[0])
    client = FakeClient({"orders": 8}, None)
    admin = _admin(client, ttl=30.0)
    assert admin.partitions("orders", timeout=10) == 8
    clock[0] += 31.0  # aged out
    assert admin.partitions("orders", timeout=10) == 8  # the broker is away: the last count
    assert client.timeouts == [10, admin_module.STALE_REFRESH_S]
    clock[0] += admin_module.STALE_REFRESH_S / 2  # stands a moment: not asked again at once
    assert admin.partitions("orders", timeout=10) == 8 and len(client.timeouts) == 2
    clock[0] += admin_module.STALE_REFRESH_S
    assert admin.partitions("orders", timeout=10) == 8 and len(client.timeouts) == 3


def test_without_a_known_count_an_unreachable_broker_is_an_error():
    admin = _admin(FakeClient(None), ttl=30.0)
    with pytest.raises(BrokerUnavailableError):
        admin.partitions("orders")


def test_a_cluster_is_asked_again_about_a_topic_not_listed_yet(monkeypatch):
    monkeypatch.setattr(admin_module, "NEW_TOPIC_PROPAGATION_S", 5.0)
    client = FakeClient({}, {}, {"orders": 4}, brokers=3)
    assert _admin(client, ttl=30.0).partitions("orders") == 4
    assert len(client.timeouts) == 3


def test_a_single_brokers_answer_is_final(monkeypatch):
    client = FakeClient({}, {"orders": 4}, brokers=1)
    with pytest.raises(TopicNotFoundError):
        _admin(client, ttl=30.0).partitions("orders")
    assert len(client.timeouts) == 1
