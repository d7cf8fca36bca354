"""Where a send's CPU time goes: each step of a RocketMQ-style send, timed alone, beside its raw floor.

No broker is needed (nor wanted: its threads would share the two cores with the timing):
every producer points at a closed port, so ``produce`` only queues in librdkafka, which is
the part a send pays on the caller's thread. Each step runs ``count`` times in a tight loop
and the queues are purged after every loop (a queue grown by earlier steps would slow the
later ones); the figure is the best of ``repeat`` loops in microseconds per call (the least
disturbed run of the same work, as :mod:`timeit` advises).

``rocketkafka bench send-costs`` prints the table; ``rocketkafka bench produce`` measures the
same paths end to end against a broker.
"""

from __future__ import annotations

import contextlib
import time
import timeit
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

#: Every producer queues here and never connects (port 1: nothing listens).
NOWHERE = "127.0.0.1:1"
TOPIC = "send-costs"
BODY = b"x" * 100


@dataclass(frozen=True)
class StepCost:
    """One step: its name, what it stands for, and its best time per call (µs)."""

    step: str
    meaning: str
    micros: float


def _config() -> dict[str, Any]:
    # room for every queued record of every loop: a BufferError would time the error path instead
    return {"bootstrap.servers": NOWHERE, "linger.ms": 5, "enable.idempotence": True,
            "queue.buffering.max.messages": 10_000_000, "queue.buffering.max.kbytes": 8_000_000,
            "log_level": 0}


@contextlib.contextmanager
def steps() -> Iterator[tuple[list[tuple[str, str, Callable[[], object]]], Callable[[], None]]]:
    """``([(step, meaning, call)], purge)``: every step, and what empties the producers' queues;
    the producers are purged and closed on exit."""
    from confluent_kafka import Producer as RawProducer

    from rocketkafka.message import Message, SendResult, SendStatus
    from rocketkafka.msgid import new_msg_id_and_born, new_msg_id_bytes
    from rocketkafka.names import Header
    from rocketkafka.producer import Producer

    raw = RawProducer(_config())
    ours = Producer("send-costs", _config())
    ours.start()
    ours.sender.assume_partitions(TOPIC, 8, seconds=3600)  # as after a first send's look-up (no broker here)
    message = Message(TOPIC, BODY, tags="TagA", keys="k-1")
    uniq, born, tags, keys = Header.MSG_ID, Header.BORN_TIMESTAMP, Header.TAGS, Header.KEYS
    time_ns = time.time_ns

    def floor_headers() -> list[tuple[str, bytes]]:
        return [(uniq, new_msg_id_bytes()), (born, b"%d" % (time_ns() // 1_000_000)), (tags, b"TagA"), (keys, b"k-1")]

    headers = floor_headers()

    def ignore(*_: Any) -> None:
        pass

    def purge() -> None:
        for kafka in (raw, ours.sender.kafka):
            kafka.purge()  # nothing may wait for a broker that is not there
            kafka.poll(0)  # the purged records' delivery reports

    yield [
        ("raw produce", "confluent-kafka produce(topic, body)", lambda: raw.produce(TOPIC, BODY)),
        ("raw produce + 4 headers", "the same with our four headers, pre-built",
         lambda: raw.produce(TOPIC, BODY, b"k-1", headers=headers)),
        ("floor headers", "raw + same work's per-message header list (fresh id and born time)", floor_headers),
        ("raw + same work", "both above and a delivery callback: send_async's floor",
         lambda: raw.produce(TOPIC, BODY, b"k-1", headers=floor_headers(), on_delivery=ignore)),
        ("Message(...)", "the caller's Message(topic, body, tags=, keys=)",
         lambda: Message(TOPIC, BODY, tags="TagA", keys="k-1")),
        ("id and born time", "new_msg_id_and_born()", new_msg_id_and_born),
        ("produce_message", "checks, headers, produce: the send engine's fast path",
         lambda: ours.sender.produce_message(message)),
        ("send_oneway", "Producer.send_oneway(message), poll(0) included", lambda: ours.send_oneway(message)),
        ("send_async", "Producer.send_async(message, callback), poll(0) included",
         lambda: ours.send_async(message, ignore)),
        ("SendResult(...)", "what send_async's callback receives, built per ack",
         lambda: SendResult(SendStatus.OK, "0193A1B2C3D41F2AABCDEF0000000001", 42, TOPIC, 3)),
        ("poll(0)", "serving delivery reports (none here)", lambda: raw.poll(0)),
    ], purge
    purge()
    ours.shutdown()


def measure(count: int = 100_000, repeat: int = 3) -> list[StepCost]:
    """Best-of-``repeat`` µs per call of every step, ``count`` calls a loop."""
    if count < 1 or repeat < 1:
        raise ValueError(f"count and repeat must be >= 1, got count={count!r}, repeat={repeat!r}")
    costs = []
    with steps() as (timed, purge):
        for step, meaning, call in timed:
            best = float("inf")
            for _ in range(repeat):
                best = min(best, timeit.timeit(call, number=count))
                purge()
            costs.append(StepCost(step, meaning, best / count * 1e6))
    return costs


def table(costs: list[StepCost]) -> str:
    """The costs as a Markdown table."""
    lines = ["| step | µs per call | what it is |", "|---|---|---|"]
    lines += [f"| {c.step} | {c.micros:.2f} | {c.meaning} |" for c in costs]
    return "\n".join(lines)
