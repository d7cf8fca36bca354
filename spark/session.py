"""Spark sessions for rocketkafka pipelines, and the Python Kafka source registered in them.

Python workers must run the interpreter that has rocketkafka installed, so
``PYSPARK_PYTHON`` defaults to :data:`sys.executable`, and the project root is
put on the workers' ``PYTHONPATH`` when the package runs from a source tree.
``SPARK_HOME`` defaults to the pyspark package (``local-cluster`` masters start
executors from it) and ``SPARK_LOCAL_IP`` to the loopback address.

Classic sessions get Spark's own Kafka source (:mod:`rocketkafka.spark.connector`:
fetched once with ``mvn``, passed as ``spark.jars`` so executors get it too), unless
``connector="off"`` / ``$ROCKETKAFKA_SPARK_CONNECTOR=off``.

:func:`spark_session` serves classic masters (``local[2]``, ``local-cluster[2,1,1024]``,
``spark://...``, ``yarn``) and Spark Connect (``remote="sc://host:15002"``, or
``remote="local[2]"`` for a Connect server in this process; needs ``pyspark[connect]``).

Secrets in source options (``kafka.sasl.password``, the JAAS string the JVM engine is given, a PEM
private key) never show in a plan: :func:`protect_secrets` widens Spark's
``spark.sql.redaction.options.regex`` in every session these functions touch, so ``explain()``, the
query execution's string and the SQL UI show ``*********(redacted)`` for them. Spark's own default
(``spark.redaction.regex``: secret|password|token|access key, in keys or values) already hides the
password and the JAAS string; what it misses, an inline private key under ``kafka.ssl.keystore.key``
or ``kafka.ssl.key.pem``, is covered here. The options travel to the JVM through py4j, which logs each
command it sends at DEBUG: :func:`protect_secrets` also hides the secret values in those lines.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from rocketkafka.logs import SECRET_SETTING
from rocketkafka.redaction import REDACTED
from rocketkafka.spark.connector import session_jars

log = logging.getLogger(__name__)

#: Environment variable naming the default master (else ``local[2]``).
MASTER_ENV = "ROCKETKAFKA_SPARK_MASTER"
#: Environment variable naming a Spark Connect server (``sc://host:port``); wins over the master.
REMOTE_ENV = "ROCKETKAFKA_SPARK_REMOTE"
#: Spark setting that reduces a Python worker's error to its last line (``Type: message``), so a
#: data source error reads ``[PYTHON_DATA_SOURCE_ERROR] ...: SourceOptionError: Kafka source option ...``.
HIDE_TRACEBACK = "spark.sql.execution.pyspark.udf.hideTraceback.enabled"
#: How long the driver and the JVM wait for each other on the local socket a ``collect()`` reads through
#: (Spark's 15 s, raised to 120 s here). On a loaded machine the JVM can be later than that, and PySpark 4.2
#: then reports ``UnboundLocalError: ... 'sockfile'`` instead of the timeout (its ``_load_from_socket``
#: closes a file it never opened): seen once in CI, beside four Kafka brokers on two cores.
AUTH_SOCKET_TIMEOUT = "spark.python.authenticate.socketTimeout"


#: Spark's setting naming the data source options that plans show as ``*********(redacted)`` (a regex matched
#: against each option's key and value; Spark's default ``(?i)url``, with ``spark.redaction.regex`` applied too).
OPTIONS_REDACTION = "spark.sql.redaction.options.regex"
#: What :func:`protect_secrets` adds to it: the setting names rocketkafka's own logs hide
#: (:data:`rocketkafka.logs.SECRET_SETTING`) and PEM private keys given inline.
SECRET_OPTIONS = f"(?i:{SECRET_SETTING.pattern}|PRIVATE KEY)"


class Py4jRedaction(logging.Filter):
    """Hides secrets in py4j's DEBUG lines: each command it sends to the JVM is logged whole, and a source option
    travels as ``s<key>`` then ``s<value>`` lines. The value after a secret key (:data:`SECRET_SETTING`), and any
    line holding a JAAS password or a private key, read ``***``."""

    _KEY = re.compile(r"^s[\w.\-]+$")
    _SECRET_VALUE = re.compile(r"password\s*=|PRIVATE KEY", re.I)

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if not (SECRET_SETTING.search(text) or "PRIVATE KEY" in text):
            return True
        lines = text.split("\n")
        for i, line in enumerate(lines):
            if self._SECRET_VALUE.search(line):
                lines[i] = line[:1] + REDACTED
            elif self._KEY.match(line) and SECRET_SETTING.search(line) and lines[i + 1:i + 2] not in ([], ["e"]):
                lines[i + 1] = lines[i + 1][:1] + REDACTED  # the option's value (a lone "e" ends the command)
        record.msg, record.args = "\n".join(lines), ()
        return True


_PY4J_LOGGERS = ("py4j.clientserver", "py4j.java_gateway")


def _redact_py4j_logs() -> None:
    for name in _PY4J_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, Py4jRedaction) for f in logger.filters):
            logger.addFilter(Py4jRedaction())


def protect_secrets(spark: SparkSession) -> None:
    """Keep secret source options out of ``spark``'s plans and of py4j's DEBUG log.

    Adds :data:`SECRET_OPTIONS` to the session's :data:`OPTIONS_REDACTION` (what is there stays); a runtime SQL
    setting, so it works on sessions made elsewhere and on Spark Connect. Where the session refuses it, a warning
    says so (Spark's default redaction still hides passwords and JAAS strings). And puts a
    :class:`Py4jRedaction` filter on py4j's loggers (once).
    """
    _redact_py4j_logs()
    try:
        current = spark.conf.get(OPTIONS_REDACTION, None) or "(?i)url"
        if SECRET_OPTIONS not in current:
            spark.conf.set(OPTIONS_REDACTION, f"{current}|{SECRET_OPTIONS}")
    except Exception as exc:  # noqa: BLE001 - a Connect server may refuse; reading goes on
        log.warning("cannot widen %s in this Spark session (%s): inline private keys in source options may show in "
                    "plans", OPTIONS_REDACTION, type(exc).__name__)


def prepare_python_env() -> None:
    """Point Spark's Python workers at this interpreter and this source tree (before the JVM starts)."""
    import pyspark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_HOME", str(Path(pyspark.__file__).resolve().parent))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    root = Path(__file__).resolve().parent.parent
    if root.name in ("site-packages", "dist-packages"):  # installed: workers find it anyway
        return
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(root) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(root), *paths])


