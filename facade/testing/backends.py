"""Where tests get a broker and Redis nodes from.

``ROCKETKAFKA_TEST_BACKEND`` picks one of:

- ``external``: ``ROCKETKAFKA_BOOTSTRAP_SERVERS`` and ``ROCKETKAFKA_REDIS_URLS`` name a running cluster;
- ``testcontainers``: broker + Redis containers from a Docker-compatible engine
  (see :mod:`facade.testing.containers`);
- ``embedded``: processes started by the test session itself (:class:`facade.devstack.DevStack`).

Unset, it is ``external`` when the environment names a broker, else ``embedded``.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod

from facade.config import Settings
from facade.devstack import DevStack
from facade.errors import ConfigError


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

    # Fault injection; backends that cannot do it say so.
    def stop_redis(self, index: int) -> None:
        raise NotImplementedError(f"the {self.name} backend cannot stop Redis nodes")

    def start_redis(self, index: int) -> None:
        raise NotImplementedError(f"the {self.name} backend cannot start Redis nodes")


class EmbeddedBackend(Backend):
    """Tansu + N redis-server processes on free loopback ports, owned by the test session."""

    name = "embedded"

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


def select_backend(name: str | None = None) -> Backend:
    """The backend named by ``name`` or ``ROCKETKAFKA_TEST_BACKEND`` (see module docstring)."""
    name = name or os.environ.get("ROCKETKAFKA_TEST_BACKEND") or (
        "external" if os.environ.get("ROCKETKAFKA_BOOTSTRAP_SERVERS") else "embedded"
    )
    if name == "embedded":
        return EmbeddedBackend()
    if name == "external":
        return ExternalBackend()
    if name == "testcontainers":
        from facade.testing.containers import ContainersBackend

        return ContainersBackend()
    raise ConfigError(f"unknown test backend {name!r}: use embedded, external or testcontainers")
