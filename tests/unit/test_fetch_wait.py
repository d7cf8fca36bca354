"""The engine's fetch wait: a setting per broker (long where a fetch is answered at once, short on Tansu)."""

from __future__ import annotations

import pytest

from rocketkafka import ConfigError, Settings
from rocketkafka.config import DEFAULT_FETCH_WAIT_MS, SHORT_FETCH_WAIT_MS
from rocketkafka.config_file import values_of_properties
from rocketkafka.ordering.engine.engine import OwnershipEngine
from rocketkafka.ordering.engine.options import OwnershipOptions
from rocketkafka.tools.bench.contenders import engine_fetch

BROKER = "127.0.0.1:9092"


def test_unset_it_is_the_default_for_brokers_that_answer_a_fetch_at_once():
    s = Settings(bootstrap_servers=BROKER)
    assert s.fetch_wait_ms is None and s.engine_fetch_wait_ms == DEFAULT_FETCH_WAIT_MS == 100
    assert "ROCKETKAFKA_FETCH_WAIT_MS" not in s.environment()


def test_from_the_environment_the_config_file_and_back(monkeypatch):
    monkeypatch.setenv("ROCKETKAFKA_FETCH_WAIT_MS", "10")
    s = Settings.load({"bootstrap.servers": BROKER})
    assert s.engine_fetch_wait_ms == SHORT_FETCH_WAIT_MS
    assert s.environment()["ROCKETKAFKA_FETCH_WAIT_MS"] == "10"
    assert values_of_properties("rocketkafka.fetch.wait.ms=250")["fetch_wait_ms"] == "250"


@pytest.mark.parametrize("bad", [-1, 300_001])
def test_a_wait_librdkafka_refuses_is_refused_naming_the_field(bad):
    with pytest.raises(ConfigError, match="fetch_wait_ms"):
        Settings.load({"bootstrap.servers": BROKER}, fetch_wait_ms=bad)


def test_the_engine_and_the_bench_floors_fetch_with_it_and_the_callers_config_wins():
    class NoStep:
        def topics(self):
            return []

    settings = Settings(bootstrap_servers=BROKER, fetch_wait_ms=10)
    engine = OwnershipEngine("g", settings, OwnershipOptions(), NoStep())  # type: ignore[arg-type]
    assert engine._kafka_config["fetch.wait.max.ms"] == 10
    assert engine_fetch(settings)["fetch.wait.max.ms"] == 10
    mine = OwnershipEngine("g", settings, OwnershipOptions(), NoStep(), kafka_config={"fetch.wait.max.ms": 7})  # type: ignore[arg-type]
    assert mine._kafka_config["fetch.wait.max.ms"] == 7


def test_an_empty_variable_means_the_default(monkeypatch):
    monkeypatch.setenv("ROCKETKAFKA_FETCH_WAIT_MS", "")
    assert Settings.load({"bootstrap.servers": BROKER}).engine_fetch_wait_ms == DEFAULT_FETCH_WAIT_MS
