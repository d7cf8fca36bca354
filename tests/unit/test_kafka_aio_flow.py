"""The drop-in's AIOProducer against a broker that never answers (no broker at all: librdkafka queues, then times
out): a full queue or a slow produce never holds the event loop, and a cancelled produce counts once."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import KafkaException

import rocketkafka.kafka.aio as kafka_aio

NOWHERE = {"bootstrap.servers": "127.0.0.1:1", "message.timeout.ms": 1000}


async def _ticking(until: float) -> int:
    ticks = 0
    while time.monotonic() < until:
        ticks += 1
        await asyncio.sleep(0.01)
    return ticks


def test_a_full_queue_makes_the_produce_wait_not_the_loop():
    async def main():
        producer = kafka_aio.AIOProducer({**NOWHERE, "queue.buffering.max.kbytes": 1, "message.timeout.ms": 2000})
        kafka = producer._producer
        kafka._known_topics = kafka._known_topics | {"t"}
        kafka.sender.assume_partitions("t", 1, 3600)  # the topic's count cached: tags= may go on the loop
        first = await producer.produce("t", b"x" * 700, tags="a")
        start = time.monotonic()
        ticker = asyncio.ensure_future(_ticking(start + 1.0))
        second = await producer.produce("t", b"y" * 700, tags="a")  # no room until the first times out (2 s)
        ticks = await ticker
        for future in (first, second):
            with pytest.raises(KafkaException):
                await future
        await producer.close()
        return ticks

    assert asyncio.run(main()) > 20  # the loop went on while the second produce waited for room


def test_a_cancelled_produce_on_the_executor_counts_once(monkeypatch):
    produce = kafka_aio._produce_waiting

    def slow(*args):
        time.sleep(0.3)
        return produce(*args)

    monkeypatch.setattr(kafka_aio, "_produce_waiting", slow)

    async def main():
        producer = kafka_aio.AIOProducer(NOWHERE)
        first = asyncio.ensure_future(producer.produce("unknown", b"x"))  # a topic never seen: on the executor
        await asyncio.sleep(0.1)
        first.cancel()
        for _ in range(100):  # the record is produced all the same (after a look-up that finds no broker), and
            if producer._acks.in_flight == 0:  # times out: its report is counted once (10 s at most)
                break
            await asyncio.sleep(0.1)
        assert producer._acks.in_flight == 0
        later = await producer.produce("unknown", b"y")
        with pytest.raises(KafkaException):  # its report comes
            await asyncio.wait_for(later, 10)
        await asyncio.sleep(0.5)
        assert producer._acks.in_flight == 0  # each record counted out once: below 0, polls would stop for good
        await producer.close()

    asyncio.run(main())


def test_a_failed_delivery_gives_on_delivery_the_message_as_confluent_kafka_does():
    async def main():
        producer = kafka_aio.AIOProducer({**NOWHERE, "message.timeout.ms": 300})
        kafka = producer._producer
        kafka._known_topics = kafka._known_topics | {"t"}
        seen = []
        future = await producer.produce("t", b"x", on_delivery=lambda err, msg: seen.append((err, msg)))
        with pytest.raises(KafkaException):
            await asyncio.wait_for(future, 10)
        await producer.close()
        return seen

    ((err, msg),) = asyncio.run(main())
    assert err is not None and msg.topic() == "t" and msg.value() == b"x"


def test_a_produce_still_on_the_executor_when_close_runs_is_resolved(monkeypatch):
    produce = kafka_aio._produce_waiting

    def slow(*args):
        time.sleep(0.5)  # stands for the broker look-up of a topic not seen yet
        return produce(*args)

    monkeypatch.setattr(kafka_aio, "_produce_waiting", slow)

    async def main():
        producer = kafka_aio.AIOProducer(NOWHERE)
        produced = asyncio.ensure_future(producer.produce("unknown", b"x"))
        await asyncio.sleep(0.05)
        await producer.close()  # waits for the produce on the executor, then flushes (the record times out)
        future = await produced
        with pytest.raises(KafkaException):
            await asyncio.wait_for(future, 5)

    asyncio.run(main())


@pytest.mark.skipif(kafka_aio._REENTRY is None, reason="confluent-kafka before 2.16 cannot tell a callback's call from "
                                                       "another task's: AIOConsumer does not serialise there")
def test_the_consumers_calls_from_several_tasks_run_one_at_a_time():
    async def main():
        consumer = kafka_aio.AIOConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
        running, most = [0], [0]

        def slow_consume(*args, **kwargs):  # stands for poll()/consume() with the engine's work inside
            running[0] += 1
            most[0] = max(most[0], running[0])
            time.sleep(0.1)
            running[0] -= 1
            return []

        consumer._consumer.consume = slow_consume
        await asyncio.gather(*(consumer.consume(1, 0) for _ in range(4)))
        await consumer.close()
        return most[0]

    assert asyncio.run(main()) == 1  # the engine inside has one writer at a time
