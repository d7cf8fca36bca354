"""Where tests get a broker and Redis nodes from.

``ROCKETKAFKA_TEST_BACKEND`` picks one of:

- ``external``: ``ROCKETKAFKA_BOOTSTRAP_SERVERS`` and ``ROCKETKAFKA_REDIS_URLS`` name a running cluster;
- ``testcontainers``: broker + Redis containers from a Docker-compatible engine
  (see :mod:`rocketkafka.testing.containers`);
- ``embedded``: processes started by the test session itself (:class:`rocketkafka.testing.devstack.DevStack`):
  the Tansu broker and Redis nodes;
- ``kafka``: the same with Apache Kafka (``ROCKETKAFKA_TEST_KAFKA_NODES`` nodes, default 1; see
  :class:`KafkaBackend`); ``ROCKETKAFKA_TEST_SECURE=1`` secures it (SASL/SCRAM over TLS with ACLs,
  Redis on TLS with ACL users: :mod:`rocketkafka.testing.secure`), and ``rk_settings`` are the super user's.

Unset, it is ``external`` when the environment names a broker, else ``embedded``.

Each backend lists the fault injections it can do (:meth:`Backend.capabilities`); broker
features are probed once against the real broker. A test declares what it needs with
``@pytest.mark.rk_needs(...)`` and is skipped, with the reason, where it is missing
(:mod:`rocketkafka.testing.capabilities`).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any

from rocketkafka.config import Settings
from rocketkafka.errors import ConfigError
from rocketkafka.testing.broker_probes import add_fetch_wait, probe, probe_fetch_wait
from rocketkafka.testing.capabilities import BROKER_FEATURES, Capability, MissingCapability
from rocketkafka.testing.devstack import DevStack


class Backend(ABC):
    """A broker and Redis nodes for one test session."""

    name: str = "abstract"

    @abstractmethod
    def start(self) -> None:
        """Start the broker and Redis nodes, or check that the given ones answer."""

    @abstractmethod
    def stop(self) -> None:
        """Stop what :meth:`start` started."""

    @property
    @abstractmethod
    def bootstrap_servers(self) -> str:
        """The broker's ``bootstrap.servers``."""

    @property
    @abstractmethod
    def redis_urls(self) -> list[str]:
        """The Redis nodes' URLs."""

    def settings(self, **overrides) -> Settings:
        """Client settings pointing at this backend (with :meth:`client_config`'s security settings and the
        fetch wait its broker wants, :meth:`fetch_wait_ms`)."""
        overrides.setdefault("kafka", self.client_config())
        add_fetch_wait(overrides, self.fetch_wait_ms)
        return Settings(bootstrap_servers=self.bootstrap_servers, redis_urls=self.redis_urls, **overrides)

    def fetch_wait_ms(self) -> int:
        """The engine's fetch wait for this backend's broker, probed once (:func:`probe_fetch_wait`)."""
        wait = self._fetch_wait_ms
        if wait is None:
            wait = self._fetch_wait_ms = probe_fetch_wait(
                Settings(bootstrap_servers=self.bootstrap_servers, redis_urls=self.redis_urls,
                         kafka=self.client_config()))
        return wait

    def client_config(self) -> dict[str, str]:
        """Kafka client settings every client of this backend needs beside ``bootstrap.servers`` (security)."""
        return {}

    #: Whether the broker and Redis are secured (SASL_SSL with ACLs, Redis TLS with ACL users).
    secure: bool = False

    #: Whether the pytest plugin deletes each test's topics after it (see :class:`KafkaBackend`).
    deletes_test_topics: bool = False

    # -- capabilities ------------------------------------------------------------------
    #: The fault injections this kind of backend can do (broker features are probed instead).
    faults: frozenset[Capability] = frozenset()
    _fetch_wait_ms: int | None = None  # the broker's fetch wait, once probed
    _probed: dict[Capability, str | None]  # broker features probed so far: None, or why the broker lacks one

    def missing(self, capability: Capability) -> str | None:
        """``None`` when this backend has ``capability``, else the reason it does not (probes a broker feature once)."""
        if capability in BROKER_FEATURES:
            probed = getattr(self, "_probed", None)
            if probed is None:
                probed = self._probed = {}
            if capability not in probed:
                probed[capability] = probe(self.settings(), capability)
            return None if probed[capability] is None else f"the broker at {self.bootstrap_servers} cannot " \
                f"{capability.value}: {probed[capability]}"
        if capability in self.faults:
            return None
        return f"the {self.name} backend cannot {capability.value}"

    def require(self, capability: Capability) -> None:
        """Raise :class:`MissingCapability` unless this backend has ``capability``."""
        reason = self.missing(capability)
        if reason is not None:
            raise MissingCapability(self.name, capability, reason)

    # -- users of a secured backend (tests declare rk_needs("secure")) --------------------
    def add_kafka_user(self, user: str, password: str) -> None:
        """Create the SCRAM user ``user`` (as the super user)."""
        self.require(Capability.SECURE)

    def add_redis_user(self, user: str, password: str, rule: list[str]) -> None:
        """Create (reset) the Redis ACL user ``user`` with ``rule`` on every node (as ``admin``)."""
        self.require(Capability.SECURE)

    def user_settings(self, user: str, password: str, redis_user: str | None = None, redis_password: str | None = None,
                      **overrides: Any) -> Settings:
        """Client settings of the Kafka user ``user`` (and the Redis user ``redis_user``, default the same)."""
        self.require(Capability.SECURE)
        raise AssertionError("unreachable")

    # -- fault injection; backends that cannot do it say so (tests declare rk_needs and are skipped) ----
    def stop_redis(self, index: int) -> None:
        """Kill Redis node ``index``; its data is lost."""
        self.require(Capability.STOP_REDIS)

    def start_redis(self, index: int) -> None:
        """Start Redis node ``index`` again on its URL, empty."""
        self.require(Capability.STOP_REDIS)

    def pause_redis(self, index: int) -> None:
        """SIGSTOP Redis node ``index`` (it keeps its data; nothing answers until :meth:`resume_redis`)."""
        self.require(Capability.PAUSE_REDIS)

    def resume_redis(self, index: int) -> None:
        """SIGCONT Redis node ``index``, which :meth:`pause_redis` paused."""
        self.require(Capability.PAUSE_REDIS)

    def pause_broker(self, index: int | None = None) -> None:
        """SIGSTOP broker node ``index`` (every node when ``None``; nothing answers until :meth:`resume_broker`)."""
        self.require(Capability.PAUSE_BROKER)

    def resume_broker(self, index: int | None = None) -> None:
        """SIGCONT the broker (or node ``index``) that :meth:`pause_broker` paused."""
        self.require(Capability.PAUSE_BROKER)

    def kill_broker(self, index: int = 0) -> None:
        """SIGKILL broker node ``index``; its log stays on disk for :meth:`start_broker`."""
        self.require(Capability.KILL_BROKER)

    def start_broker(self, index: int = 0) -> None:
        """Start broker node ``index`` again with its log, and wait until the cluster lists it."""
        self.require(Capability.KILL_BROKER)

    @property
    def broker_count(self) -> int:
        """How many broker nodes the cluster has (as far as this backend knows; 1 when it cannot tell)."""
        return 1

    def leader_of(self, topic: str, partition: int) -> int:
        """Index of the broker node that leads ``topic``'s ``partition`` (needs to know the nodes: kill-broker)."""
        self.require(Capability.KILL_BROKER)
        return 0


