"""A message ready for Kafka: the unit every producer path hands to librdkafka."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Record:
    """A message ready for Kafka: where it goes and what it carries."""

    topic: str
    partition: int  # -1: let the partitioner choose
    key: bytes | None
    value: bytes | None  # None: a tombstone (the drop-in sends what it is given)
    headers: Sequence[tuple[str, bytes | None]]  # a Kafka header may have no value (a copy keeps it so)
    msg_id: str


def produce_waiting(producer: Any, record: Record, on_delivery: Callable[[Any, Any], None] | None = None) -> None:
    """``producer.produce(record)`` (a confluent-kafka producer), serving delivery reports while its queue is full.

    Inside a Kafka transaction, the record commits with it (:mod:`rocketkafka.exactly_once`).
    """
    kwargs: dict[str, Any] = {"partition": record.partition, "headers": list(record.headers)}
    if on_delivery is not None:
        kwargs["on_delivery"] = on_delivery
    while True:
        try:
            producer.produce(record.topic, record.value, record.key, **kwargs)
            return
        except BufferError:
            producer.poll(0.01)
