"""The Apache Kafka releases named in one place each: the newest (the default broker) and the oldest supported
(CI's 3-node pass runs on it), as the code, CI and the README name them."""

from __future__ import annotations

import re
from pathlib import Path

from rocketkafka.testing.apache_kafka import KAFKA_VERSION, OLDEST_KAFKA_VERSION

ROOT = Path(__file__).parents[2]


def test_ci_runs_the_oldest_release_the_code_names() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r'^OLDEST_KAFKA="([^"]+)"', ci, re.M)[1] == OLDEST_KAFKA_VERSION  # type: ignore[index]
    assert 'ROCKETKAFKA_KAFKA_VERSION="$OLDEST_KAFKA"' in ci


def test_the_readme_states_the_supported_range() -> None:
    readme = (ROOT / "README.md").read_text()
    assert f"{OLDEST_KAFKA_VERSION} to {KAFKA_VERSION}" in readme


def test_the_broker_pom_defaults_to_the_newest() -> None:
    pom = (ROOT / "facade" / "testing" / "kafka-broker.pom.xml").read_text()
    assert f"<kafka.version>{KAFKA_VERSION}</kafka.version>" in pom
