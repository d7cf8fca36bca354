"""Refusals a secured cluster hides are named where they are met (issue 32: each role with one ACL less): a real
topic the forwarder may not see, a check-request topic the checker may neither see nor create, a retry copy's delay
topic, configs the admin may not describe, a fetch or a group the admin's reader may not read -- each one error
naming the resource and the principal, never a dead letter, a dead poll thread, a timeout or an empty answer."""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.deliveries import BatchAck
from rocketkafka.delay.forward_handler import REFUSED_PAUSE_MS, ForwardHandler
from rocketkafka.delay.metrics import ForwarderMetrics
from rocketkafka.errors import AuthorizationError, ConfigError
from rocketkafka.names import TopicNames
from rocketkafka.operations.reading import LogReader
from rocketkafka.operations.topics import warn_not_judged
from rocketkafka.ordering.work.failures import WriteUntilDurable
from rocketkafka.refusals import REFUSALS, kafka_refusal
from rocketkafka.schedule.levels import DelayConfig
from rocketkafka.schedule.tiers import Tiers
from rocketkafka.txn.matching import Decision
from rocketkafka.txn.options import CheckerOptions
from rocketkafka.txn.scanning import Scanner
from rocketkafka.txn.stats import CheckerStats

SASL = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "app",
        "sasl.password": "pw-Secret-1"}


@pytest.fixture(autouse=True)
def _fresh_refusals():
    REFUSALS.clear()
    yield
    REFUSALS.clear()


def _refusing(code: int) -> Future:
    future: Future = Future()
    future.set_exception(KafkaException(KafkaError(code)))
    return future


def _hidden(topic: str) -> AuthorizationError:
    return AuthorizationError("kafka", "TOPIC_AUTHORIZATION_FAILED", "topic", topic, "DESCRIBE", "User:fwd",
                              detail="Kafka hides from this principal whether the topic exists")


def test_a_real_topic_hidden_from_the_forwarder_waits_named_as_the_write_it_needs_and_is_no_dead_letter():
    tiers = Tiers(TopicNames("rk"), DelayConfig(levels="1s", partitions=1))
    dead: list[str] = []

    def lookup(topic: str) -> int:
        raise _hidden(topic)

    handler = ForwardHandler(tiers, object(), {}, lookup, lambda record, reason: dead.append(reason),
                             ForwarderMetrics(), 60_000, principal="User:fwd")
    record = SimpleNamespace(timestamp=lambda: (0, 0))
    pause = handler._not_plain(object(), tiers.levels[0], record, 0, 0, "orders", 0, [], [], BatchAck(), [], None)
    assert pause == REFUSED_PAUSE_MS and dead == []
    assert [text for text in REFUSALS.standing() if "Kafka refused WRITE on topic 'orders' to User:fwd" in text]


def test_a_check_topic_the_checker_may_neither_see_nor_create_decides_nothing_and_is_told():
    written, resets = [], []

    def ensure(groups: set[str]) -> None:
        raise ConfigError("missing topic(s) rk.txn.check.pay: ... refused to create them (TOPIC_AUTHORIZATION_FAILED: "
                          "User:checker lacks CREATE ...)")

    sender = SimpleNamespace(produce=lambda *a, **k: written.append(a), principal="User:checker")
    markers = SimpleNamespace(lookup=lambda txns: {})
    scanner = Scanner(TopicNames("rk"), sender, markers, CheckerOptions(), CheckerStats(), lambda tp: {}, ensure)
    part = SimpleNamespace(half_tp=("rk.txn.half", 0), index=0, reset=resets.append)
    half = SimpleNamespace(producer_group="pay", transaction_id="tx-1")
    assert scanner._act(part, [(5, Decision.CHECK, half, None)]) is False
    assert written == [] and resets == [{}]  # nothing re-written (no check counted), read again from the commit
    assert [text for text in REFUSALS.standing() if "the check-request topics" in text and "User:checker" in text]


