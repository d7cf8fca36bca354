"""A message ready for Kafka: the unit every producer path hands to librdkafka."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(slots=True)
class Record:
    """A message ready for Kafka: where it goes and what it carries."""

    topic: str
    partition: int  # -1: let the partitioner choose
    key: bytes | None
    value: bytes | None  # None: a tombstone (the drop-in sends what it is given)
    headers: Sequence[tuple[str, bytes | None]]  # a Kafka header may have no value (a copy keeps it so)
    msg_id: str
