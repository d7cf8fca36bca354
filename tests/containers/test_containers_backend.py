"""The testcontainers backend, for real: a broker and three Redis nodes in containers.

Needs a Docker-compatible engine (Docker, or podman's API service: DESIGN §4) at
``DOCKER_HOST``. Without one these tests fail when ``CI=true`` and skip otherwise,
saying why. They start their own :class:`ContainersBackend`, whatever the session's
``rk_backend`` is.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from docker import DockerClient

from rocketkafka.testing.containers import ContainersBackend, engine_client, require_engine

pytestmark = [pytest.mark.containers, pytest.mark.integration]

PARTITIONS = 3
MESSAGES = 30


@pytest.fixture(scope="module")
def backend() -> Iterator[ContainersBackend]:
    require_engine()
    with ContainersBackend(redis_nodes=3) as started:
        yield started


def create_topic(bootstrap_servers: str, partitions: int) -> str:
    """Create a fresh topic explicitly (never rely on auto-creation) and return its name."""
    name = f"tc-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    futures[name].result(timeout=30)
    return name


def produce(bootstrap_servers: str, topic: str, count: int) -> None:
    """Send ``count`` keyed messages and wait until every one is acknowledged."""
    errors: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=f"k{i % 5}", value=f"m{i}", on_delivery=on_delivery)
    assert producer.flush(30) == 0, "messages still unacknowledged after 30 s"
    assert errors == []


def consume_all(bootstrap_servers: str, topic: str, partitions: int, count: int) -> list[tuple[str, str]]:
    """Read ``count`` messages from the start of every partition; ``(key, value)`` in arrival order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": f"tc-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    received: list[tuple[str, str]] = []
    try:
        for _ in range(300):
            if len(received) >= count:
                break
            for msg in consumer.consume(num_messages=100, timeout=0.1):
                assert msg.error() is None, msg.error()
                received.append((bytes(msg.key() or b"").decode(), bytes(msg.value() or b"").decode()))
    finally:
        consumer.close()
    return received


def test_produce_and_consume_through_the_broker_container(backend: ContainersBackend) -> None:
    topic = create_topic(backend.bootstrap_servers, PARTITIONS)
    produce(backend.bootstrap_servers, topic, MESSAGES)

    received = consume_all(backend.bootstrap_servers, topic, PARTITIONS, MESSAGES)

    assert sorted(v for _, v in received) == sorted(f"m{i}" for i in range(MESSAGES))
    for key in {k for k, _ in received}:  # one key, one partition: its messages stay in send order
        sequence = [int(v[1:]) for k, v in received if k == key]
        assert sequence == sorted(sequence)


def test_created_topic_is_listed_with_its_partitions(backend: ContainersBackend) -> None:
    topic = create_topic(backend.bootstrap_servers, PARTITIONS)

    metadata = AdminClient({"bootstrap.servers": backend.bootstrap_servers}).list_topics(timeout=10)

    assert topic in metadata.topics
    assert len(metadata.topics[topic].partitions) == PARTITIONS


def test_every_redis_node_answers_ping(backend: ContainersBackend) -> None:
    assert len(backend.redis_urls) == 3
    assert len(set(backend.redis_urls)) == 3
    for url in backend.redis_urls:
        assert redis.Redis.from_url(url).ping() is True


def test_settings_point_at_the_containers(backend: ContainersBackend) -> None:
    settings = backend.settings()

    assert settings.bootstrap_servers == backend.bootstrap_servers
    assert settings.redis_urls == backend.redis_urls


def test_stopped_redis_node_fails_and_comes_back(backend: ContainersBackend) -> None:
    url = backend.redis_urls[1]
    others = [u for u in backend.redis_urls if u != url]

    backend.stop_redis(1)
    try:
        with pytest.raises(redis.ConnectionError):
            redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1).ping()
        for other in others:  # the rest of the quorum set is untouched
            assert redis.Redis.from_url(other).ping() is True
    finally:
        backend.start_redis(1)

    assert backend.redis_urls[1] == url  # same address after the restart
    node = redis.Redis.from_url(url)
    assert node.ping() is True
    assert node.set("tc-probe", "1") is True
    assert node.get("tc-probe") == b"1"


def test_stop_leaves_no_containers_behind() -> None:
    require_engine()
    backend = ContainersBackend(redis_nodes=1)
    backend.start()
    prefix = backend.name_prefix
    client = engine_client()
    try:
        assert len(_containers_named(client, prefix)) == 2
        backend.stop()
        assert _containers_named(client, prefix) == []
    finally:
        backend.stop()
        client.close()


def _containers_named(client: DockerClient, prefix: str) -> list[str]:
    return [c.name for c in client.containers.list(all=True) if c.name.startswith(prefix)]
