"""Spark's Kafka connector for sessions: coordinates equal to PySpark's version, the cache, one-line refusals."""

from __future__ import annotations

import pyspark
import pytest

from rocketkafka.spark import EngineUnavailableError
from rocketkafka.spark.connector import _artifact, coordinates, session_jars


def test_coordinates_follow_the_installed_pyspark_exactly():
    assert coordinates() == f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"


@pytest.mark.parametrize(("jar", "artifact"), [
    ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "spark-sql-kafka-0-10_2.13"),
    ("kafka-clients-3.9.2.jar", "kafka-clients"),
    ("zstd-jni-1.5.7-7.jar", "zstd-jni"),
    ("log4j-1.2-api-2.25.4.jar", "log4j-1.2-api"),
    ("netty-codec-4.1.100.Final.jar", "netty-codec"),
    ("guava-33.4.0-jre.jar", "guava"),
])
def test_jar_names_give_artifact_ids(jar, artifact):
    assert _artifact(jar) == artifact


def test_off_means_no_jars_and_on_names_the_coordinates_when_mvn_is_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("ROCKETKAFKA_SPARK_JARS_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn
    assert session_jars("off") == []
    with pytest.raises(EngineUnavailableError) as refused:
        session_jars("on")
    line = str(refused.value)
    assert "\n" not in line and coordinates() in line and "no mvn" in line
    assert session_jars("auto") == []  # auto goes on without it (the Python source reads)
    assert (tmp_path / f"{pyspark.__version__}.failed").read_text().strip() == line  # and does not retry for an hour
    with pytest.raises(EngineUnavailableError, match="use one of auto, on, off"):
        session_jars("maybe")
