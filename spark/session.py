"""A local-friendly SparkSession with the Python Kafka source registered.

Python workers must run the interpreter that has rocketkafka installed, so
``PYSPARK_PYTHON`` defaults to :data:`sys.executable`, and the project root is
put on the workers' ``PYTHONPATH`` when the package runs from a source tree.
"""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

#: Environment variable naming the default master (else ``local[2]``).
MASTER_ENV = "ROCKETKAFKA_SPARK_MASTER"


def prepare_python_env() -> None:
    """Point Spark's Python workers at this interpreter and this source tree (before the JVM starts)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    root = Path(__file__).resolve().parent.parent
    if root.name in ("site-packages", "dist-packages"):  # installed: workers find it anyway
        return
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(root) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(root), *paths])


_registered: weakref.WeakSet = weakref.WeakSet()


def register_source(spark: SparkSession) -> None:
    """Register the ``rocketkafka-kafka`` Python data source in ``spark`` (once per session)."""
    from spark.kafka_source import KafkaDataSource

    if spark in _registered:
        return
    spark.dataSource.register(KafkaDataSource)
    _registered.add(spark)


def spark_session(master: str | None = None, app_name: str = "rocketkafka", conf: Mapping[str, Any] | None = None,
                  shuffle_partitions: int = 8, log_level: str = "WARN") -> SparkSession:
    """Get or create a SparkSession for rocketkafka pipelines.

    Parameters:
        master: Spark master URL; default ``$ROCKETKAFKA_SPARK_MASTER`` or ``local[2]``.
        app_name: the application name.
        conf: extra Spark settings (they win over the defaults here).
        shuffle_partitions: ``spark.sql.shuffle.partitions`` (Spark's 200 is slow for small local jobs).
        log_level: Spark's log level.
    """
    prepare_python_env()
    settings: dict[str, Any] = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.python.worker.reuse": "true",
        **(conf or {}),
    }
    builder = SparkSession.builder.master(master or os.environ.get(MASTER_ENV) or "local[2]").appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    register_source(spark)
    return spark
