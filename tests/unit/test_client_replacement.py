"""The engine replaces a Kafka client that lost every broker, and goes on where the old one stopped fetching.

librdkafka 2.10+ forgets the brokers a Metadata answer leaves out; an answer listing none (a
single-node KRaft broker fenced for a moment after a 10 s SIGSTOP, in the chaos run on Apache
Kafka) left a key-ordered consumer with no broker for good: no fetch, no commit, locks still
renewed, 2,807 messages never handled. Its statistics then show the forgotten broker in ``INIT``
and the coordinator without an address. Fakes stand in for the client: nothing here needs a broker.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from rocketkafka.config import Settings
from rocketkafka.ordering.engine import clients as clients_module
from rocketkafka.ordering.engine.clients import BROKERLESS_REPORTS, OwnClients, reaches_a_broker
from rocketkafka.ordering.engine.engine import OwnershipEngine
from rocketkafka.ordering.engine.options import OwnershipOptions
from rocketkafka.ordering.work.step import ClaimContext

TOPIC = "orders"
NOWHERE = Settings(bootstrap_servers="127.0.0.1:9", redis_urls=[])


def _stats(*brokers: tuple[str, str]) -> str:
    """librdkafka's statistics JSON, reduced to its brokers' source and state."""
    named = {f"broker-{i}": {"name": f"broker-{i}", "source": source, "state": state}
             for i, (source, state) in enumerate(brokers)}
    return json.dumps({"name": "rdkafka#consumer-1", "brokers": named})


HEALTHY = _stats(("learned", "UP"), ("logical", "UP"))
# what the wedged consumer of the chaos run reported: its broker forgotten (thread ended, INIT), no coordinator
BROKERLESS = _stats(("learned", "INIT"), ("logical", "TRY_CONNECT"))


@pytest.mark.parametrize(("brokers", "reaches"), [
    ([("learned", "UP"), ("logical", "UP")], True),
    ([("learned", "TRY_CONNECT"), ("logical", "TRY_CONNECT")], True),  # the broker is down: the client keeps trying
    ([("configured", "CONNECT")], True),  # starting
    ([("learned", "INIT"), ("learned", "INIT"), ("logical", "UP")], True),  # sparse connections, coordinator up
    ([("learned", "INIT"), ("logical", "TRY_CONNECT")], False),
    ([("internal", "UP"), ("logical", "INIT")], False),  # every broker forgotten and gone
])
def test_statistics_tell_whether_the_client_still_reaches_for_a_broker(brokers, reaches):
    assert reaches_a_broker(_stats(*brokers)) is reaches
    assert reaches_a_broker("not json") is True


class FakeRecord:
    def __init__(self, partition: int, offset: int) -> None:
        self._partition, self._offset = partition, offset

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return TOPIC

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset


class FakeConsumer:
    """The parts of confluent-kafka's Consumer the engine uses; every one made is kept in ``made``."""

    made: list[FakeConsumer] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.assigned: list[tuple[str, int, int]] = []
        self.paused: list[tuple[str, int]] = []
        self.commits: list[tuple[str, int, int]] = []
        self.queued: list[FakeRecord] = []
        self.events: list[tuple[str, list[tuple[str, int]]]] = []  # resume / unassign, in order
        self.closed = threading.Event()
        FakeConsumer.made.append(self)

    def committed(self, partitions: list[Any], timeout: float | None = None) -> list[Any]:
        from confluent_kafka import TopicPartition

        return [TopicPartition(tp.topic, tp.partition, 5) for tp in partitions]  # the group committed 5 everywhere

    def incremental_assign(self, partitions: list[Any]) -> None:
        self.assigned += [(tp.topic, tp.partition, tp.offset) for tp in partitions]

    def pause(self, partitions: list[Any]) -> None:
        self.paused += [(tp.topic, tp.partition) for tp in partitions]

    def resume(self, partitions: list[Any]) -> None:
        self.events.append(("resume", [(tp.topic, tp.partition) for tp in partitions]))

    def incremental_unassign(self, partitions: list[Any]) -> None:
        self.events.append(("unassign", [(tp.topic, tp.partition) for tp in partitions]))

    def consume(self, n: int, timeout: float) -> list[FakeRecord]:
        out, self.queued = self.queued[:n], self.queued[n:]
        return out

    def poll(self, timeout: float) -> None:
        return None

    def commit(self, offsets: list[Any], asynchronous: bool) -> None:
        self.commits += [(tp.topic, tp.partition, tp.offset) for tp in offsets]

    def close(self) -> None:
        self.closed.set()


class FakeClaim:
    def __init__(self, context: ClaimContext) -> None:
        self.next = dict(context.offsets)

    def take(self, tp, records) -> None:
        self.next[tp] = records[-1].offset() + 1

    def positions(self):
        return dict(self.next)

    def progress(self) -> None:
        return None

    def backlog(self):
        return {tp: 0 for tp in self.next}

    def finished(self) -> int:
        return 0

    def leave(self) -> None:
        pass

    def revoke(self) -> None:
        pass

    def drained(self) -> bool:
        return True


