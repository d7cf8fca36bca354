"""Where users run Spark: a local-cluster master (separate executor JVMs and Python workers) and Spark Connect.

Each job runs in its own process (one SparkContext per process) with an environment that carries nothing of
this checkout: no PYTHONPATH, so executors import rocketkafka from the installed package and its [spark] extra.
The job's stderr is also checked for PySpark's pandas >= 3 warning (the [spark] extra pins pandas < 3).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.conftest import Record

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PANDAS_WARNING = "does not yet fully support pandas"


def _run_job(bootstrap: str, topic: str, how: str, url: str, tmp_path: Path) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "SPARK_HOME")}
    done = subprocess.run([sys.executable, "-W", "default", "-m", "tests.spark.jobs.cluster_job", bootstrap, topic, how,
                           url], cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def _topic(rk_topic, produce) -> str:
    topic = rk_topic(partitions=4)
    produce(topic, [Record(value=b"x", key=b"k%d" % (i % 8), partition=i % 4, headers=[("seq", b"%d" % i)])
                    for i in range(400)])
    return topic


@pytest.mark.any_broker  # Spark's or the CLI's side, minutes long: CI runs it in the Tansu pass only
def test_local_cluster_executors_need_only_the_spark_extra(rk_settings, rk_topic, produce, tmp_path):
    topic = _topic(rk_topic, produce)
    job, stderr = _run_job(rk_settings.bootstrap_servers, topic, "--master", "local-cluster[2,1,1024]", tmp_path)
    assert job["rows"] == 400 and job["summary"]["messages"] == 400 and job["summary"]["violations"] == 0
    assert job["driver"] not in job["workers"] and len(job["workers"]) >= 2  # Python workers of two executors
    assert PANDAS_WARNING not in stderr
    if shutil.which("mvn") and os.environ.get("ROCKETKAFKA_SPARK_CONNECTOR", "auto") != "off":
        # the session fetched Spark's Kafka source and shipped it to the executors: the plan is Kafka's relation
        assert job["engine"] == "jvm" and "KafkaRelation" in job["plan"], job["plan"]


@pytest.mark.any_broker  # Spark's or the CLI's side, minutes long: CI runs it in the Tansu pass only
@pytest.mark.skipif(importlib.util.find_spec("grpc") is None, reason="needs rocketkafka[spark-connect] (grpcio)")
def test_spark_connect_serves_the_python_source_and_the_audits(rk_settings, rk_topic, produce, tmp_path):
    topic = _topic(rk_topic, produce)
    job, stderr = _run_job(rk_settings.bootstrap_servers, topic, "--remote", "local[2]", tmp_path)
    assert job["session"].startswith("pyspark.sql.connect")
    assert job["rows"] == 400 and job["summary"]["messages"] == 400 and job["summary"]["violations"] == 0
    assert PANDAS_WARNING not in stderr
