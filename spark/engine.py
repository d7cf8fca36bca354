"""One door to Kafka for every pipeline: Spark's JVM ``kafka`` source where it loads, else ours.

:func:`read_messages` (batch) and :func:`read_message_stream` (streaming) take
the options of Spark's Kafka source and return a DataFrame with its schema; the
rest of a pipeline cannot tell which engine ran. The engine is chosen by the
``engine`` argument, else ``$ROCKETKAFKA_SPARK_ENGINE``, else ``auto``:

- ``jvm``: Spark's ``kafka`` source (``spark-sql-kafka-0-10`` on the classpath);
- ``python``: the project's reader (:mod:`rocketkafka.spark.kafka_source`);
- ``auto``: ``jvm`` when ``org.apache.spark.sql.kafka010.KafkaSourceProvider`` loads
  (:func:`~rocketkafka.spark.session.spark_session` puts it there where ``mvn`` can fetch it).

Batch reads through the JVM source get "latest" ending offsets pinned on the driver from
fetched watermarks (:mod:`rocketkafka.spark.jvm_ends`), so both engines end where the log does.

Credentials: the ``kafka.*`` options are confluent-kafka's settings (``kafka.security.protocol``,
``kafka.sasl.mechanism``, ``kafka.sasl.username``, ``kafka.sasl.password``, ``kafka.ssl.ca.location``),
given as options or taken from a :class:`~rocketkafka.config.Settings` (``settings=``: its bootstrap
servers and ``kafka`` settings; options given win). The Python reader hands them to librdkafka;
the JVM source gets them translated to the Java client's (``kafka.sasl.jaas.config``,
``kafka.ssl.truststore.*``: :mod:`rocketkafka.spark.jvm_security`), while the driver-side checks
keep using them as they are. Plans show none of the secrets (:func:`~rocketkafka.spark.session.protect_secrets`).

Options are checked on the driver before anything runs: an unknown option, bad
offsets JSON or a missing topic raise :class:`~rocketkafka.spark.errors.SourceOptionError` /
:class:`~rocketkafka.errors.TopicNotFoundError` right at the call.

>>> df = read_messages(spark, {"kafka.bootstrap.servers": bs, "subscribe": "orders"},  # doctest: +SKIP
...                    includeHeaders=True)
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession

from rocketkafka.spark.connector import coordinates
from rocketkafka.spark.errors import EngineUnavailableError, SourceOptionError
from rocketkafka.spark.jvm_ends import lagging_list_offsets, pinned_ending
from rocketkafka.spark.jvm_security import jvm_source_options
from rocketkafka.spark.kafka_io import discover, open_consumer
from rocketkafka.spark.kafka_source import SOURCE_NAME, resolve_offsets, times_by_partition
from rocketkafka.spark.options import SourceOptions, parse_options
from rocketkafka.spark.session import protect_secrets, register_source
from rocketkafka.topic_partition import TP

if TYPE_CHECKING:
    from rocketkafka.config import Settings

log = logging.getLogger(__name__)

#: Environment variable that forces an engine (``auto``, ``jvm``, ``python``).
ENGINE_ENV = "ROCKETKAFKA_SPARK_ENGINE"
ENGINES = ("auto", "jvm", "python")
#: Provider class of Spark's JVM Kafka source.
JVM_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def jvm_kafka_available(spark: SparkSession) -> bool:
    """True when Spark's JVM Kafka source (``spark-sql-kafka-0-10``) can be loaded in ``spark``."""
    jvm = getattr(spark, "_jvm", None) or getattr(getattr(spark, "sparkContext", None), "_jvm", None)
    if jvm is None:  # Spark Connect: no py4j gateway; ask the server to resolve the format
        try:
            spark.read.format("kafka").option("kafka.bootstrap.servers", "localhost:0").option("subscribe", "probe").load().schema
            return True
        except Exception:  # noqa: BLE001 - any failure means it cannot be used
            return False
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(JVM_PROVIDER, False, loader)
        return True
    except Exception:  # noqa: BLE001 - py4j raises Py4JJavaError for ClassNotFoundException
        return False


def _wanted(engine: str | None) -> str:
    return (engine or os.environ.get(ENGINE_ENV) or "auto").strip().lower()


def choose_engine(spark: SparkSession, engine: str | None = None) -> str:
    """``jvm`` or ``python`` for ``engine`` (``None``: ``$ROCKETKAFKA_SPARK_ENGINE`` or ``auto``).

    Raises:
        EngineUnavailableError: ``jvm`` was forced but the connector does not load.
        ConfigError: an unknown engine name.
    """
    wanted = _wanted(engine)
    if wanted not in ENGINES:
        raise SourceOptionError("engine", f"unknown engine {wanted!r}; use one of {', '.join(ENGINES)}")
    if wanted == "python":
        return "python"
    available = jvm_kafka_available(spark)
    if wanted == "jvm" and not available:
        raise EngineUnavailableError(
            f"engine 'jvm' needs Spark's Kafka connector {coordinates()} in the session (spark_session("
            f"connector='on') fetches it with mvn, or pass it in spark.jars) or use engine='python'")
    return "jvm" if available else "python"


def _as_option(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value)
    return str(value)


def settings_options(settings: Settings) -> dict[str, str]:
    """Source options of a :class:`~rocketkafka.config.Settings`: ``kafka.bootstrap.servers`` and its ``kafka``
    client settings (SASL, TLS, ...) as ``kafka.*``."""
    options = {f"kafka.{key}": value for key, value in settings.client_properties().items()}
    if settings.bootstrap_servers:
        options["kafka.bootstrap.servers"] = settings.bootstrap_servers
    return options


