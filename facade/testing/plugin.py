"""pytest fixtures for rocketkafka, registered as the ``pytest11`` plugin ``rocketkafka``.

Fixtures:
    rk_backend   the session's broker + Redis nodes (see :mod:`facade.testing.backends`)
    rk_settings  client :class:`~facade.config.Settings` for that backend
    rk_topic     factory: ``rk_topic(partitions=8)`` creates a fresh topic, returns its name
    rk_group     a fresh consumer group id
    rk_redis     Redis clients, one per node (flushed of this test's keys by unique prefixes)
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
import redis

from facade.admin import TopicAdmin
from facade.config import Settings
from facade.testing.backends import Backend, select_backend


@pytest.fixture(scope="session")
def rk_backend() -> Iterator[Backend]:
    backend = select_backend()
    backend.start()
    try:
        yield backend
    finally:
        backend.stop()


@pytest.fixture
def rk_settings(rk_backend: Backend) -> Settings:
    # a per-test prefix keeps internal topics and Redis keys of tests apart
    tag = uuid.uuid4().hex[:8]
    return rk_backend.settings(topic_prefix=f"rk{tag}", redis_prefix=f"rk{tag}")


@pytest.fixture
def rk_topic(rk_settings: Settings, request: pytest.FixtureRequest) -> Callable[..., str]:
    admin = TopicAdmin(rk_settings)
    base = "t-" + "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]

    def make(partitions: int = 8, suffix: str = "") -> str:
        name = f"{base}{suffix}-{uuid.uuid4().hex[:6]}"
        admin.create(name, partitions=partitions)
        return name

    return make


@pytest.fixture
def rk_group(request: pytest.FixtureRequest) -> str:
    return "g-" + "".join(c if c.isalnum() else "-" for c in request.node.name)[:40] + "-" + uuid.uuid4().hex[:6]


@pytest.fixture
def rk_redis(rk_backend: Backend) -> list[redis.Redis]:
    return [redis.Redis.from_url(url) for url in rk_backend.redis_urls]