def secure_requested() -> bool:
    """Whether ``ROCKETKAFKA_TEST_SECURE`` asks for a secured backend."""
    return os.environ.get("ROCKETKAFKA_TEST_SECURE", "") not in ("", "0", "false", "no")


class EmbeddedBackend(Backend):
    """Tansu + N redis-server processes on free loopback ports, owned by the test session."""

    name = "embedded"
    faults = frozenset({Capability.STOP_REDIS, Capability.PAUSE_REDIS, Capability.PAUSE_BROKER})

    def __init__(self, redis_nodes: int = 3) -> None:
        self.stack = DevStack(redis_nodes=redis_nodes, attached=True)

    def start(self) -> None:
        self.stack.start()

    def stop(self) -> None:
        self.stack.stop()

    @property
    def bootstrap_servers(self) -> str:
        return self.stack.bootstrap_servers

    @property
    def redis_urls(self) -> list[str]:
        return self.stack.redis_urls

    def client_config(self) -> dict[str, str]:
        return self.stack.client_config()

    @property
    def secure(self) -> bool:  # type: ignore[override]
        return self.stack.secure

    def missing(self, capability: Capability) -> str | None:
        if capability is Capability.SECURE:
            return None if self.stack.secure else (
                f"the {self.name} backend is not secured (ROCKETKAFKA_TEST_BACKEND=kafka ROCKETKAFKA_TEST_SECURE=1)")
        return super().missing(capability)

    def add_kafka_user(self, user: str, password: str) -> None:
        self.require(Capability.SECURE)
        self.stack.add_kafka_user(user, password)

    def add_redis_user(self, user: str, password: str, rule: list[str]) -> None:
        self.require(Capability.SECURE)
        self.stack.add_redis_user(user, password, rule)

    def user_settings(self, user: str, password: str, redis_user: str | None = None, redis_password: str | None = None,
                      **overrides: Any) -> Settings:
        self.require(Capability.SECURE)
        redis_urls = self.stack.user_redis_urls(redis_user or user, password if redis_password is None else redis_password)
        add_fetch_wait(overrides, self.fetch_wait_ms)
        return Settings(bootstrap_servers=self.bootstrap_servers, redis_urls=redis_urls,
                        kafka=self.stack.user_config(user, password), **overrides)

    def stop_redis(self, index: int) -> None:
        self.stack.stop_redis(index)

    def start_redis(self, index: int) -> None:
        self.stack.start_redis(index)

    def pause_redis(self, index: int) -> None:
        self.stack.pause_redis(index)

    def resume_redis(self, index: int) -> None:
        self.stack.resume_redis(index)

    def pause_broker(self, index: int | None = None) -> None:
        self.stack.pause_broker(index)

    def resume_broker(self, index: int | None = None) -> None:
        self.stack.resume_broker(index)


