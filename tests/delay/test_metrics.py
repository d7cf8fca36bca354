"""The forwarder's Prometheus endpoint: lateness histogram, forwarded and dead-lettered counts, its consumer's
lag and locks -- in process, and as `rocketkafka delay-forwarder` with ROCKETKAFKA_METRICS_PORT and JSON logs."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from confluent_kafka import Producer as RawProducer

from rocketkafka.tools.forwarder_cli import forwarder_environment
from rocketkafka.schedule.tiers import Tiers
from rocketkafka import Message, Producer
from rocketkafka.names import Header
from tests.delay.conftest import FAST, REPO, wait_until
from tests.conftest import per_partition, scrape

pytestmark = pytest.mark.integration


def test_lateness_histogram_counts_every_forwarded_message(rk_settings, rk_topic, delay_config, forwarder, receiver):
    topic = rk_topic(partitions=2)
    fwd = forwarder(metrics_port=0)
    seen = receiver({topic: 2})
    with Producer("metrics", settings=rk_settings) as producer:
        ids = [producer.send_sync(Message(topic, body=b"x", delay_time_level=1 + i % 2)).msg_id for i in range(40)]
    assert seen.wait_for(set(ids), 30)
    port = fwd.metrics.port
    samples = scrape(port)
    assert samples[("rocketkafka_delay_forwarded_total", frozenset())] == 40
    assert samples[("rocketkafka_delay_lateness_seconds_count", frozenset())] == 40
    assert samples[("rocketkafka_delay_lateness_seconds_bucket", frozenset({("le", "+Inf")}))] == 40
    assert samples[("rocketkafka_delay_dead_lettered_total", frozenset())] == 0
    # its consumer's series sit on the same endpoint: every delay partition locked, none lagging once forwarded
    owned = {(dict(labels)["topic"], int(dict(labels)["partition"])) for (name, labels), v in samples.items()
             if name == "rocketkafka_consumer_lock_owned" and v == 1}
    assert owned == fwd.assignment()
    assert wait_until(lambda: set(per_partition(scrape(port), "rocketkafka_consumer_lag", fwd.group).values()) == {0}, 10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_forwarder_service_serves_metrics_from_the_environment_and_logs_json_with_message_ids(
        rk_settings, rk_topic, delay_config, tmp_path):
    topic = rk_topic(partitions=1)
    port = free_port()
    env = {**forwarder_environment(rk_settings, FAST),
           "ROCKETKAFKA_METRICS_PORT": str(port), "ROCKETKAFKA_LOG_FORMAT": "json"}
    log_path = tmp_path / "fwd.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "rocketkafka.tools.cli", "-v", "delay-forwarder"], cwd=REPO, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        def locked() -> int:
            try:
                return sum(v for (name, _), v in scrape(port).items() if name == "rocketkafka_consumer_lock_owned")
            except OSError:
                return 0

        assert wait_until(lambda: locked() == len(Tiers(rk_settings.topics, delay_config).topics()) * 2, 30), \
            log_path.read_text()
        raw = RawProducer({"bootstrap.servers": rk_settings.bootstrap_servers})
        raw.produce(rk_settings.topics.delay_level(1), b"garbage", partition=0,
                    headers=[(Header.MSG_ID, b"BAD-1"), (Header.REAL_TOPIC, topic.encode())])
        assert raw.flush(10) == 0
        assert wait_until(lambda: scrape(port).get(("rocketkafka_delay_dead_lettered_total", frozenset())) == 1, 30)
    finally:
        proc.terminate()
        proc.wait(30)
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    assert any(line["logger"] == "rocketkafka.delay.forwarder" and line["level"] == "INFO" for line in lines)
    about = {line["logger"]: line for line in lines if line.get("msg_id") == "BAD-1"}
    assert set(about) == {"rocketkafka.delay.forward_handler", "rocketkafka.retry"}  # why it cannot be forwarded; its dead-lettering
    dead = about["rocketkafka.delay.forward_handler"]
    assert dead["level"] == "ERROR" and dead["topic"] == rk_settings.topics.delay_level(1) and dead["offset"] >= 0
    assert "missing header" in dead["message"]
