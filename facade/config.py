"""Client settings: one declaration, from code or from the environment.

Both doors (RocketMQ-style and Kafka drop-in) take Kafka client settings as a
confluent-kafka config dict and Redis nodes as URLs. Services and the CLI read
the same settings from ``ROCKETKAFKA_*`` environment variables, falling back to
the addresses ``rocketkafka dev up`` recorded.

>>> s = Settings(bootstrap_servers="127.0.0.1:9092", redis_urls=["redis://127.0.0.1:6379"])
>>> s.kafka_config()["bootstrap.servers"]
'127.0.0.1:9092'
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from typing_extensions import Annotated

from facade.errors import ConfigError
from facade.names import DEFAULT_TOPIC_PREFIX, RedisKeys, TopicNames, is_valid_topic_name


#: Where librdkafka's log lines go (quiet them with ``logging.getLogger("rocketkafka.rdkafka").setLevel``).
RDKAFKA_LOG = logging.getLogger("rocketkafka.rdkafka")


def state_dir() -> Path:
    """Where the embedded stack records its addresses (``ROCKETKAFKA_HOME`` or ``~/.rocketkafka``)."""
    return Path(os.environ.get("ROCKETKAFKA_HOME", Path.home() / ".rocketkafka"))


class Settings(BaseSettings):
    """Connection settings shared by every client and service.

    Parameters:
        bootstrap_servers: Kafka ``bootstrap.servers``.
        redis_urls: the lock table's Redis nodes (1 or an odd number >= 3 for quorum).
        topic_prefix: prefix of every internal topic (retry, DLQ, delay levels, half/op).
        redis_prefix: prefix of every Redis key.
        kafka: extra confluent-kafka settings merged into every client.
    """

    model_config = SettingsConfigDict(env_prefix="ROCKETKAFKA_", extra="forbid")

    bootstrap_servers: str = ""
    redis_urls: Annotated[list[str], NoDecode] = Field(default_factory=list)
    topic_prefix: str = DEFAULT_TOPIC_PREFIX
    redis_prefix: str = "rk"
    kafka: dict[str, Any] = Field(default_factory=dict)

    @field_validator("redis_urls", mode="before")
    @classmethod
    def _split_urls(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [u.strip() for u in value.split(",") if u.strip()]
        return value

    @field_validator("redis_urls")
    @classmethod
    def _check_urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            if not url.startswith(("redis://", "rediss://", "unix://")):
                raise ValueError(f"{url!r} is not a redis:// URL")
        return urls

    @field_validator("topic_prefix")
    @classmethod
    def _check_prefix(cls, prefix: str) -> str:
        if not is_valid_topic_name(prefix):
            raise ValueError(f"topic prefix {prefix!r} is not a valid Kafka topic name")
        return prefix

    @classmethod
    def load(cls, config: dict[str, Any] | None = None, redis_urls: list[str] | str | None = None, **overrides: Any) -> Settings:
        """Settings from a confluent config dict + Redis URLs, else environment, else ``dev up``'s record.

        Raises:
            ConfigError: nothing names a broker, or a value is invalid.
        """
        config = dict(config or {})
        values: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
        if "bootstrap.servers" in config:
            values["bootstrap_servers"] = config.pop("bootstrap.servers")
        if config:
            values["kafka"] = {**values.get("kafka", {}), **config}
        if redis_urls is not None:
            values["redis_urls"] = redis_urls
        try:
            settings = cls(**values)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise ConfigError(str(exc)) from exc
        if not settings.bootstrap_servers or not settings.redis_urls:
            recorded = _recorded_stack()
            settings.bootstrap_servers = settings.bootstrap_servers or recorded.get("bootstrap_servers", "")
            settings.redis_urls = settings.redis_urls or recorded.get("redis_urls", [])
        if not settings.bootstrap_servers:
            raise ConfigError(
                "no broker: pass {'bootstrap.servers': ...}, set ROCKETKAFKA_BOOTSTRAP_SERVERS, or run `rocketkafka dev up`"
            )
        return settings

    def kafka_config(self, **extra: Any) -> dict[str, Any]:
        """A confluent-kafka config dict: ``bootstrap.servers`` + ``kafka`` + ``extra``.

        librdkafka's own log lines go to the Python logger ``rocketkafka.rdkafka`` instead of stderr.
        """
        return {"bootstrap.servers": self.bootstrap_servers, "logger": RDKAFKA_LOG, **self.kafka, **extra}

    def environment(self) -> dict[str, str]:
        """These settings as ``ROCKETKAFKA_*`` variables, for a service started as a subprocess."""
        env = {"ROCKETKAFKA_BOOTSTRAP_SERVERS": self.bootstrap_servers,
               "ROCKETKAFKA_REDIS_URLS": ",".join(self.redis_urls),
               "ROCKETKAFKA_TOPIC_PREFIX": self.topic_prefix,
               "ROCKETKAFKA_REDIS_PREFIX": self.redis_prefix}
        if self.kafka:
            env["ROCKETKAFKA_KAFKA"] = json.dumps(self.kafka)
        return env

    def require_redis(self) -> list[str]:
        """The Redis URLs, or a clear error for clients that need the lock table."""
        if not self.redis_urls:
            raise ConfigError("no Redis nodes: pass redis_urls=[...], set ROCKETKAFKA_REDIS_URLS, or run `rocketkafka dev up`")
        return self.redis_urls

    @property
    def topics(self) -> TopicNames:
        """Internal topic names under this prefix."""
        return TopicNames(self.topic_prefix)

    @property
    def keys(self) -> RedisKeys:
        """Redis key names under this prefix."""
        return RedisKeys(self.redis_prefix)


def _recorded_stack() -> dict[str, Any]:
    path = state_dir() / "dev-stack.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
