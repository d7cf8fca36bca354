"""The ``testcontainers`` test backend: a broker and Redis nodes in real containers.

Any Docker-compatible engine works (Docker, or podman's Docker API service; see
DESIGN §4 for the podman recipe). The images are settings:

- ``ROCKETKAFKA_TC_KAFKA_IMAGE``: the broker. An image whose name contains ``tansu``
  is configured through Tansu's env vars (``LISTENER_URL``, ``ADVERTISED_LISTENER_URL``,
  ``STORAGE_ENGINE``); any other is taken for ``apache/kafka`` and run as a single-node
  KRaft broker+controller through ``KAFKA_*`` env vars.
- ``ROCKETKAFKA_TC_REDIS_IMAGE``: Redis; the official ``redis`` image or ours.

Defaults: the locally built ``rocketkafka/tansu:dev`` and ``rocketkafka/redis:dev``
(``docker/build-images.sh``) when the engine has them, else ``apache/kafka:<KAFKA_VERSION>``
and ``redis:7``.

The broker listens on a host port chosen here, maps it to the same port inside the
container and advertises it: Kafka clients reconnect to the advertised address, so a
random mapping would break. Redis nodes get fixed host ports too, so that
:meth:`ContainersBackend.stop_redis` / :meth:`ContainersBackend.start_redis` keep their URLs.

Connection mode must be ``docker_host`` (``TESTCONTAINERS_CONNECTION_MODE=docker_host``
where testcontainers would guess otherwise): the advertised address is fixed before
the container exists.

>>> backend = ContainersBackend()          # doctest: +SKIP
>>> backend.start(); backend.bootstrap_servers, backend.redis_urls
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self

import docker
import redis
from confluent_kafka.admin import AdminClient
from docker.errors import APIError, DockerException, ImageNotFound
from testcontainers.core.config import ConnectionMode
from testcontainers.core.container import DockerContainer
from testcontainers.core.docker_client import DockerClient as TcDockerClient
from testcontainers.core.docker_client import get_docker_host

from rocketkafka.testing.apache_kafka import KAFKA_VERSION
from rocketkafka.testing.capabilities import Capability
from rocketkafka.testing.devstack import free_port
from rocketkafka.errors import StackError
from rocketkafka.testing.backends import Backend

log = logging.getLogger(__name__)

KAFKA_IMAGE_ENV = "ROCKETKAFKA_TC_KAFKA_IMAGE"
REDIS_IMAGE_ENV = "ROCKETKAFKA_TC_REDIS_IMAGE"
DEV_KAFKA_IMAGE = "rocketkafka/tansu:dev"
DEV_REDIS_IMAGE = "rocketkafka/redis:dev"
PUBLIC_KAFKA_IMAGE = f"apache/kafka:{KAFKA_VERSION}"  # the release the kafka backend runs
PUBLIC_REDIS_IMAGE = "redis:7"

REDIS_PORT = 6379
REDIS_ARGS = ["--bind", "0.0.0.0", "--protected-mode", "no", "--save", "", "--appendonly", "no"]
_PORT_ATTEMPTS = 3
#: How long a CI run waits for the engine to answer: podman's API service, beside four JVM brokers on two
#: cores, once took longer than one 3 s ping (CI: the engine answered the suites before and after).
CI_ENGINE_WAIT_S = 60.0
#: A client's timeout for one API call: the docker SDK's own default. Podman beside four JVM brokers once
#: took more than 5 s to answer ``/version`` (CI, stop 31), and a slow answer is not a missing engine.
ENGINE_CALL_TIMEOUT_S = 60.0


# -- the engine ------------------------------------------------------------------------
def engine_client(timeout: float = ENGINE_CALL_TIMEOUT_S) -> docker.DockerClient:
    """A Docker API client for the engine testcontainers would use (``DOCKER_HOST`` etc.)."""
    base_url = get_docker_host()
    if base_url:
        return docker.DockerClient(base_url=base_url, timeout=int(max(1, timeout)))
    return docker.from_env(timeout=int(max(1, timeout)))


def engine_description() -> str:
    """Where the engine is looked for, for messages."""
    return get_docker_host() or os.environ.get("DOCKER_HOST") or "the default Docker socket"


def require_engine() -> None:
    """In a pytest session: fail (``CI=true``) or skip (elsewhere) with the reason when no container engine answers."""
    import pytest

    in_ci = os.environ.get("CI", "").lower() == "true"
    if _engine_answers_within(CI_ENGINE_WAIT_S if in_ci else 0.0):
        return
    reason = (f"no Docker-compatible engine answers at {engine_description()}: start Docker, or podman's "
              "API service (DESIGN §4), and set DOCKER_HOST")
    if in_ci:
        pytest.fail(f"CI=true but {reason} (asked for {CI_ENGINE_WAIT_S:g} s)", pytrace=False)
    pytest.skip(reason)


def _engine_answers_within(seconds: float) -> bool:
    """Ping the engine until it answers or ``seconds`` have passed (at least once)."""
    deadline = time.monotonic() + seconds
    while not engine_available():
        if time.monotonic() >= deadline:
            return False
        time.sleep(1.0)
    return True


def engine_available(timeout: float = 3.0) -> bool:
    """True when a Docker-compatible API answers a ping at ``DOCKER_HOST`` (or the default socket)."""
    try:
        client = engine_client(timeout)
    except Exception:  # noqa: BLE001 - a probe: any failure means "no engine"
        return False
    try:
        return bool(client.ping())
    except Exception:  # noqa: BLE001
        return False
    finally:
        client.close()


def _image_present(client: docker.DockerClient, image: str) -> bool:
    try:
        client.images.get(image)
    except ImageNotFound:
        return False
    return True


@dataclass(frozen=True)
class ContainerImages:
    """The broker and Redis images to run."""

    kafka: str
    redis: str

    @property
    def tansu(self) -> bool:
        """Whether the broker image is Tansu (configured by its own env vars)."""
        return "tansu" in self.kafka.lower()

    @classmethod
    def from_env(cls) -> ContainerImages:
        """Images from ``ROCKETKAFKA_TC_*_IMAGE``, else local dev tags when present, else public ones."""
        kafka, redis_image = os.environ.get(KAFKA_IMAGE_ENV), os.environ.get(REDIS_IMAGE_ENV)
        if kafka and redis_image:
            return cls(kafka, redis_image)
        client = engine_client()
        try:
            kafka = kafka or (DEV_KAFKA_IMAGE if _image_present(client, DEV_KAFKA_IMAGE) else PUBLIC_KAFKA_IMAGE)
            redis_image = redis_image or (
                DEV_REDIS_IMAGE if _image_present(client, DEV_REDIS_IMAGE) else PUBLIC_REDIS_IMAGE
            )
        finally:
            client.close()
        return cls(kafka, redis_image)


# -- container definitions -----------------------------------------------------------
def tansu_env(host: str, port: int) -> dict[str, str]:
    """Tansu listening on ``port`` in the container, advertised as ``host:port``."""
    return {
        "LISTENER_URL": f"tcp://0.0.0.0:{port}",
        "ADVERTISED_LISTENER_URL": f"tcp://{host}:{port}",
        "STORAGE_ENGINE": "memory://tansu/",
    }


def apache_kafka_env(host: str, port: int) -> dict[str, str]:
    """A single-node KRaft broker+controller (``apache/kafka``) on ``port``, advertised as ``host:port``."""
    return {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": f"PLAINTEXT://0.0.0.0:{port},CONTROLLER://0.0.0.0:9093",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{host}:{port}",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
    }


def _logs_tail(container: DockerContainer, lines: int = 30) -> str:
    try:
        out, err = container.get_logs()
    except Exception:  # noqa: BLE001 - best effort, for an error message
        return "(no logs)"
    text = (out + err).decode(errors="replace").strip().splitlines()
    return "\n".join(text[-lines:]) or "(empty logs)"


def _remove(container: DockerContainer) -> None:
    """Remove ``container`` if it was created, forced; log instead of raising."""
    try:
        container.stop()
    except DockerException as exc:
        log.warning("could not remove container %s: %s", container.image, exc)


def _run_on_free_port(make: Callable[[int], DockerContainer], what: str) -> tuple[DockerContainer, int]:
    """Start ``make(port)`` on a free host port, retrying when the port was taken meanwhile."""
    error: Exception | None = None
    for _ in range(_PORT_ATTEMPTS):
        port = free_port()
        container = make(port)
        try:
            container.start()
            return container, port
        except APIError as exc:
            _remove(container)
            error = exc
            if "address already in use" not in str(exc).lower():
                break
        except BaseException:
            _remove(container)
            raise
    raise StackError(
        f"could not start the {what} container: {error} (docker/build-images.sh builds the local images; "
        f"{KAFKA_IMAGE_ENV} / {REDIS_IMAGE_ENV} choose others)"
    ) from error


# -- readiness --------------------------------------------------------------------------
def _wait(ready: Callable[[], bool], timeout: float, what: str, container: DockerContainer) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        container.reload()
        if container.status in ("exited", "dead"):
            raise StackError(f"{what} container exited before it answered:\n{_logs_tail(container)}")
        time.sleep(0.1)
    raise StackError(f"{what} did not answer within {timeout} s:\n{_logs_tail(container)}")


def broker_answers(bootstrap_servers: str) -> bool:
    """True when the broker returns metadata (``list_topics`` with no topic: never auto-creates)."""
    config: dict[str, str | int | float | bool] = {"bootstrap.servers": bootstrap_servers,
                                                   "socket.connection.setup.timeout.ms": 1000}
    admin = AdminClient(config, logger=log.getChild("probe"))  # librdkafka chatter off stderr
    try:
        return bool(admin.list_topics(timeout=1).brokers)
    except Exception:  # noqa: BLE001 - KafkaException while the broker starts
        return False


def redis_answers(url: str) -> bool:
    """True when the Redis node at ``url`` answers PING."""
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


# -- the backend -----------------------------------------------------------------------
class ContainersBackend(Backend):
    """One broker container and ``redis_nodes`` Redis containers, via testcontainers.

    Parameters:
        redis_nodes: how many independent Redis nodes (3 for the lock table's quorum).
        images: which images to run; default :meth:`ContainerImages.from_env`.
        start_timeout: seconds each container may take to answer.
    """

    name = "testcontainers"
    faults = frozenset({Capability.STOP_REDIS})  # container pause needs cgroup freezing, which podman here lacks

    def __init__(
        self, redis_nodes: int = 3, images: ContainerImages | None = None, start_timeout: float = 90.0
    ) -> None:
        if redis_nodes < 1:
            raise StackError("redis_nodes must be at least 1")
        self.redis_nodes = redis_nodes
        self.start_timeout = start_timeout
        self._images = images
        self._prefix = f"rocketkafka-{uuid.uuid4().hex[:8]}"
        self._host = ""
        self._broker: DockerContainer | None = None
        self._broker_port = 0
        self._redis: list[DockerContainer] = []
        self._redis_ports: list[int] = []

    # -- lifecycle -----------------------------------------------------------------
    @property
    def images(self) -> ContainerImages:
        """The images in use (resolved on first use)."""
        if self._images is None:
            self._images = ContainerImages.from_env()
        return self._images

    def start(self) -> None:
        """Start the broker and the Redis nodes; return when all answer."""
        self._host = self._container_host()
        log.info("testcontainers backend: broker %s, redis %s", self.images.kafka, self.images.redis)
        try:
            self._start_broker()
            for index in range(self.redis_nodes):
                self._start_redis_node(index)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Remove every container this backend started (forced; nothing is left behind)."""
        for container in ([self._broker] if self._broker else []) + self._redis:
            _remove(container)
        self._broker, self._redis, self._redis_ports = None, [], []

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses -------------------------------------------------------------------
    @property
    def name_prefix(self) -> str:
        """Every container of this backend is named ``<name_prefix>-...``."""
        return self._prefix

    @property
    def bootstrap_servers(self) -> str:
        if self._broker is None:
            raise StackError("the testcontainers backend is not started")
        return f"{self._host}:{self._broker_port}"

    @property
    def redis_urls(self) -> list[str]:
        return [f"redis://{self._host}:{port}" for port in self._redis_ports]

    # -- fault injection -----------------------------------------------------------
    def stop_redis(self, index: int) -> None:
        """Stop (not remove) Redis node ``index``; its URL stops answering."""
        self._redis[index].get_wrapped_container().stop(timeout=2)

    def start_redis(self, index: int) -> None:
        """Start Redis node ``index`` again (same URL, empty data) and wait until it answers."""
        container = self._redis[index]
        container.get_wrapped_container().start()
        url = self.redis_urls[index]
        _wait(lambda: redis_answers(url), self.start_timeout, f"redis node {index}", container)

    # -- internals -------------------------------------------------------------------
    @staticmethod
    def _container_host() -> str:
        """The host to reach published ports at (and to advertise); needs ``docker_host`` mode."""
        client = TcDockerClient()
        mode = client.get_connection_mode()
        if mode is not ConnectionMode.docker_host:
            raise StackError(
                f"testcontainers connection mode is {mode.value}; the broker's advertised address must be "
                "known before it starts: set TESTCONTAINERS_CONNECTION_MODE=docker_host"
            )
        host = client.host()
        client.client.close()
        return "127.0.0.1" if host == "localhost" else host

    def _broker_container(self, port: int) -> DockerContainer:
        env = tansu_env(self._host, port) if self.images.tansu else apache_kafka_env(self._host, port)
        return (
            DockerContainer(self.images.kafka, env=env)
            .with_name(f"{self._prefix}-broker-{port}")
            .with_bind_ports(port, port)
        )

    def _start_broker(self) -> None:
        started = time.monotonic()
        self._broker, self._broker_port = _run_on_free_port(self._broker_container, "broker")
        _wait(lambda: broker_answers(self.bootstrap_servers), self.start_timeout, "broker", self._broker)
        log.info("broker %s ready in %.1f s", self.bootstrap_servers, time.monotonic() - started)

    def _redis_container(self, index: int) -> Callable[[int], DockerContainer]:
        def make(port: int) -> DockerContainer:
            return (
                DockerContainer(self.images.redis)
                .with_command(REDIS_ARGS)
                .with_name(f"{self._prefix}-redis{index}-{port}")
                .with_bind_ports(REDIS_PORT, port)
            )

        return make

    def _start_redis_node(self, index: int) -> None:
        container, port = _run_on_free_port(self._redis_container(index), f"redis node {index}")
        self._redis.append(container)
        self._redis_ports.append(port)
        url = self.redis_urls[index]
        _wait(lambda: redis_answers(url), self.start_timeout, f"redis node {index}", container)