_registered: weakref.WeakSet = weakref.WeakSet()


def register(spark: SparkSession, concise_errors: bool = True) -> str:
    """Register the Python Kafka source in ``spark`` (once per session); returns its format name.

    The name is ``rocketkafka-kafka``: Spark keeps ``kafka`` for its JVM connector and refuses
    a Python data source of that name (``DATA_SOURCE_ALREADY_EXISTS``) even when the connector
    is not on the classpath, so the built-in short name cannot be taken over; use
    :func:`rocketkafka.spark.read_messages` to get ``kafka`` where it loads and ours elsewhere.

    Also makes the session's plans redact secret options (:func:`protect_secrets`).

    Parameters:
        concise_errors: set :data:`HIDE_TRACEBACK` in the session, so option errors raised in
            Spark's Python workers show their one line instead of a worker traceback.
    """
    from rocketkafka.spark.kafka_source import SOURCE_NAME, KafkaDataSource

    if spark not in _registered:
        spark.dataSource.register(KafkaDataSource)
        _registered.add(spark)
    if concise_errors:
        spark.conf.set(HIDE_TRACEBACK, "true")
    protect_secrets(spark)
    return SOURCE_NAME


def register_source(spark: SparkSession) -> None:
    """Register the ``rocketkafka-kafka`` Python data source in ``spark``, its settings untouched (see :func:`register`)."""
    register(spark, concise_errors=False)


def spark_session(master: str | None = None, app_name: str = "rocketkafka", conf: Mapping[str, Any] | None = None,
                  shuffle_partitions: int = 8, log_level: str = "WARN", remote: str | None = None,
                  connector: str | None = None) -> SparkSession:
    """Get or create a SparkSession for rocketkafka pipelines, the Kafka source registered.

    Parameters:
        master: Spark master URL; default ``$ROCKETKAFKA_SPARK_MASTER`` or ``local[2]``.
        app_name: the application name.
        conf: extra Spark settings (they win over the defaults here).
        shuffle_partitions: ``spark.sql.shuffle.partitions`` (Spark's 200 is slow for small local jobs).
        log_level: Spark's log level (classic sessions).
        remote: a Spark Connect URL (``sc://host:15002``, or ``local[N]`` for an in-process
            server); default ``$ROCKETKAFKA_SPARK_REMOTE``; wins over ``master``.
        connector: put Spark's Kafka source on a classic session's classpath: ``auto`` (where ``mvn``
            can fetch it), ``on`` (or raise :class:`~rocketkafka.spark.errors.EngineUnavailableError`),
            ``off``; default ``$ROCKETKAFKA_SPARK_CONNECTOR`` or ``auto``. Spark Connect sessions use
            the server's classpath.
    """
    prepare_python_env()
    remote = remote or os.environ.get(REMOTE_ENV) or None
    settings: dict[str, Any] = {
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        HIDE_TRACEBACK: "true",
        **(conf or {}),
    }
    if remote:
        spark = SparkSession.builder.remote(remote).appName(app_name).getOrCreate()
        for key, value in settings.items():  # runtime settings; a Connect server has its own static ones
            spark.conf.set(key, value)
    else:
        static = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                  "spark.python.worker.reuse": "true", "spark.driver.host": "127.0.0.1",
                  "spark.driver.bindAddress": "127.0.0.1", AUTH_SOCKET_TIMEOUT: "120s"}
        builder = SparkSession.builder.master(master or os.environ.get(MASTER_ENV) or "local[2]").appName(app_name)
        jars = [str(j) for j in session_jars(connector)]
        if jars:
            settings["spark.jars"] = ",".join([*filter(None, str(settings.get("spark.jars", "")).split(",")), *jars])
        for key, value in {**static, **settings}.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel(log_level)
    register(spark, concise_errors=str(settings[HIDE_TRACEBACK]).lower() == "true")
    return spark
