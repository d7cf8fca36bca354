"""Internal topics' replication settings and the under-replication check, without a broker."""

from __future__ import annotations

import logging

import pytest

from rocketkafka import ConfigError, Settings
from rocketkafka.replication import (
    PartitionReplicas,
    ReplicationWarnings,
    TopicReplication,
    internal_topic_config,
    replication_problem,
)

BROKER = "127.0.0.1:9092"


def topic(name: str, *partitions: tuple[int, tuple[int, ...], tuple[int, ...]]) -> TopicReplication:
    return TopicReplication(name, tuple(PartitionReplicas(i, leader, replicas, isr)
                                        for i, (leader, replicas, isr) in enumerate(partitions)))


# -- settings -------------------------------------------------------------------------------
def test_by_default_the_broker_decides():
    s = Settings(bootstrap_servers=BROKER)
    assert s.internal_replication_factor is None and s.internal_min_insync_replicas is None
    assert internal_topic_config(s.internal_min_insync_replicas) == {}
    assert "ROCKETKAFKA_INTERNAL_REPLICATION_FACTOR" not in s.environment()


def test_from_the_environment_and_back(monkeypatch):
    monkeypatch.setenv("ROCKETKAFKA_INTERNAL_REPLICATION_FACTOR", "3")
    monkeypatch.setenv("ROCKETKAFKA_INTERNAL_MIN_INSYNC_REPLICAS", "2")
    s = Settings.load({"bootstrap.servers": BROKER})
    assert (s.internal_replication_factor, s.internal_min_insync_replicas) == (3, 2)
    assert internal_topic_config(s.internal_min_insync_replicas) == {"min.insync.replicas": "2"}
    env = s.environment()
    assert env["ROCKETKAFKA_INTERNAL_REPLICATION_FACTOR"] == "3"
    assert env["ROCKETKAFKA_INTERNAL_MIN_INSYNC_REPLICAS"] == "2"


def test_minus_one_and_empty_mean_the_brokers_default(monkeypatch):
    assert Settings(bootstrap_servers=BROKER, internal_replication_factor=-1).internal_replication_factor is None
    monkeypatch.setenv("ROCKETKAFKA_INTERNAL_REPLICATION_FACTOR", "")
    assert Settings.load({"bootstrap.servers": BROKER}).internal_replication_factor is None


def test_a_drop_in_clients_config_dict_sets_them():
    s, rest = Settings.from_client_config({"bootstrap.servers": BROKER, "rocketkafka.internal.replication.factor": "3",
                                           "rocketkafka.internal.min.insync.replicas": 2, "acks": "all"})
    assert (s.internal_replication_factor, s.internal_min_insync_replicas) == (3, 2)
    assert rest == {"acks": "all"}


@pytest.mark.parametrize("values, words", [
    ({"internal_replication_factor": 0}, "must be >= 1"),
    ({"internal_min_insync_replicas": -2}, "must be >= 1"),
    ({"internal_replication_factor": 2, "internal_min_insync_replicas": 3}, "every write to an internal topic would fail"),
])
def test_impossible_values_are_refused_at_once(values, words):
    with pytest.raises(ConfigError, match=words):
        Settings.load({"bootstrap.servers": BROKER}, **values)


# -- the check --------------------------------------------------------------------------------
def test_a_healthy_topic_has_no_problem():
    healthy = topic("rk.txn.half", (1, (1, 2, 3), (1, 2, 3)), (2, (2, 3, 1), (3, 2, 1)))
    assert healthy.replication_factor == 3 and healthy.under_replicated == ()
    assert replication_problem(healthy, wanted=3) is None
    assert replication_problem(healthy, wanted=None) is None


def test_fewer_replicas_than_wanted_names_topic_count_and_source():
    single = topic("rk.delay.level.03", (1, (1,), (1,)), (2, (2,), (2,)))
    problem = replication_problem(single, wanted=3, source="ROCKETKAFKA_INTERNAL_REPLICATION_FACTOR")
    assert problem is not None
    assert "rk.delay.level.03" in problem and "1 replica(s), fewer than the 3 wanted" in problem
    assert "ROCKETKAFKA_INTERNAL_REPLICATION_FACTOR" in problem
    assert replication_problem(single, wanted=1) is None
    assert replication_problem(single, wanted=None) is None  # the broker does not say: the count is not judged


def test_an_isr_smaller_than_the_replicas_names_partition_replicas_and_isr():
    lagging = topic("rk.txn.op", (1, (1, 2, 3), (1, 2, 3)), (2, (2, 3, 1), (2, 1)), (-1, (3, 1, 2), ()))
    assert [p.partition for p in lagging.under_replicated] == [1, 2]
    problem = replication_problem(lagging, wanted=3)
    assert problem == ("internal topic rk.txn.op is under-replicated: partition 1 has replicas [2, 3, 1], "
                       "ISR [2, 1] (leader 2); partition 2 has replicas [3, 1, 2], ISR [] (no leader)")


def test_many_lagging_partitions_are_counted_not_all_listed():
    lagging = topic("rk.retry.g", *[(1, (1, 2), (1,))] * 5)
    problem = replication_problem(lagging, wanted=2)
    assert problem is not None and problem.endswith("and 2 more partition(s)") and problem.count("partition ") == 3


def test_both_problems_in_one_line():
    both = topic("rk.dlq.g", (1, (1, 2), (1,)))
    problem = replication_problem(both, wanted=3)
    assert problem is not None and "fewer than the 3 wanted" in problem and "under-replicated" in problem


def test_tansus_repeated_replica_ids_are_not_under_replicated():
    # Tansu answers a replication factor of 3 with one broker listed three times in replicas and ISR
    tansu = topic("rk.trace", (111, (111, 111, 111), (111, 111, 111)))
    assert replication_problem(tansu, wanted=3) is None


def test_each_topic_is_warned_about_once_per_cluster(caplog):
    warnings = ReplicationWarnings()
    bad, good = topic("rk.txn.half", (1, (1,), (1,))), topic("rk.txn.op", (1, (1, 2, 3), (1, 2, 3)))
    with caplog.at_level(logging.WARNING, logger="rocketkafka.replication"):
        first = warnings.check("a:9092", [bad, good], wanted=3)
        again = warnings.check("a:9092", [bad, good], wanted=3)
        other_cluster = warnings.check("b:9092", [bad], wanted=3)
    assert len(first) == 1 and "rk.txn.half" in first[0]
    assert again == []
    assert len(other_cluster) == 1
    assert [r.getMessage() for r in caplog.records] == first + other_cluster
