"""Client settings: one declaration, from code or from the environment.

Both doors (RocketMQ-style and Kafka drop-in) take Kafka client settings as a
confluent-kafka config dict and Redis nodes as URLs. Services and the CLI read
the same settings from ``ROCKETKAFKA_*`` environment variables. Nothing falls back
silently: the command line alone also uses the stack ``rocketkafka dev up`` started,
and only while it is alive (:mod:`rocketkafka.tools.settings`).

>>> s = Settings(bootstrap_servers="127.0.0.1:9092", redis_urls=["redis://127.0.0.1:6379"])
>>> s.kafka_config()["bootstrap.servers"]
'127.0.0.1:9092'
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import redis
from confluent_kafka import KafkaError, KafkaException
from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict
from typing_extensions import Annotated

from rocketkafka.config_file import CONFIG_FILE_ENV, OWN_KEYS, config_file_values
from rocketkafka.errors import ConfigError
from rocketkafka.logs import REDACTED, SECRET_SETTING, RepeatFilter, redact_config, redact_url
from rocketkafka.names import DEFAULT_TOPIC_PREFIX, RedisKeys, TopicNames, prefix_problem
from rocketkafka.schedule.levels import DelayConfig
from rocketkafka.validation import validation_summary


T = TypeVar("T")

#: Where librdkafka's log lines go (quiet them with ``logging.getLogger("rocketkafka.rdkafka").setLevel``).
RDKAFKA_LOG = logging.getLogger("rocketkafka.rdkafka")
RDKAFKA_LOG.addFilter(RepeatFilter())  # an unreachable broker is reported once a minute, not on every reconnect


#: Producer settings under every write rocketkafka makes (a producer's own ``producer_config`` overrides them,
#: ``Settings.kafka`` does not: they win over it, as the other producer defaults do).
#:
#: One produce request in flight per broker: with more, librdkafka's idempotent producer can
#: lose a message. A new producer's first batch to a partition fails retriably (a leader
#: moving, a topic just created), the next batch, already in flight, succeeds -- the broker
#: takes any first sequence from a producer it does not know -- and librdkafka reports the
#: failed batch delivered ("implicitly acked", offset unknown; confluent-kafka-go#921). Seen
#: here on Apache Kafka 4.1 as delayed messages missing from their delay topic. One in flight
#: cost no throughput where measured (docs/guarantees/faults.md); the Java client, which does not
#: ack implicitly, needs no such limit.
SAFE_PRODUCER_CONFIG: dict[str, Any] = {"enable.idempotence": True, "max.in.flight.requests.per.connection": 1}

#: Keys of a drop-in client's config dict that are rocketkafka's (see :meth:`Settings.from_client_config`).
CLIENT_KEY_PREFIX = "rocketkafka."
#: The settings' own keys (shared with the properties file of ``ROCKETKAFKA_CONFIG_FILE``), then the per-client
#: ones: a drop-in client's delay levels and producer group.
CLIENT_KEYS = (*OWN_KEYS, "rocketkafka.delay.levels", "rocketkafka.producer.group")


#: Client settings that say who a client is and how it connects (librdkafka's security properties): a drop-in client's
#: own settings of these kinds are shared with every internal client rocketkafka makes for it.
CONNECTION_SETTING_PREFIXES = ("security.protocol", "sasl.", "ssl.", "ssl_", "enable.ssl.", "enable.sasl.", "oauth",
                               "https.", "client.dns.lookup")


def is_connection_setting(key: str) -> bool:
    """Whether the confluent-kafka setting ``key`` is part of how a client authenticates and connects.

    >>> is_connection_setting("sasl.password"), is_connection_setting("linger.ms")
    (True, False)
    """
    return key.startswith(CONNECTION_SETTING_PREFIXES)


def kafka_client(factory: Callable[[dict[str, Any]], T], config: dict[str, Any]) -> T:
    """``factory(config)`` -- a confluent-kafka client -- with settings it refuses reported as :class:`ConfigError`.

    librdkafka checks its settings only when a client is made, so a misspelt ``security.protocol`` or a
    value of the wrong type surfaces at the first client of a ``start()``; this names the setting in a
    :class:`ConfigError` (the values of secret settings shown as ``***``) instead of a raw ``KafkaException``.
    """
    try:
        return factory(config)
    except (KafkaException, ValueError, TypeError) as exc:
        if isinstance(exc, KafkaException):
            error = exc.args[0] if exc.args else None
            if error is None or not hasattr(error, "code") or error.code() != KafkaError._INVALID_ARG:
                raise
            text = error.str()
        else:
            text = str(exc)
        for key, value in config.items():
            if SECRET_SETTING.search(str(key)) and isinstance(value, str) and value:
                text = text.replace(value, REDACTED)
        raise ConfigError(f"the Kafka client refused the settings: {redact_url(text)}") from None


#: The engine's fetch wait on a broker that answers a fetch as soon as a record arrives (ms): an idle consumer
#: sends 10 empty fetches a second instead of librdkafka's 2, and a partition resumed after a pause waits at most
#: this long for the fetch already in flight (librdkafka keeps one per broker) before its own is sent.
DEFAULT_FETCH_WAIT_MS = 100
#: ... on a broker that holds every fetch for its whole wait (Tansu): the latency floor of a light stream there.
SHORT_FETCH_WAIT_MS = 10


class Settings(BaseSettings):
    """Connection settings shared by every client and service.

    Parameters:
        bootstrap_servers: Kafka ``bootstrap.servers``.
        redis_urls: the lock table's Redis nodes (1 or an odd number >= 3 for quorum).
        topic_prefix: prefix of every internal topic (retry, DLQ, delay levels, half/op).
        redis_prefix: prefix of every Redis key.
        kafka: extra confluent-kafka settings merged into every client.
        delay: the delay levels and limits that producers, consumers' retries and forwarders share
            (``ROCKETKAFKA_DELAY_*``, read when these settings are made).
        internal_replication_factor: replicas of every internal topic rocketkafka creates (None or -1:
            the broker's ``default.replication.factor``). Delayed messages and open transactions live only
            there, so they should be as durable as the user's topics.
        internal_min_insync_replicas: ``min.insync.replicas`` of new internal topics (None: the broker's).
        fetch_wait_ms: how long the broker may hold a fetch of the engine's consumers while no record is
            waiting (librdkafka's ``fetch.wait.max.ms``; None: :data:`DEFAULT_FETCH_WAIT_MS`). A broker that
            answers as soon as a record arrives (Apache Kafka) costs no latency for a long wait, and an idle
            consumer sends fewer empty fetches; a broker that holds every fetch for its whole wait (Tansu,
            DESIGN §4) needs :data:`SHORT_FETCH_WAIT_MS`. The test backends and the dev stack probe which one
            their broker is (:func:`rocketkafka.testing.broker_probes.probe_fetch_wait`).
        otel: OpenTelemetry tracing (:mod:`rocketkafka.otel`: spans of every hop, W3C trace context in the
            headers) for every client made with these settings that does not say otherwise (``otel=``);
            ``ROCKETKAFKA_OTEL=1`` turns it on for the sidecars too. Needs the ``otel`` extra.

    Where values come from, first wins: arguments in code, ``ROCKETKAFKA_*`` variables, the
    properties file ``ROCKETKAFKA_CONFIG_FILE`` names (:mod:`rocketkafka.config_file`, the place for
    passwords), the defaults; ``kafka`` settings of all of them are merged.

    Secrets pass through to every internal client and nowhere else: ``repr``/``str`` show
    ``***`` for secret Kafka settings (``sasl.password``, ``ssl.key.password``, ...) and for
    Redis URL passwords, and validation errors never repeat the values given.
    """

    # hide_input_in_errors: a ValidationError would otherwise quote the input -- URLs with passwords
    model_config = SettingsConfigDict(env_prefix="ROCKETKAFKA_", extra="forbid", hide_input_in_errors=True)

    bootstrap_servers: str = ""
    redis_urls: Annotated[list[str], NoDecode] = Field(default_factory=list)
    topic_prefix: str = DEFAULT_TOPIC_PREFIX
    redis_prefix: str = "rk"
    kafka: dict[str, Any] = Field(default_factory=dict)
    delay: DelayConfig = Field(default_factory=DelayConfig.load)
    internal_replication_factor: int | None = None
    internal_min_insync_replicas: int | None = None
    fetch_wait_ms: int | None = Field(default=None, ge=0, le=300_000)
    otel: bool = False

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Code, then the environment, then ``ROCKETKAFKA_CONFIG_FILE``'s properties."""
        return init_settings, env_settings, _ConfigFileSource(settings_cls), dotenv_settings, file_secret_settings

    @field_validator("internal_replication_factor", "internal_min_insync_replicas", mode="before")
    @classmethod
    def _broker_decides(cls, value: Any) -> Any:
        """``-1`` (Kafka's "the broker's default") and an empty variable mean None."""
        return None if value in (-1, "-1", "") else value

    @field_validator("fetch_wait_ms", mode="before")
    @classmethod
    def _empty_is_default(cls, value: Any) -> Any:
        """An empty ``ROCKETKAFKA_FETCH_WAIT_MS`` means the default."""
        return None if value == "" else value

    @field_validator("internal_replication_factor", "internal_min_insync_replicas")
    @classmethod
    def _check_count(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"must be >= 1, or -1 for the broker's default, got {value}")
        return value

    @model_validator(mode="after")
    def _check_insync(self) -> Settings:
        rf, isr = self.internal_replication_factor, self.internal_min_insync_replicas
        if rf is not None and isr is not None and isr > rf:
            raise ValueError(f"internal_min_insync_replicas {isr} is above internal_replication_factor {rf}: "
                             "every write to an internal topic would fail")
        return self

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
                raise ValueError(f"{redact_url(url)!r} is not a redis://, rediss:// or unix:// URL")
            try:  # parses only; connects to nothing
                redis.ConnectionPool.from_url(url)
            except ValueError as exc:
                raise ValueError(f"Redis URL {redact_url(url)!r} does not parse: {redact_url(str(exc))}") from None
        return urls

    @field_validator("topic_prefix")
    @classmethod
    def _check_prefix(cls, prefix: str) -> str:
        problem = prefix_problem(prefix)
        if problem is not None:
            raise ValueError(f"topic prefix {prefix!r}: {problem}")
        return prefix

    def __repr_args__(self) -> Any:
        """What ``repr`` and ``str`` show: secrets as ``***`` (the values themselves stay usable)."""
        for name, value in super().__repr_args__():
            if name == "redis_urls":
                value = [redact_url(url) for url in value]
            elif name == "kafka":
                value = redact_config(value)
            elif name == "bootstrap_servers":
                value = redact_url(value)
            yield name, value

    @classmethod
    def load(cls, config: dict[str, Any] | None = None, redis_urls: list[str] | str | None = None, *,
             require_broker: bool = True, **overrides: Any) -> Settings:
        """Settings from a confluent config dict + Redis URLs, else the ``ROCKETKAFKA_*`` environment.

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
        except ValidationError as exc:
            raise ConfigError(validation_summary(exc, "bad settings")) from None
        if require_broker and not settings.bootstrap_servers:
            raise ConfigError("no broker: pass {'bootstrap.servers': ...} or set ROCKETKAFKA_BOOTSTRAP_SERVERS")
        return settings

    @classmethod
    def from_client_config(cls, config: dict[str, Any], require_broker: bool = True) -> tuple[Settings, dict[str, Any]]:
        """Settings from a drop-in client's confluent-kafka config dict, and the dict without our keys.

        The dict's security settings (``security.protocol``, ``sasl.*``, ``ssl.*``: :func:`is_connection_setting`)
        go into the settings' ``kafka`` too, so every client made for this one connects the same way.

        Our keys, all optional (the ``ROCKETKAFKA_*`` environment fills the rest):
        ``rocketkafka.redis.urls`` (comma separated), ``rocketkafka.topic.prefix``,
        ``rocketkafka.redis.prefix``, ``rocketkafka.delay.levels`` (``"1s 5s 10s"``),
        ``rocketkafka.internal.replication.factor``, ``rocketkafka.internal.min.insync.replicas``.

        Raises:
            ConfigError: nothing names a broker, or a value is invalid.
        """
        rest = {k: v for k, v in config.items() if not k.startswith(CLIENT_KEY_PREFIX)}
        ours = {k: v for k, v in config.items() if k.startswith(CLIENT_KEY_PREFIX)}
        unknown = set(ours) - set(CLIENT_KEYS)
        if unknown:
            raise ConfigError(f"unknown setting {sorted(unknown)[0]!r}: rocketkafka's are {', '.join(CLIENT_KEYS)}")
        overrides: dict[str, Any] = {}
        if ours.get("rocketkafka.topic.prefix"):
            overrides["topic_prefix"] = ours["rocketkafka.topic.prefix"]
        if ours.get("rocketkafka.redis.prefix"):
            overrides["redis_prefix"] = ours["rocketkafka.redis.prefix"]
        if ours.get("rocketkafka.delay.levels"):
            overrides["delay"] = DelayConfig.load(levels=ours["rocketkafka.delay.levels"])
        for key in ("rocketkafka.internal.replication.factor", "rocketkafka.internal.min.insync.replicas"):
            if ours.get(key) not in (None, ""):
                overrides[key.removeprefix(CLIENT_KEY_PREFIX).replace(".", "_")] = ours[key]
        servers = rest.pop("bootstrap.servers", None)
        # who we are and how we connect hold for every client rocketkafka makes beside this one (its engine's
        # consumers, admin and producers): without them those cannot even log in to a secured cluster
        shared = {k: v for k, v in rest.items() if is_connection_setting(k)}
        given = {**({"bootstrap.servers": servers} if servers else {}), **shared}
        settings = cls.load(given or None, ours.get("rocketkafka.redis.urls"), require_broker=require_broker,
                            **overrides)
        return settings, rest

    def kafka_config(self, **extra: Any) -> dict[str, Any]:
        """A confluent-kafka config dict: ``bootstrap.servers`` + ``kafka`` + ``extra``.

        librdkafka's own log lines go to the Python logger ``rocketkafka.rdkafka`` instead of stderr.
        """
        return {"bootstrap.servers": self.bootstrap_servers, "logger": RDKAFKA_LOG, **self.kafka, **extra}

    def client_properties(self) -> dict[str, str]:
        """``kafka`` as name/value strings, for clients configured that way (Spark's ``kafka.*`` options).

        Only plain values pass (callables such as ``logger`` or ``stats_cb`` stay in this process).
        """
        return {key: str(value).lower() if isinstance(value, bool) else str(value)
                for key, value in self.kafka.items() if isinstance(value, (str, int, float, bool))}

    def environment(self) -> dict[str, str]:
        """These settings as ``ROCKETKAFKA_*`` variables, for a service started as a subprocess."""
        env = {"ROCKETKAFKA_BOOTSTRAP_SERVERS": self.bootstrap_servers,
               "ROCKETKAFKA_REDIS_URLS": ",".join(self.redis_urls),
               "ROCKETKAFKA_TOPIC_PREFIX": self.topic_prefix,
               "ROCKETKAFKA_REDIS_PREFIX": self.redis_prefix}
        if self.kafka:
            env["ROCKETKAFKA_KAFKA"] = json.dumps(self.kafka)
        if self.internal_replication_factor is not None:
            env["ROCKETKAFKA_INTERNAL_REPLICATION_FACTOR"] = str(self.internal_replication_factor)
        if self.internal_min_insync_replicas is not None:
            env["ROCKETKAFKA_INTERNAL_MIN_INSYNC_REPLICAS"] = str(self.internal_min_insync_replicas)
        if self.fetch_wait_ms is not None:
            env["ROCKETKAFKA_FETCH_WAIT_MS"] = str(self.fetch_wait_ms)
        env.update(self.delay.environment())
        return env

    def child_environment(self, base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
        """The whole environment of a child process that must use these settings: ``base`` (default this
        process's environment) without its own connection variables (``ROCKETKAFKA_<field>``,
        ``ROCKETKAFKA_DELAY_*``, ``ROCKETKAFKA_CONFIG_FILE``), then :meth:`environment`, then ``extra``.

        This is how settings reach a subprocess (a sidecar, a benchmark contender, a chaos worker):
        secrets (``sasl.password``, Redis URL passwords) travel in the environment, which only the
        process's owner can read, never in its ``argv``, which ``ps`` shows every user of the host.
        The child reads them back with ``Settings()`` / :meth:`load`. Stale variables of the parent
        are dropped, so the child gets exactly these settings.
        """
        env = {name: value for name, value in (os.environ if base is None else base).items()
               if not _is_settings_variable(name)}
        env.update(self.environment())
        env.update(extra)
        return env

    @property
    def engine_fetch_wait_ms(self) -> int:
        """The ``fetch.wait.max.ms`` of the engine's consumers: :attr:`fetch_wait_ms`, else the default."""
        return DEFAULT_FETCH_WAIT_MS if self.fetch_wait_ms is None else self.fetch_wait_ms

    def require_redis(self) -> list[str]:
        """The Redis URLs, or a clear error for clients that need the lock table."""
        if not self.redis_urls:
            raise ConfigError("no Redis nodes: pass redis_urls=[...] or set ROCKETKAFKA_REDIS_URLS")
        return self.redis_urls

    @property
    def topics(self) -> TopicNames:
        """Internal topic names under this prefix."""
        return TopicNames(self.topic_prefix)

    @property
    def keys(self) -> RedisKeys:
        """Redis key names under this prefix."""
        return RedisKeys(self.redis_prefix)


def _is_settings_variable(name: str) -> bool:
    """Whether the environment variable ``name`` sets a :class:`Settings` field (or names the config file)."""
    if not name.startswith("ROCKETKAFKA_"):
        return False
    field = name[len("ROCKETKAFKA_"):].lower()
    return field in Settings.model_fields or field.startswith("delay_") or name == CONFIG_FILE_ENV


class _ConfigFileSource(PydanticBaseSettingsSource):
    """The settings source of ``ROCKETKAFKA_CONFIG_FILE`` (read each time settings are made)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ gives every value at once

    def __call__(self) -> dict[str, Any]:
        return config_file_values()
