"""The delay tests' receiver: a separate process that reads real topics from the start and timestamps each record.

It runs in its own process so that the test's producing loop (which holds the GIL for most of a burst) cannot
delay the arrival timestamps: the lateness measured is the system's, not the test harness's.
"""

from __future__ import annotations

import multiprocessing
import queue
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rocketkafka.names import Header

#: How often the child hands its arrivals to the parent (s); timestamps are taken at receipt, not here.
HAND_OVER_S = 0.05


@dataclass(frozen=True, slots=True)
class ReceivedRecord:
    """The parts of a confluent-kafka record the tests read, with the same accessor names (picklable)."""

    topic_: str
    partition_: int
    offset_: int
    key_: bytes | None
    value_: bytes | None
    headers_: list[tuple[str, bytes]]
    timestamp_: tuple[int, int]

    def topic(self) -> str:
        return self.topic_

    def partition(self) -> int:
        return self.partition_

    def offset(self) -> int:
        return self.offset_

    def key(self) -> bytes | None:
        return self.key_

    def value(self) -> bytes | None:
        return self.value_

    def headers(self) -> list[tuple[str, bytes]]:
        return list(self.headers_)

    def timestamp(self) -> tuple[int, int]:
        return self.timestamp_


@dataclass(frozen=True, slots=True)
class Arrival:
    """One record seen on a real topic, with the time (epoch ms) the receiver got it."""

    received_ms: int
    record: ReceivedRecord

    @property
    def msg_id(self) -> str:
        return dict(self.record.headers_)[Header.MSG_ID].decode()


def _receive(bootstrap: str, topics: dict[str, int], out: Any, stop: Any, ready: Any) -> None:
    """Child process: consume with a short fetch wait, stamp each poll's records with one receive time."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "delay-test-receiver",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 5,
                         "isolation.level": "read_committed"})  # librdkafka's default, said: exactly-once tests
    consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, n in topics.items() for p in range(n)])
    ready.set()
    pending: list[Arrival] = []
    handed = time.monotonic()
    while not stop.is_set():
        first = consumer.poll(0.02)  # returns at the first record (consume(n, t) waits all of t)
        if first is not None:
            received = time.time_ns() // 1_000_000
            for record in [first, *consumer.consume(999, 0)]:
                if record.error():
                    if record.error().code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(record.error())
                    continue
                pending.append(Arrival(received, ReceivedRecord(
                    record.topic(), record.partition(), record.offset(), record.key(), record.value(),
                    list(record.headers() or []), record.timestamp())))
        if pending and time.monotonic() - handed >= HAND_OVER_S:
            out.put(pending)
            pending, handed = [], time.monotonic()
    if pending:
        out.put(pending)
    consumer.close()


class Receiver:
    """Reads ``{topic: partitions}`` from the start in a child process; ``arrivals`` grows as records come in."""

    def __init__(self, bootstrap: str, topics: dict[str, int]) -> None:
        self.topics = dict(topics)
        ctx = multiprocessing.get_context("spawn")  # no fork of a process that runs librdkafka threads
        self._queue = ctx.Queue()
        self._stop = ctx.Event()
        ready = ctx.Event()
        self._proc = ctx.Process(target=_receive, args=(bootstrap, topics, self._queue, self._stop, ready),
                                 daemon=True, name="delay-test-receiver")
        self._proc.start()
        if not ready.wait(30):
            raise RuntimeError("the receiver process did not start")
        self._arrivals: list[Arrival] = []

    @property
    def arrivals(self) -> list[Arrival]:
        """Every arrival handed over so far (a snapshot list)."""
        while True:
            try:
                self._arrivals.extend(self._queue.get_nowait())
            except queue.Empty:
                break
        if not self._proc.is_alive() and not self._stop.is_set():
            raise RuntimeError(f"the receiver process died (exit code {self._proc.exitcode})")
        return list(self._arrivals)

    def ids(self) -> Counter:
        return Counter(a.msg_id for a in self.arrivals)

    def wait_for(self, ids: set[str], timeout: float) -> bool:
        from rocketkafka.testing.waiting import wait_for

        return wait_for(lambda: ids <= set(self.ids()), timeout, 0.05)

    def close(self) -> None:
        self._stop.set()
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()
