"""The differential conformance suite's fixtures: every test runs once per client module on the same broker.

``kafka_module`` is ``confluent_kafka`` or ``rocketkafka.kafka``; ``conf(**extra)`` is the config dict
for that module (ours also gets the lock table's Redis nodes and a per-test topic prefix, which
confluent-kafka would refuse as unknown keys). Tests assert the *same* observable results for
both: what the other module does is never looked at, each result is compared with a fixed
expectation, so a difference fails exactly one of the two parametrized cases.
"""

from __future__ import annotations

import importlib
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from rocketkafka.testing.reading import read_all

MODULES = ["confluent_kafka", "rocketkafka.kafka"]


@pytest.fixture(params=MODULES)
def kafka_module(request: pytest.FixtureRequest) -> Any:
    return importlib.import_module(request.param)


@pytest.fixture
def ours(kafka_module: Any) -> bool:
    return kafka_module.__name__ == "rocketkafka.kafka"


@pytest.fixture
def conf(rk_settings, ours) -> Callable[..., dict[str, Any]]:
    def make(**extra: Any) -> dict[str, Any]:
        config = {"bootstrap.servers": rk_settings.bootstrap_servers, **extra}
        if ours:
            config.update({"rocketkafka.redis.urls": ",".join(rk_settings.redis_urls),
                           "rocketkafka.topic.prefix": rk_settings.topic_prefix,
                           "rocketkafka.redis.prefix": rk_settings.redis_prefix})
        return config

    return make


@pytest.fixture
def group() -> str:
    return f"conf-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def records_of(rk_settings) -> Callable[[str], list[tuple]]:
    """Every record of a topic as comparable tuples, in (partition, offset) order (the test oracle)."""
    def read(topic: str) -> list[tuple]:
        records = read_all(rk_settings.bootstrap_servers, topic)
        return sorted((r.partition(), r.offset(), r.key(), r.value(), r.headers(), r.timestamp()) for r in records)

    return read


@pytest.fixture
def filled(rk_settings, rk_topic) -> Callable[..., str]:
    """A topic with ``n`` records per partition (values ``p-i``), written by plain confluent-kafka."""
    from confluent_kafka import Producer

    def make(partitions: int = 2, n: int = 5) -> str:
        topic = rk_topic(partitions=partitions)
        p = Producer({"bootstrap.servers": rk_settings.bootstrap_servers, "linger.ms": 0})
        for part in range(partitions):
            for i in range(n):
                p.produce(topic, f"{part}-{i}".encode(), key=f"k{i}".encode(), partition=part, timestamp=1_700_000_000_000 + i)
        assert p.flush(10) == 0
        return topic

    return make


def drain(consumer: Any, want: int, timeout: float = 30.0, eof: bool = False) -> list[Any]:
    """Poll until ``want`` messages (errors and EOF events included when ``eof``) or ``timeout``."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error() is None or eof:
            got.append(msg)
    return got


@pytest.fixture
def drain_fn() -> Callable[..., list[Any]]:
    return drain
