"""Read a topic to its end with a plain confluent-kafka consumer (test oracle, no rocketkafka code)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from confluent_kafka import (OFFSET_BEGINNING, Consumer, IsolationLevel, KafkaError, KafkaException, Message,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, OffsetSpec


def read_all(bootstrap_servers: str, topic: str, timeout: float = 10.0,
             config: Mapping[str, Any] | None = None) -> list[Any]:
    """Every record of ``topic`` from the beginning up to the high watermark seen with the fetches.

    The end comes from partition EOF events, which carry the fetched high watermark
    (ListOffsets "latest" is unreliable on some brokers). ``config``: more client settings (a secured
    cluster's: ``Settings.client_properties()``).
    """
    extra = dict(config or {})
    meta = AdminClient({**extra, "bootstrap.servers": bootstrap_servers}).list_topics(timeout=10).topics[topic]
    partitions = list(meta.partitions)
    consumer = Consumer({**extra, "bootstrap.servers": bootstrap_servers, "group.id": f"oracle-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    records: list[Message] = []
    at_eof: set[int | None] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_eof) < len(partitions) and time.monotonic() < deadline:
            for record in consumer.consume(1000, 0.2):
                err = record.error()
                if err:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_eof.add(record.partition())
                    continue
                at_eof.discard(record.partition())
                records.append(record)
    finally:
        consumer.close()
    if len(at_eof) < len(partitions):
        raise TimeoutError(f"reading {topic} did not reach the end of every partition in {timeout} s")
    return records


def open_transactions(bootstrap_servers: str, topic: str) -> dict[int, tuple[int, int]]:
    """Partitions of ``topic`` that a Kafka transaction still holds: ``{partition: (last stable offset,
    high watermark)}`` where the first is below the second.

    A ``read_committed`` reader (and :func:`read_all`, librdkafka's default isolation) ends at the last
    stable offset, so it does not see records committed after a transaction that is still open: one of a
    producer that died with it open holds them until its id is fenced or the broker aborts it
    (``transaction.timeout.ms``). Wait for ``{}`` before reading what such a producer's partitions hold.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    partitions = [TopicPartition(topic, p) for p in admin.list_topics(topic, timeout=10).topics[topic].partitions]
    ends = {}
    for isolation in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
        futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in partitions}, isolation_level=isolation,
                                     request_timeout=10)
        ends[isolation] = {tp.partition: future.result().offset for tp, future in futures.items()}
    stable, high = ends[IsolationLevel.READ_COMMITTED], ends[IsolationLevel.READ_UNCOMMITTED]
    return {p: (stable[p], high[p]) for p in sorted(high) if stable[p] < high[p]}


def committed_offsets(bootstrap_servers: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offset per partition (-1001 when none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    deadline = time.monotonic() + 10
    try:
        while True:
            try:
                found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
                return {tp.partition: tp.offset for tp in found}
            except KafkaException as exc:
                # Apache Kafka's group coordinator answers NOT_COORDINATOR while it moves or loads (right after a
                # start): ask again, as the library's own reader does (rocketkafka.operations.reading; this
                # oracle stays plain confluent-kafka)
                code = exc.args[0].code() if exc.args and isinstance(exc.args[0], KafkaError) else None
                if code not in _COORDINATOR_MOVING or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()


_COORDINATOR_MOVING = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                       KafkaError.COORDINATOR_NOT_AVAILABLE}


def committed_to_end(bootstrap_servers: str, group: str, topic: str) -> bool:
    """True when ``group`` has committed every non-empty partition of ``topic`` up to its end.

    Empty partitions have nothing to commit (their committed offset stays unset), so they
    are not asked about.
    """
    ends: dict[int, int] = {}
    for record in read_all(bootstrap_servers, topic):
        ends[record.partition()] = max(ends.get(record.partition(), 0), record.offset() + 1)
    if not ends:
        return True
    committed = committed_offsets(bootstrap_servers, group, topic, max(ends) + 1)
    return all(committed[p] == end for p, end in ends.items())
