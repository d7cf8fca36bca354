"""pytest fixtures for rocketkafka (opt in: ``pytest -p rocketkafka.testing.plugin``).

Options:
    --rk-backend  embedded | kafka | external | testcontainers (default: ``ROCKETKAFKA_TEST_BACKEND``,
                  else external when ``ROCKETKAFKA_BOOTSTRAP_SERVERS`` is set, else embedded)

Fixtures:
    rk_backend   the session's broker + Redis nodes (see :mod:`rocketkafka.testing.backends`),
                 started on first use
    rk_settings  client :class:`~rocketkafka.config.Settings` for that backend, with a
                 per-test topic and Redis key prefix
    rk_topic     factory: ``rk_topic(partitions=8)`` creates a fresh topic, returns its name
    rk_group     a fresh consumer group id
    rk_redis     Redis clients, one per node

Marker:
    rk_needs(*capabilities)  the test needs these backend capabilities (``stop-redis``,
                 ``pause-redis``, ``pause-broker``, ``kill-broker``, ``multi-broker``, and the
                 probed broker features ``add-partitions``, ``delete-records``, ``offsets-by-time``,
                 ``exact-latest-offset``, ``hide-aborted``; see
                 :mod:`rocketkafka.testing.capabilities`): it is skipped, with the reason,
                 on a backend that lacks one
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Iterator

import pytest
import redis

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.testing.backends import Backend
from rocketkafka.testing.capabilities import parse_capability
from rocketkafka.testing.selection import BACKENDS, select_backend

log = logging.getLogger(__name__)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rocketkafka")
    group.addoption("--rk-backend", choices=BACKENDS, default=None,
                    help="where the broker and Redis come from [ROCKETKAFKA_TEST_BACKEND, else embedded]")


#: Why a nemesis test skips beside other workers. Its SIGKILLs, SIGSTOPs past a lease and bounded waits
#: measure the machine when three other workers share its two cores: in one such run two of six exactly-once
#: nemesis tests missed their bounds (a message 60 s late, an output not complete in 120 s), and all passed alone.
NEMESIS_ALONE = ("a nemesis test runs alone, not beside other workers: pytest -m nemesis -n 0 "
                 "(.ci/run has this pass, on Apache Kafka)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rk_needs(*capabilities): backend capabilities the test needs "
                                       "(see rocketkafka.testing.capabilities.Capability); skipped where missing")
    config.addinivalue_line("markers", "nemesis: kills and stops processes and judges exactly-once timing; runs "
                                       "alone (-m nemesis -n 0), skipped with the reason beside other workers")
    config.addinivalue_line("markers", "multi_broker: picked by the 3-node cluster run (-m multi_broker): tests that "
                                       "need 3+ brokers (set by rk_needs('multi-broker')), and tests marked to hold "
                                       "on a cluster as well as on one node")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test that needs a multi-node cluster ``multi_broker``, so a run can pick them (``-m multi_broker``),
    and skip the ``nemesis`` tests in a run of several workers (:data:`NEMESIS_ALONE`)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    for item in items:
        if any("multi-broker" in marker.args for marker in item.iter_markers("rk_needs")):
            item.add_marker(pytest.mark.multi_broker)
        if workers > 1 and item.get_closest_marker("nemesis") is not None:
            item.add_marker(pytest.mark.skip(reason=NEMESIS_ALONE))


@pytest.fixture(autouse=True)
def _rk_needs(request: pytest.FixtureRequest) -> None:
    """Skip a test marked ``rk_needs(...)`` where the session's backend lacks a capability, saying which."""
    wanted = [parse_capability(name) for marker in request.node.iter_markers("rk_needs") for name in marker.args]
    if not wanted:
        return
    backend: Backend = request.getfixturevalue("rk_backend")
    for capability in wanted:
        reason = backend.missing(capability)
        if reason is not None:
            pytest.skip(reason)


@pytest.fixture(scope="session")
def rk_backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    backend = select_backend(request.config.getoption("rk_backend"))
    if backend.name == "testcontainers":
        from rocketkafka.testing.containers import require_engine  # loaded with that backend only

        require_engine()  # no engine: a skip with the reason (a failure under CI=true), not a docker traceback
    backend.start()
    try:
        yield backend
    finally:
        backend.stop()


@pytest.fixture
def _rk_made_topics() -> set[str]:
    """The topics ``rk_topic`` made for this test (``rk_settings`` deletes them with the internal ones)."""
    return set()


@pytest.fixture
def rk_settings(rk_backend: Backend, _rk_made_topics: set[str]) -> Iterator[Settings]:
    # a per-test prefix keeps internal topics and Redis keys of tests apart
    tag = uuid.uuid4().hex[:8]
    settings = rk_backend.settings(topic_prefix=f"rk{tag}", redis_prefix=f"rk{tag}")
    yield settings
    if rk_backend.deletes_test_topics:
        _delete_topics(settings, lambda name: name in _rk_made_topics or name.startswith(f"{settings.topic_prefix}."))


@pytest.fixture
def rk_topic(rk_settings: Settings, _rk_made_topics: set[str],
             request: pytest.FixtureRequest) -> Iterator[Callable[..., str]]:
    admin = TopicAdmin(rk_settings)
    base = "t-" + "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]

    def make(partitions: int = 8, suffix: str = "") -> str:
        name = f"{base}{suffix}-{uuid.uuid4().hex[:6]}"
        admin.create(name, partitions=partitions)
        _rk_made_topics.add(name)
        return name

    yield make
    admin.close()  # now: a test's traceback may hold it in a cycle, freed later in some other thread


def _delete_topics(settings: Settings, chosen: Callable[[str], bool]) -> None:
    """Delete the topics ``chosen`` picks; a broker that cannot (down after a fault test) keeps them."""
    try:
        with TopicAdmin(settings) as admin:
            doomed = [name for name in admin.list(timeout=5) if chosen(name)]
            if doomed:
                admin.delete(doomed, timeout=10)
    except Exception as exc:  # cleaning up is a courtesy to later tests, never a failure of this one
        log.info("test topics not deleted: %s", exc)


@pytest.fixture
def rk_group(request: pytest.FixtureRequest) -> str:
    return "g-" + "".join(c if c.isalnum() else "-" for c in request.node.name)[:40] + "-" + uuid.uuid4().hex[:6]


@pytest.fixture
def rk_redis(rk_backend: Backend) -> list[redis.Redis]:
    return [redis.Redis.from_url(url) for url in rk_backend.redis_urls]
