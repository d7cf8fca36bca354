"""A sidecar command's start waits out an unreachable broker or Redis, and only those."""

from __future__ import annotations

import threading

import pytest

from confluent_kafka import KafkaError, KafkaException

from rocketkafka.errors import BrokerUnavailableError, ConfigError, RedisAuthError, RedisUnavailableError
from rocketkafka.tools import service_run
from rocketkafka.tools.service_run import start_when_reachable


@pytest.fixture(autouse=True)
def quick(monkeypatch):
    monkeypatch.setattr(service_run, "FIRST_RETRY_S", 0.01)
    monkeypatch.setattr(service_run, "MAX_RETRY_S", 0.02)


def test_start_is_tried_again_while_nothing_answers_then_returns_the_service(caplog):
    failures = [BrokerUnavailableError("127.0.0.1:9", 5.0), RedisUnavailableError({"redis://127.0.0.1:1": "refused"})]
    made = []

    def start():
        made.append(object())
        if failures:
            raise failures.pop(0)
        return made[-1]

    assert start_when_reachable(start, threading.Event(), "the service") is made[-1]
    assert len(made) == 3
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["the service cannot start yet"] * 2
    assert "127.0.0.1:9" in caplog.records[0].getMessage()


@pytest.mark.parametrize("error", [
    ConfigError("bad setting"),
    RedisAuthError({"redis://127.0.0.1:1": "WRONGPASS"}),
    BrokerUnavailableError("127.0.0.1:9", 5.0, KafkaException(KafkaError(KafkaError._AUTHENTICATION, "SASL"))),
], ids=["config", "redis-credentials", "kafka-credentials"])
def test_errors_no_wait_mends_end_it_at_once(error):
    calls = []

    def start():
        calls.append(1)
        raise error

    with pytest.raises(type(error)):
        start_when_reachable(start, threading.Event(), "the service")
    assert calls == [1]


def test_a_stop_while_waiting_returns_none():
    stop = threading.Event()

    def start():
        stop.set()
        raise BrokerUnavailableError("127.0.0.1:9", 5.0)

    assert start_when_reachable(start, stop, "the service") is None