class KafkaBackend(EmbeddedBackend):
    """Apache Kafka (KRaft nodes, log on disk) + N redis-server processes, owned by the test session.

    One cluster per session, hence per pytest-xdist worker: fault tests kill, restart and pause
    brokers, which would break the tests of other workers on a shared cluster. Nodes:
    ``ROCKETKAFKA_TEST_KAFKA_NODES`` (default 1; 3 gives replication factor 3 and min ISR 2).
    """

    name = "kafka"
    #: A broker started after a SIGKILL recovers every partition it holds before it answers: after a few
    #: hundred tests of topics that nobody deletes (about 1,000 partitions) a restart took over 60 s here.
    #: Tests delete what they made, so a fault test's restart stays within seconds.
    deletes_test_topics = True

    def __init__(self, redis_nodes: int = 3, broker_nodes: int | None = None, secure: bool | None = None) -> None:
        nodes = broker_nodes or int(os.environ.get("ROCKETKAFKA_TEST_KAFKA_NODES") or 1)
        if secure is None:
            secure = secure_requested()
        # quick_start: the tests time a broker that just started (C1 JIT, a few seconds of warm-up traffic)
        self.stack = DevStack(redis_nodes=redis_nodes, attached=True, broker="kafka", broker_nodes=nodes,
                              quick_start=True, secure=secure)
        self.faults = EmbeddedBackend.faults | {Capability.KILL_BROKER} | (
            {Capability.MULTI_BROKER} if nodes >= 3 else set())

    def missing(self, capability: Capability) -> str | None:
        if capability is Capability.MULTI_BROKER and capability not in self.faults:
            return (f"the kafka backend runs {self.stack.broker_nodes} broker node(s); this test needs 3 "
                    "(ROCKETKAFKA_TEST_KAFKA_NODES=3)")
        return super().missing(capability)

    def kill_broker(self, index: int = 0) -> None:
        self.stack.kill_broker(index)

    def start_broker(self, index: int = 0) -> None:
        self.stack.start_broker(index)

    @property
    def broker_count(self) -> int:
        return self.stack.broker_nodes

    def leader_of(self, topic: str, partition: int) -> int:
        return self.stack.leader_of(topic, partition)


class ExternalBackend(Backend):
    """A cluster named by ``ROCKETKAFKA_BOOTSTRAP_SERVERS`` / ``ROCKETKAFKA_REDIS_URLS``."""

    name = "external"

    def __init__(self) -> None:
        self._settings = Settings()
        if not self._settings.bootstrap_servers or not self._settings.redis_urls:
            raise ConfigError("external backend needs ROCKETKAFKA_BOOTSTRAP_SERVERS and ROCKETKAFKA_REDIS_URLS "
                              "(or a ROCKETKAFKA_CONFIG_FILE naming them)")
        self.secure = self._settings.kafka.get("security.protocol", "PLAINTEXT").upper() != "PLAINTEXT"

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    @property
    def bootstrap_servers(self) -> str:
        return self._settings.bootstrap_servers

    @property
    def redis_urls(self) -> list[str]:
        return self._settings.redis_urls

    def client_config(self) -> dict[str, str]:
        return {key: value for key, value in self._settings.kafka.items() if isinstance(value, str)}
