"""The embedded Apache Kafka's pure parts: node configs for one node and a cluster, and the one-line errors
a newcomer without Java, Maven or the jars gets (no JVM is started here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketkafka.errors import StackError
from rocketkafka.testing import apache_kafka
from rocketkafka.testing.apache_kafka import KafkaNodeSpec, cluster_properties, new_cluster_id
from rocketkafka.testing.devstack import DevStack


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def _nodes(n: int, tmp_path: Path) -> list[KafkaNodeSpec]:
    return [KafkaNodeSpec(i + 1, 9000 + i, 9100 + i, tmp_path / f"kafka-{i}") for i in range(n)]


def test_a_single_node_has_replication_one_so_transactions_can_start(tmp_path) -> None:
    [node] = _nodes(1, tmp_path)
    props = _props(cluster_properties(node, [node]))
    assert props["process.roles"] == "broker,controller" and props["controller.quorum.voters"] == "1@127.0.0.1:9100"
    for key in ("default.replication.factor", "offsets.topic.replication.factor",
                "transaction.state.log.replication.factor", "transaction.state.log.min.isr", "min.insync.replicas"):
        assert props[key] == "1", key
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9000"


def test_three_nodes_replicate_three_times_with_min_isr_two(tmp_path) -> None:
    nodes = _nodes(3, tmp_path)
    props = [_props(cluster_properties(node, nodes)) for node in nodes]
    assert {p["controller.quorum.voters"] for p in props} == {"1@127.0.0.1:9100,2@127.0.0.1:9101,3@127.0.0.1:9102"}
    assert [p["node.id"] for p in props] == ["1", "2", "3"]
    for p in props:
        assert (p["default.replication.factor"], p["min.insync.replicas"]) == ("3", "2")
        assert (p["transaction.state.log.replication.factor"], p["transaction.state.log.min.isr"]) == ("3", "2")


def test_only_a_quick_start_node_compiles_with_c1_alone(monkeypatch, tmp_path) -> None:
    """The test backend's nodes skip C2 (its compile burst slowed a fresh broker's first tests); others keep the default."""
    monkeypatch.setattr(apache_kafka, "java_binary", lambda: Path("/usr/bin/java"))
    [node] = _nodes(1, tmp_path)
    quick = apache_kafka.node_command(node, tmp_path, quick_jit=True)
    default = apache_kafka.node_command(node, tmp_path)
    assert "-XX:TieredStopAtLevel=1" in quick and not any("Tiered" in arg for arg in default)
    assert quick[-2:] == default[-2:] == ["kafka.Kafka", str(node.properties_file)]
    assert DevStack(broker="kafka").quick_start is False


def test_cluster_ids_are_kraft_shaped_fresh_and_never_look_like_an_option() -> None:
    ids = {new_cluster_id() for _ in range(2000)}  # 1 in 64 raw draws starts with '-'
    assert len(ids) == 2000 and all(len(i) == 22 and "=" not in i and not i.startswith("-") for i in ids)


def test_no_maven_and_no_jars_is_one_line_naming_the_way_out(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("ROCKETKAFKA_KAFKA_LIBS", raising=False)
    monkeypatch.setattr(apache_kafka.shutil, "which", lambda name: None)
    with pytest.raises(StackError, match="needs Maven: no `mvn` on PATH .*ROCKETKAFKA_KAFKA_LIBS") as raised:
        apache_kafka.kafka_libs(say=lambda line: None)
    assert "\n" not in str(raised.value)


def test_no_java_is_one_line(monkeypatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(apache_kafka.shutil, "which", lambda name: None)
    with pytest.raises(StackError, match="needs Java 17 or newer"):
        apache_kafka.java_binary()


def test_given_jars_must_hold_kafka(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("ROCKETKAFKA_KAFKA_LIBS", str(tmp_path))
    with pytest.raises(StackError, match="holds no kafka_2.13"):
        apache_kafka.kafka_libs()


def test_the_stack_refuses_a_tansu_cluster_and_unknown_brokers() -> None:
    with pytest.raises(StackError, match="Tansu runs one node"):
        DevStack(broker="tansu", broker_nodes=3)
    with pytest.raises(StackError, match="unknown broker 'redpanda'"):
        DevStack(broker="redpanda")


def test_maven_failures_come_down_to_their_first_error_line() -> None:
    from rocketkafka.user_cache import NOT_SERVED, mvn_error

    output = "[INFO] Scanning for projects...\n\x1b[1;31m[ERROR]\x1b[m Failed to execute goal on project x: boom\n"
    assert mvn_error(output) == "Failed to execute goal on project x: boom"
    assert mvn_error("[ERROR] ... Could not find artifact a:b:jar:9 in central") == NOT_SERVED
    assert mvn_error("[ERROR] ... was not found in https://repo", "no such version") == "no such version"