def _merge(options: Mapping[str, Any] | None, more: Mapping[str, Any], settings: Settings | None = None
           ) -> dict[str, str]:
    given = {**(options or {}), **more}
    base = {k: v for k, v in (settings_options(settings) if settings is not None else {}).items()
            if k.lower() not in {str(g).lower() for g in given}}
    return {str(k): _as_option(v) for k, v in {**base, **given}.items() if v is not None}


def check_source(options: Mapping[str, str], streaming: bool, engine: str) -> tuple[SourceOptions, list[TP] | None]:
    """Check options and topics on the driver (raises before any Spark job is planned); the partitions read,
    ``None`` when the JVM source gets Java-only client settings that only it can judge."""
    parsed = parse_options(options, streaming=streaming, jvm=engine == "jvm")
    try:
        consumer = open_consumer(parsed, "check")
    except SourceOptionError:
        if engine == "jvm":  # Java-only client settings; the JVM source will judge them
            return parsed, None
        raise
    try:
        tps = discover(consumer, parsed)
    finally:
        consumer.close()
    for name, spec in (("startingOffsets", parsed.starting), ("endingOffsets", parsed.ending)):
        if isinstance(spec, dict):  # JSON offsets must name every partition (as in Spark)
            resolve_offsets(spec, name, tps, dict.fromkeys(tps, (0, 0)))
    for name, times in (("startingOffsetsByTimestamp", parsed.starting_times),
                        ("endingOffsetsByTimestamp", parsed.ending_times)):
        if isinstance(times, dict):
            times_by_partition(times, name, tps)
    return parsed, tps


def _with_option(options: dict[str, str], name: str, value: str) -> dict[str, str]:
    """``options`` with ``name`` set, any spelling of it in another case dropped (Spark's options ignore case)."""
    return {**{k: v for k, v in options.items() if k.lower() != name.lower()}, name: value}


def _format(spark: SparkSession, engine: str) -> str:
    if engine == "jvm":
        protect_secrets(spark)
        return "kafka"
    register_source(spark)  # protects secrets too
    return SOURCE_NAME


def _load_options(options: dict[str, str], engine: str) -> dict[str, str]:
    """What the chosen source gets: the JVM source's ``kafka.*`` security settings in the Java client's names."""
    return jvm_source_options(options) if engine == "jvm" else options


def read_messages(spark: SparkSession, options: Mapping[str, Any] | None = None, *, engine: str | None = None,
                  settings: Settings | None = None, **more: Any) -> DataFrame:
    """A batch DataFrame with Spark's Kafka source schema.

    Parameters:
        spark: the session.
        options: Kafka source options (``kafka.bootstrap.servers``, ``subscribe``, ...).
        engine: ``auto`` | ``jvm`` | ``python`` (default ``$ROCKETKAFKA_SPARK_ENGINE`` or ``auto``).
        settings: rocketkafka settings whose bootstrap servers and Kafka client settings (credentials, TLS)
            become ``kafka.*`` options; ``options`` and ``more`` win over them.
        more: more options as keywords (``includeHeaders=True``, ``startingOffsets={...}``);
            bools become ``true``/``false`` and dicts JSON.

    Raises:
        SourceOptionError, TopicNotFoundError, EngineUnavailableError: before any job runs.
        KafkaAuthorizationError: the user may not describe or read a topic (the ACL is named).
    """
    opts = _merge(options, more, settings)
    chosen = choose_engine(spark, engine)
    parsed, tps = check_source(opts, streaming=False, engine=chosen)
    if chosen == "jvm" and tps is not None:
        pinned = pinned_ending(parsed, tps)  # the JVM source would trust ListOffsets "latest"
        if pinned is not None:
            opts = _with_option(opts, "endingOffsets", json.dumps(pinned))
    return spark.read.format(_format(spark, chosen)).options(**_load_options(opts, chosen)).load()


def read_message_stream(spark: SparkSession, options: Mapping[str, Any] | None = None, *, engine: str | None = None,
                        settings: Settings | None = None, **more: Any) -> DataFrame:
    """A streaming DataFrame with Spark's Kafka source schema (see :func:`read_messages`).

    The JVM source learns each micro-batch's end from the broker's ListOffsets "latest";
    where that answer lags the fetched end (Tansu), ``auto`` reads with the Python source
    instead, and a forced ``jvm`` logs a warning.
    """
    opts = _merge(options, more, settings)
    chosen = choose_engine(spark, engine)
    parsed, tps = check_source(opts, streaming=True, engine=chosen)
    if chosen == "jvm" and tps is not None:
        lagging = lagging_list_offsets(parsed, tps)
        if lagging:
            shown = ", ".join(f"{t}-{p}" for t, p in lagging[:3])
            if _wanted(engine) == "auto":
                log.info("the broker's ListOffsets lags the log end (%s): streaming with the Python source", shown)
                chosen = "python"
                parse_options(opts, streaming=True, jvm=False)  # the Python source serves fewer options
            else:
                log.warning("the broker's ListOffsets lags the log end (%s): Spark's JVM source will not read "
                            "a partition's last records until more arrive", shown)
    return spark.readStream.format(_format(spark, chosen)).options(**_load_options(opts, chosen)).load()
