"""Producer and consumer benchmarks: our wrappers beside raw confluent-kafka, same broker, same run.

Each figure is messages per second over a fixed count of 100-byte messages.
Produce: raw ``confluent_kafka.Producer.produce`` loop vs the drop-in
``facade.kafka.Producer.produce`` (topic check; with a tag also id, born time and
tag headers) vs RocketMQ-style ``send_async`` (a Message object and a delivery
callback per message). Consume: a raw ``consume()`` loop vs
a concurrent ``PushConsumer`` with a no-op listener (membership, lock table,
tag filter, commits), both reading the same topic from the start.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka import Producer as RawProducer

from facade.admin import TopicAdmin
from facade.bench_rows import BenchRow, Target
from facade.config import Settings
from facade.kafka import Producer as DropInProducer
from facade.message import Message
from facade.producer import Producer

#: Issue 2's targets: the producer >= 0.85x raw throughput, a concurrent no-op push consumer >= 0.7x raw.
PRODUCE_TARGET = Target(">=", 0.85, "ratio")
CONSUME_TARGET = Target(">=", 0.7, "ratio")


def _topic(settings: Settings, partitions: int) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    TopicAdmin(settings).create(name, partitions=partitions)
    return name


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_produce(settings: Settings, count: int = 200_000, size: int = 100, rounds: int = 4) -> list[BenchRow]:
    """Produce ``count`` messages with each client; the best of ``rounds`` counts."""
    body = b"x" * size
    conf = settings.kafka_config(**{"linger.ms": 5, "enable.idempotence": True, "queue.buffering.max.messages": 2_000_000})
    topic = _topic(settings, 8)

    def loop(make, **extras) -> None:  # the same loop for both doors: produce, serve callbacks, flush
        p = make(conf)
        for _ in range(count):
            p.produce(topic, body, **extras)
            p.poll(0)
        p.flush()

    def raw() -> None:
        loop(RawProducer)

    def drop_in() -> None:
        loop(DropInProducer)

    def drop_in_tagged() -> None:
        loop(DropInProducer, tags="TagA")

    def rocketmq() -> None:
        with Producer("bench", settings=settings) as p:
            ignore = _ignore
            for _ in range(count):
                p.send_async(Message(topic, body), ignore)
            p.flush()

    runs = (("raw", raw), ("drop-in", drop_in), ("drop-in+tag", drop_in_tagged), ("rocketmq", rocketmq))
    best = {name: 0.0 for name, _ in runs}
    for r in range(rounds):  # rotate the order: the broker's speed drifts between runs (Tansu: ~180k or ~320k/s)
        for name, fn in runs[r % len(runs):] + runs[:r % len(runs)]:
            best[name] = max(best[name], count / _timed(fn))
    raw, detail = best["raw"], f"{count:,} x {size} B, best of {rounds}"
    return [
        BenchRow("produce", "raw confluent-kafka produce", raw, "msg/s", detail=detail),
        BenchRow("produce", "drop-in Producer.produce", best["drop-in"], "msg/s", raw, target=PRODUCE_TARGET),
        BenchRow("produce", "drop-in produce(tags=...) (id+tag headers)", best["drop-in+tag"], "msg/s", raw),
        BenchRow("produce", "RocketMQ Producer.send_async", best["rocketmq"], "msg/s", raw, target=PRODUCE_TARGET),
    ]


def _ignore(_result: object) -> None:
    pass


def bench_consume(settings: Settings, count: int = 500_000, size: int = 100, partitions: int = 8) -> list[BenchRow]:
    """Fill a topic, then read all of it with a raw loop and with a no-op PushConsumer."""
    from ordering.push_consumer import PushConsumer

    topic = _topic(settings, partitions)
    p = RawProducer(settings.kafka_config(**{"linger.ms": 5}))
    body = b"x" * size
    for _ in range(count):
        try:
            p.produce(topic, body)
        except BufferError:
            p.poll(0.01)
            p.produce(topic, body)
    p.flush()

    def raw() -> float:
        c = Consumer(settings.kafka_config(**{"group.id": f"raw-{uuid.uuid4().hex}", "enable.auto.commit": False}))
        c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(partitions)])
        seen, start = 0, time.perf_counter()
        while seen < count:
            seen += sum(1 for m in c.consume(1000, 1.0) if m.error() is None)
        rate = count / (time.perf_counter() - start)
        c.close()
        return rate

    seen = [0]

    def listener(_msg: object) -> None:  # a no-op listener: only counts
        seen[0] += 1

    def ours() -> float:
        c = PushConsumer(f"bench-{uuid.uuid4().hex[:6]}", settings=settings)
        c.subscribe(topic, listener)
        start = time.perf_counter()
        c.start()
        while seen[0] < count:
            time.sleep(0.001)
        rate = count / (time.perf_counter() - start)
        c.shutdown()
        return rate

    # both timed from the client's creation, so each pays its own start-up (ours: join, lock, assign)
    raw_rate, ours_rate = raw(), ours()
    return [
        BenchRow("consume", "raw confluent-kafka consume()", raw_rate, "msg/s", detail=f"{count:,} x {size} B"),
        BenchRow("consume", "PushConsumer (concurrent, no-op listener)", ours_rate, "msg/s", raw_rate,
                 target=CONSUME_TARGET),
    ]
