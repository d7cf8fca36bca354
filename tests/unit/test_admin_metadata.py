"""TopicAdmin's partition counts: a known count stands while no broker answers; a cluster is asked again
about a topic one broker does not list yet; a new topic's partitions are waited for until their leaders serve
them. A fake AdminClient answers (pure logic, no broker)."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

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
    # the first try of a look-up is short (a refusal is read from librdkafka's log between tries); the fake
    # broker's answer comes at once, so one try each
    assert client.timeouts == [admin_module.FIRST_ASK_S, admin_module.FIRST_ASK_S]
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


class FakeOffsets:
    """Answers ``list_offsets`` per partition from a script of error codes (None: served)."""

    def __init__(self, *rounds):
        self.rounds = list(rounds)
        self.asked: list[list[str]] = []

    def list_offsets(self, wanted, request_timeout: float):
        codes = self.rounds.pop(0) if len(self.rounds) > 1 else self.rounds[0]
        self.asked.append(sorted(f"{tp.topic}[{tp.partition}]" for tp in wanted))
        futures = {}
        for tp in wanted:
            future: Future = Future()
            code = codes.get(f"{tp.topic}[{tp.partition}]")
            if code is None:
                future.set_result(SimpleNamespace(offset=0))
            else:
                future.set_exception(KafkaException(KafkaError(code)))
            futures[tp] = future
        return futures


def test_a_new_partition_is_asked_about_until_its_leader_serves_it():
    client = FakeOffsets({"t[1]": KafkaError.NOT_LEADER_FOR_PARTITION}, {})
    admin = _admin(client, ttl=30.0)
    admin._await_leaders([TopicPartition("t", 0), TopicPartition("t", 1)], admin_module.time.monotonic() + 5)
    assert client.asked == [["t[0]", "t[1]"], ["t[1]"]]  # only the one not served yet is asked again


def test_a_partition_refused_for_good_is_not_waited_for():
    client = FakeOffsets({"t[0]": KafkaError.TOPIC_AUTHORIZATION_FAILED})
    admin = _admin(client, ttl=30.0)
    admin._await_leaders([TopicPartition("t", 0)], admin_module.time.monotonic() + 5)
    assert client.asked == [["t[0]"]]