def test_a_retry_copy_whose_topic_may_neither_be_seen_nor_created_is_told_once_a_minute(caplog):
    tries = []

    def write() -> None:
        tries.append(time.monotonic())
        if len(tries) < 3:
            raise ConfigError("missing topic(s) rk.delay.level.03: ... (TOPIC_AUTHORIZATION_FAILED: User:app ...)")

    with caplog.at_level(logging.WARNING):
        WriteUntilDurable(lambda: False)(write)
    assert len(tries) == 3
    told = [r.getMessage() for r in caplog.records if "rk.delay.level.03" in r.getMessage()]
    assert len(told) == 1 and "waiting and retrying" in told[0]


class _ConfigBroker:
    """An AdminClient stand-in whose DescribeConfigs no ACL allows."""

    def list_topics(self, timeout=None):
        return SimpleNamespace(topics={}, brokers={1: None})

    def describe_configs(self, resources, **_):
        return {r: _refusing(KafkaError.CLUSTER_AUTHORIZATION_FAILED if r.restype.name == "BROKER"
                             else KafkaError.TOPIC_AUTHORIZATION_FAILED) for r in resources}


def test_configs_kafka_refuses_to_describe_are_not_judged_and_said_so(caplog):
    admin = TopicAdmin(Settings(bootstrap_servers="127.0.0.1:1", kafka=SASL))
    admin._admin = _ConfigBroker()  # type: ignore[assignment]
    assert admin.broker_default_replication() is None
    assert admin.topic_configs(["rk.txn.half", "rk.txn.op"], "min.insync.replicas") == {"rk.txn.half": None,
                                                                                          "rk.txn.op": None}
    with caplog.at_level(logging.WARNING):
        warn_not_judged(admin)
    assert [r.getMessage() for r in caplog.records] == [
        "the broker's default replication factor not judged: Kafka refused DESCRIBE_CONFIGS on cluster 'kafka-cluster' "
        "to User:app (CLUSTER_AUTHORIZATION_FAILED); grant it (`rocketkafka acls` prints what each role needs)",
        "min.insync.replicas not judged: Kafka refused DESCRIBE_CONFIGS on topic 'rk.txn.half' to User:app "
        "(TOPIC_AUTHORIZATION_FAILED); grant it (`rocketkafka acls` prints what each role needs)"]


def _reader(kafka: dict) -> LogReader:
    reader = LogReader.__new__(LogReader)  # no clients: the refusals are read from what they answered
    reader.settings, reader.timeout = Settings(bootstrap_servers="127.0.0.1:1", kafka=kafka), 1.0
    reader.admin = SimpleNamespace(client=SimpleNamespace(describe_consumer_groups=lambda groups, **_: {
        g: _refusing(KafkaError.GROUP_AUTHORIZATION_FAILED) for g in groups}))
    return reader


def test_a_fetch_the_reader_may_not_make_is_named_and_its_own_groups_coordinator_is_none_of_its_business():
    reader = _reader(SASL)
    with pytest.raises(AuthorizationError, match=r"Kafka refused READ on topic 'orders' to User:app"):
        reader._refused(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), "orders")
    reader._refused(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED), "orders")  # the throw-away group: no grant


def test_a_group_the_reader_may_not_describe_is_named_before_librdkafka_would_time_out():
    with pytest.raises(AuthorizationError, match=r"Kafka refused DESCRIBE on group 'billing' to User:app"):
        _reader(SASL)._check_group("billing")
    _reader({})._check_group("billing")  # nothing is asked where nothing is secured


def test_an_idempotent_producer_refused_its_id_is_told_the_topic_it_was_writing():
    refusal = kafka_refusal(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED, "Failed to acquire idempotence PID"),
                            "orders", "WRITE", "User:app")
    assert refusal is not None and "WRITE on the topics it writes ('orders' here)" in str(refusal)
