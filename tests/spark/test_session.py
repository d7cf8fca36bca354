"""The session's defaults that keep a loaded machine's slow JVM from failing a collect()."""

from __future__ import annotations

import os

import pytest

from rocketkafka.spark.session import AUTH_SOCKET_TIMEOUT

pytestmark = pytest.mark.integration


def test_driver_and_jvm_wait_two_minutes_for_each_other_on_the_local_socket(spark):
    assert spark.sparkContext.getConf().get(AUTH_SOCKET_TIMEOUT) == "120s"
    assert os.environ["SPARK_AUTH_SOCKET_TIMEOUT"] == "120"  # what PySpark's side of the socket reads
    assert spark.range(3).collect()[-1].id == 2  # a collect reads through that socket
