"""rocketmq-client-python's connection setters, shared by the producers and the push consumer.

Upstream code configures a client after building it (``set_name_server_address`` ...), so
these clients load their :class:`~rocketkafka.config.Settings` lazily: from ``config``, from
what the setters set, else from ``ROCKETKAFKA_*``. Every setter refuses once the client started.
"""

from __future__ import annotations

from typing import Any

from rocketkafka.config import Settings
from rocketkafka.errors import ConfigError, StateError


class ConnectionSetters:
    """Mixin: ``settings`` (lazy) and the name-server and credential setters of rocketmq-client-python.

    The client keeps ``_config`` (the confluent-kafka dict it was given), ``_redis_urls``,
    ``_settings`` (``None`` until loaded) and its own librdkafka settings (:meth:`_client_config`).
    """

    _config: dict[str, Any]
    _redis_urls: list[str] | None
    _settings: Settings | None

    def _client_config(self) -> dict[str, Any]:
        """The librdkafka settings of this client's own producer or consumer (credentials go there)."""
        raise NotImplementedError

    def _started(self) -> bool:
        raise NotImplementedError

    @property
    def settings(self) -> Settings:
        """The settings in force (from ``config``, the setters, else ``ROCKETKAFKA_*``)."""
        if self._settings is None:
            self._settings = Settings.load(self._config, self._redis_urls)
        return self._settings

    def set_name_server_address(self, addr: str) -> None:
        """The Kafka ``bootstrap.servers`` (RocketMQ's name server is where clients find brokers; so is this)."""
        self._before_start("set_name_server_address")
        if not isinstance(addr, str) or not addr.strip():
            raise ConfigError(f"name server address must be 'host:port[,host:port...]', got {addr!r}")
        self._config["bootstrap.servers"] = addr.replace(";", ",")  # RocketMQ separates name servers with ';'
        self._settings = Settings.load(self._config, self._redis_urls)

    def set_name_server_domain(self, domain: str) -> None:
        """Not available: Kafka has no name-server lookup by URL; raises :class:`ConfigError` saying so."""
        raise ConfigError("set_name_server_domain: Kafka clients have no name-server domain lookup; "
                          "call set_name_server_address('host:port') with the bootstrap servers")

    def set_session_credentials(self, access_key: str, access_secret: str, channel: str = "") -> None:
        """SASL/PLAIN credentials (``sasl.username`` / ``sasl.password``); ``channel`` is ignored."""
        self._before_start("set_session_credentials")
        config = self._client_config()
        config.update({"sasl.mechanism": "PLAIN", "sasl.username": access_key, "sasl.password": access_secret})
        config.setdefault("security.protocol", "SASL_PLAINTEXT")

    def _before_start(self, what: str) -> None:
        if self._started():
            raise StateError(f"{what}() must be called before start()")
