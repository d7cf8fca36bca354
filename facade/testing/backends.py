"""Where tests get a broker and Redis nodes from.

``ROCKETKAFKA_TEST_BACKEND`` picks one of:

- ``external``: ``ROCKETKAFKA_BOOTSTRAP_SERVERS`` and ``ROCKETKAFKA_REDIS_URLS`` name a running cluster;
- ``testcontainers``: broker + Redis containers from a Docker-compatible engine
  (see :mod:`rocketkafka.testing.containers`);
- ``embedded``: processes started by the test session itself (:class:`rocketkafka.testing.devstack.DevStack`).

Unset, it is ``external`` when the environment names a broker, else ``embedded``.

Each backend lists the fault injections it can do (:meth:`Backend.capabilities`); broker
features are probed once against the real broker. A test declares what it needs with
``@pytest.mark.rk_needs(...)`` and is skipped, with the reason, where it is missing
(:mod:`rocketkafka.testing.capabilities`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from rocketkafka.config import Settings
from rocketkafka.errors import ConfigError
from rocketkafka.testing.capabilities import BROKER_FEATURES, Capability, MissingCapability, probe_add_partitions
from rocketkafka.testing.devstack import DevStack


class Backend(ABC):
    """A broker and Redis nodes for one test session."""

    name: str = "abstract"

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    @property
    @abstractmethod
    def bootstrap_servers(self) -> str: ...

    @property
    @abstractmethod
    def redis_urls(self) -> list[str]: ...

    def settings(self, **overrides) -> Settings:
        """Client settings pointing at this backend."""
        return Settings(bootstrap_servers=self.bootstrap_servers, redis_urls=self.redis_urls, **overrides)

    # -- capabilities ------------------------------------------------------------------
    #: The fault injections this kind of backend can do (broker features are probed instead).
    faults: frozenset[Capability] = frozenset()
    _probed: dict[Capability, str | None]  # broker features probed so far: None, or why the broker lacks one

    def missing(self, capability: Capability) -> str | None:
        """``None`` when this backend has ``capability``, else the reason it does not (probes a broker feature once)."""
        if capability in BROKER_FEATURES:
            probed = getattr(self, "_probed", None)
            if probed is None:
                probed = self._probed = {}
            if capability not in probed:
                probed[capability] = probe_add_partitions(self.settings())
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
        self.require(Capability.PAUSE_REDIS)

    def pause_broker(self) -> None:
        """SIGSTOP the broker (nothing answers until :meth:`resume_broker`)."""
        self.require(Capability.PAUSE_BROKER)

    def resume_broker(self) -> None:
        self.require(Capability.PAUSE_BROKER)


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

    def stop_redis(self, index: int) -> None:
        self.stack.stop_redis(index)

    def start_redis(self, index: int) -> None:
        self.stack.start_redis(index)

    def pause_redis(self, index: int) -> None:
        self.stack.pause_redis(index)

    def resume_redis(self, index: int) -> None:
        self.stack.resume_redis(index)

    def pause_broker(self) -> None:
        self.stack.pause_broker()

    def resume_broker(self) -> None:
        self.stack.resume_broker()


class ExternalBackend(Backend):
    """A cluster named by ``ROCKETKAFKA_BOOTSTRAP_SERVERS`` / ``ROCKETKAFKA_REDIS_URLS``."""

    name = "external"

    def __init__(self) -> None:
        self._settings = Settings()
        if not self._settings.bootstrap_servers or not self._settings.redis_urls:
            raise ConfigError("external backend needs ROCKETKAFKA_BOOTSTRAP_SERVERS and ROCKETKAFKA_REDIS_URLS")

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
