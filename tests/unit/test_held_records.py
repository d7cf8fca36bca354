"""A held record is delivered only while its partition's lock is valid: a woken zombie's overdue holds are not."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from rocketkafka.config import Settings
from rocketkafka.delay.forward_handler import ForwardHandler
from rocketkafka.delay.metrics import ForwarderMetrics
from rocketkafka.errors import LockError
from rocketkafka.schedule.levels import DelayConfig
from rocketkafka.schedule.tiers import Tiers


class Kafka:
    def __init__(self) -> None:
        self.produced: list[str] = []

    def produce(self, topic, value, key, partition, headers, on_delivery):
        self.produced.append(topic)
        on_delivery(None, None)


def handler(kafka: Kafka) -> ForwardHandler:
    tiers = Tiers(Settings().topics, DelayConfig(levels="1s", partitions=1))
    return ForwardHandler(tiers, kafka, {}, lambda topic: 1, lambda record, reason: None, ForwarderMetrics(), 1000)


def work(valid_for_s: float, revoked: bool = False) -> SimpleNamespace:
    until = time.monotonic() + valid_for_s
    return SimpleNamespace(topic="rk.delay.level.01", partition=0, revoked=revoked, valid_until=lambda: until)


def test_a_held_record_is_delivered_while_the_lock_holds():
    kafka = Kafka()
    ack = handler(kafka)._deliver("orders", 0, None, b"v", [], 0, work(10.0))
    assert kafka.produced == ["orders"] and ack.done() and ack.exception() is None


@pytest.mark.parametrize("lock", [work(-1.0), work(10.0, revoked=True)], ids=["expired", "revoked"])
def test_a_held_record_whose_lock_passed_is_left_to_the_next_owner(lock):
    kafka = Kafka()
    with pytest.raises(LockError, match="passed while a record was held"):
        handler(kafka)._deliver("orders", 0, None, b"v", [], 0, lock)
    assert kafka.produced == []
