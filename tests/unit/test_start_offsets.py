"""Start offsets of partitions a group never committed: one ListOffsets request for all of them (a round trip
each made taking 2,048 partitions last 2 s)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException

from rocketkafka.ordering.consumers.batch_step import BatchStep
from rocketkafka.ordering.engine.options import ConsumeFromWhere


class Kafka:
    """Answers ``offsets_for_times`` with ``found`` (by partition) and counts the requests."""

    def __init__(self, found: dict[int, int], error: KafkaError | None = None) -> None:
        self.found, self.error, self.asked = found, error, []

    def offsets_for_times(self, tps, timeout):
        self.asked.append([(tp.topic, tp.partition, tp.offset) for tp in tps])
        return [SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=self.found[tp.partition],
                                error=self.error) for tp in tps]


def step(start_from: ConsumeFromWhere, start_ms: int | None = None) -> BatchStep:
    return BatchStep(["t"], "%RETRY%g", {}, None, None, start_from, start_ms)  # type: ignore[arg-type]


TPS = [("t", p) for p in range(3)] + [("%RETRY%g", 0)]


def test_the_end_of_every_partition_in_one_request_and_the_retry_topic_from_its_start():
    kafka = Kafka({0: 10, 1: 0, 2: 7})
    assert step(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET).initial_offsets(TPS, kafka) == {
        ("t", 0): 10, ("t", 1): 0, ("t", 2): 7, ("%RETRY%g", 0): OFFSET_BEGINNING}
    assert kafka.asked == [[("t", p, OFFSET_END) for p in range(3)]]  # ListOffsets "latest", once


def test_a_time_with_no_record_after_it_starts_at_the_beginning_and_the_first_offset_asks_nothing():
    kafka = Kafka({0: 4, 1: -1, 2: 9})
    assert step(ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, 1_700).initial_offsets(TPS[:3], kafka) == {
        ("t", 0): 4, ("t", 1): OFFSET_BEGINNING, ("t", 2): 9}
    assert kafka.asked == [[("t", p, 1_700) for p in range(3)]]
    first = Kafka({})
    assert set(step(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET).initial_offsets(TPS, first).values()) == {
        OFFSET_BEGINNING} and first.asked == []
    assert step(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET).initial_offset(("t", 2), Kafka({2: 5})) == 5


def test_a_partition_the_broker_cannot_answer_for_raises_so_nothing_is_taken():
    kafka = Kafka({0: 1, 1: 1, 2: 1}, error=KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
    with pytest.raises(KafkaException):
        step(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET).initial_offsets(TPS[:3], kafka)