class FakeStep:
    def provision(self, admin) -> None:
        pass

    def topics(self):
        return [TOPIC]

    def partitions_of(self, lock):
        return (lock,)

    def initial_offset(self, tp, kafka) -> int:
        return 0

    def fence(self, locks) -> None:
        pass

    def claim(self, context: ClaimContext) -> FakeClaim:
        return FakeClaim(context)

    def tick(self) -> None:
        pass

    def close(self) -> None:
        pass


class FakeAdmin:
    def partitions(self, topic: str) -> int:
        return 2


@pytest.fixture
def engine(monkeypatch):
    """An engine owning both partitions of ``orders`` (committed at 5) on a fake client, without Redis."""
    FakeConsumer.made = []
    monkeypatch.setattr(clients_module, "Consumer", FakeConsumer)
    made = OwnershipEngine("g", NOWHERE, OwnershipOptions(instance_name="m"), FakeStep(), broadcasting=True)
    made._clients = made._own_clients()
    made._kafka = made._clients.new()
    made.admin = FakeAdmin()
    made._rebalance()
    assert made.owned() == [(TOPIC, 0), (TOPIC, 1)]
    return made


def _report(engine: OwnershipEngine, stats: str) -> None:
    engine.kafka.config["stats_cb"](stats)  # librdkafka serves it inside poll()/consume()


def test_a_client_that_names_no_broker_is_replaced_where_fetching_stopped(engine):
    old = engine.kafka
    old.queued = [FakeRecord(0, 5), FakeRecord(0, 6), FakeRecord(0, 7)]
    assert engine.fetch(0) == 3
    engine.maintain()
    assert (TOPIC, 0, 8) in old.commits
    engine._owned[(TOPIC, 1)].paused.add((TOPIC, 1))  # flow control holds partition 1 back
    for _ in range(BROKERLESS_REPORTS):
        _report(engine, BROKERLESS)
    engine._next_look = 0.0
    engine.maintain()

    new = engine.kafka
    assert new is not old and engine.clients_replaced == 1
    assert sorted(new.assigned) == [(TOPIC, 0, 8), (TOPIC, 1, 5)]  # after the last record routed; else the start
    assert new.paused == [(TOPIC, 1)]
    assert old.closed.wait(5)  # let go, on a thread of its own
    assert (TOPIC, 0, 8) in new.commits  # commits the old client held are sent again through the new one
    assert new.config["statistics.interval.ms"] == clients_module.CLIENT_CHECK_MS


def test_one_brokerless_report_between_healthy_ones_replaces_nothing(engine):
    old = engine.kafka
    for _ in range(3):
        for stats in [BROKERLESS] * (BROKERLESS_REPORTS - 1) + [HEALTHY]:
            _report(engine, stats)
        engine._next_look = 0.0
        engine.maintain()
    assert engine.kafka is old and engine.clients_replaced == 0


def test_a_callers_own_statistics_callback_still_gets_every_report(monkeypatch):
    FakeConsumer.made = []
    monkeypatch.setattr(clients_module, "Consumer", FakeConsumer)
    seen: list[str] = []
    clients = OwnClients("m", {"bootstrap.servers": "127.0.0.1:9", "stats_cb": seen.append,
                               "statistics.interval.ms": 1000})
    client = clients.new()
    assert client.config["statistics.interval.ms"] == 1000
    client.config["stats_cb"](BROKERLESS)
    assert seen == [BROKERLESS] and clients.brokerless == 1


def test_a_replaced_clients_late_reports_are_not_counted(monkeypatch):
    """A replaced client closes on its own thread and may still report: its no-broker statistics must not
    count against the new client."""
    FakeConsumer.made = []
    monkeypatch.setattr(clients_module, "Consumer", FakeConsumer)
    clients = OwnClients("m", {"bootstrap.servers": "127.0.0.1:9"})
    old, new = clients.new(), clients.new()
    old.config["stats_cb"](BROKERLESS)
    assert clients.brokerless == 0 and clients.replaced == 1
    new.config["stats_cb"](BROKERLESS)
    assert clients.brokerless == 1


@pytest.mark.parametrize("lost", [True, False], ids=["lost", "released"])
def test_a_partition_paused_by_flow_control_is_resumed_as_it_is_let_go(engine, lost):
    """librdkafka keeps a partition's pause through unassign and assign: a partition let go while flow control
    held it back would never be fetched again by whoever owns it next in this client (the transaction checker
    stalled so after a lost lock). The engine resumes it first; partitions not paused are not touched."""
    engine._owned[(TOPIC, 1)].paused.add((TOPIC, 1))
    for lock in [(TOPIC, 0), (TOPIC, 1)]:
        if lost:
            engine._on_lost({lock})
        else:
            engine._release([lock])
    assert engine.kafka.events == [("unassign", [(TOPIC, 0)]), ("resume", [(TOPIC, 1)]), ("unassign", [(TOPIC, 1)])]
    assert all(not owned.paused for owned in engine._leaving.values())
