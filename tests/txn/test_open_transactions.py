"""The test oracle's view of open Kafka transactions: a transaction left open holds back what
``read_committed`` readers (and ``read_all``) see of its partition, and ``open_transactions`` names it."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from rocketkafka.testing.reading import open_transactions, read_all
from tests.txn.conftest import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.rk_needs("hide-aborted")]


def test_a_transaction_left_open_holds_the_partition_until_it_ends(rk_settings, rk_topic):
    topic = rk_topic(partitions=2)
    servers = rk_settings.bootstrap_servers
    zombie = Producer({"bootstrap.servers": servers, "transactional.id": f"zombie-{uuid.uuid4().hex}"})
    zombie.init_transactions(10)
    zombie.begin_transaction()
    zombie.produce(topic, b"open", partition=0)
    assert zombie.flush(10) == 0  # written, neither committed nor aborted: a producer killed here
    later = Producer({"bootstrap.servers": servers, "enable.idempotence": True})
    later.produce(topic, b"committed after it", partition=0)
    later.produce(topic, b"elsewhere", partition=1)
    assert later.flush(10) == 0

    held = open_transactions(servers, topic)
    assert list(held) == [0] and held[0] == (0, 2)  # stable up to the open record; two records written
    assert [r.value() for r in read_all(servers, topic)] == [b"elsewhere"]  # what a reader sees meanwhile

    zombie.abort_transaction(10)
    assert wait_until(lambda: not open_transactions(servers, topic), 10, 0.1)
    assert sorted(r.value() for r in read_all(servers, topic)) == [b"committed after it", b"elsewhere"]
