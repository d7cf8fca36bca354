"""The embedded stack: `rocketkafka dev up` then `down` leaves no process behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis
from confluent_kafka.admin import AdminClient

from rocketkafka.testing.apache_kafka import kafka_version
from rocketkafka.testing.devstack import DevStack

pytestmark = pytest.mark.integration


def _cli(*args: str, home: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "ROCKETKAFKA_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "rocketkafka.tools.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_dev_up_status_down_leaves_nothing_behind(tmp_path):
    up = _cli("dev", "up", "--redis-nodes", "3", home=tmp_path)
    assert up.returncode == 0, up.stderr
    record = json.loads((tmp_path / "dev-stack.json").read_text())
    pids = [n["pid"] for n in record["nodes"]]
    try:
        assert len(pids) == 4 and all(_alive(p) for p in pids)
        assert _cli("dev", "status", home=tmp_path).returncode == 0
        assert AdminClient({"bootstrap.servers": record["bootstrap_servers"]}).list_topics(timeout=10).brokers
        assert all(redis.Redis.from_url(u).ping() for u in record["redis_urls"])
        assert _cli("dev", "up", home=tmp_path).returncode == 0  # idempotent: same stack
        assert json.loads((tmp_path / "dev-stack.json").read_text())["nodes"] == record["nodes"]
    finally:
        down = _cli("dev", "down", home=tmp_path)
    assert down.returncode == 0 and "stopped" in down.stdout
    assert not any(_alive(p) for p in pids)
    assert _cli("dev", "status", home=tmp_path).returncode == 1
    assert not (tmp_path / "dev-stack.json").exists()


@pytest.mark.skipif(shutil.which("java") is None, reason="Apache Kafka needs Java 17+ on PATH")
def test_dev_up_with_a_three_node_apache_kafka_cluster_then_down(tmp_path):
    """`dev up --broker kafka --nodes 3`: three KRaft nodes, metadata lists all three, status names the broker."""
    up = _cli("dev", "up", "--broker", "kafka", "--nodes", "3", "--redis-nodes", "1", home=tmp_path, timeout=240)
    assert up.returncode == 0, up.stderr
    record = json.loads((tmp_path / "dev-stack.json").read_text())
    pids = [n["pid"] for n in record["nodes"]]
    try:
        assert "ROCKETKAFKA_BOOTSTRAP_SERVERS=" in up.stdout and "Apache Kafka" in up.stdout
        assert len(record["bootstrap_servers"].split(",")) == 3 and len(pids) == 4
        status = _cli("dev", "status", home=tmp_path)
        assert status.returncode == 0 and json.loads(status.stdout)["broker"] == f"Apache Kafka {kafka_version()}"
        admin = AdminClient({"bootstrap.servers": record["bootstrap_servers"]})
        assert len(admin.list_topics(timeout=10).brokers) == 3
        del admin
    finally:
        down = _cli("dev", "down", home=tmp_path)
    assert down.returncode == 0 and "stopped" in down.stdout
    assert not any(_alive(p) for p in pids)


def test_attached_stack_dies_with_its_parent(tmp_path):
    """A test session killed by SIGKILL must not leave its broker and Redis nodes running."""
    script = ("from rocketkafka.testing.devstack import DevStack; import json,sys,time; s=DevStack(redis_nodes=2).start(); "
              "print(json.dumps([n['pid'] for n in s.describe()['nodes']]), flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pids = json.loads(proc.stdout.readline())
    assert all(_alive(p) for p in pids)
    proc.kill()
    proc.wait()
    import time

    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)


def test_a_node_restarted_from_a_short_lived_thread_outlives_that_thread(tmp_path):
    """PDEATHSIG follows the forking *thread*: a fault injector's restart must not die when its thread ends."""
    with DevStack(redis_nodes=1, workdir=tmp_path) as stack:
        stack.stop_redis(0)
        restart = threading.Thread(target=stack.start_redis, args=(0,))
        restart.start()
        restart.join()
        time.sleep(0.5)
        assert redis.Redis.from_url(stack.redis_urls[0], socket_timeout=2).ping()
