"""The asyncio producer's flow with a scripted librdkafka (pure logic): sends past librdkafka's queue await room
instead of blocking the loop, a shutdown fails what was never acknowledged, and a second start is no second thread."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

from confluent_kafka import KafkaError

from rocketkafka import Message
from rocketkafka.aio import AsyncProducer
from rocketkafka.errors import SendError
from rocketkafka.loop_acks import LoopAcks


class Kafka:
    """librdkafka's producer as the door sees it: a bounded queue, and acks only when ``acking``."""

    def __init__(self, queue: int) -> None:
        self.queue, self.acking = queue, True
        self.out: list = []  # (on_delivery, topic, offset) not yet acknowledged
        self.most_out = 0
        self.offset = 0
        self.lock = threading.Lock()

    def produce(self, topic: str, on_delivery) -> None:
        with self.lock:
            if len(self.out) >= self.queue:
                raise BufferError("Local: Queue full")
            self.out.append((on_delivery, topic, self.offset))
            self.offset += 1
            self.most_out = max(self.most_out, len(self.out))

    def poll(self, timeout: float) -> int:
        with self.lock:
            done, self.out = (self.out, []) if self.acking else ([], self.out)
        for on_delivery, topic, offset in done:
            on_delivery(None, SimpleNamespace(offset=lambda o=offset: o, topic=lambda t=topic: t,
                                              partition=lambda: 0))
        if not done:
            threading.Event().wait(min(timeout, 0.01))
        return len(done)

    def flush(self, timeout: float) -> int:
        self.poll(0)
        return len(self.out)

    def purge(self) -> None:
        with self.lock:
            purged, self.out = self.out, []
        for on_delivery, _topic, _offset in purged:
            on_delivery(KafkaError(KafkaError._PURGE_QUEUE), None)


class Sender:
    def __init__(self, kafka: Kafka) -> None:
        self.kafka, self.principal = kafka, None
        self.config = {"queue.buffering.max.messages": kafka.queue}
        self.blocked = 0  # sends that met a full queue on the loop's thread
        self.never_wait: set[int] = set()
        self.counted: set[str] = set()

    def look_up(self, topic: str, timeout: float | None = None) -> int:
        self.counted.add(topic)
        return 1

    def fresh(self, topic: str, margin: float = 0.0) -> bool:
        return topic in self.counted

    def produce_message(self, msg: Message, on_delivery) -> str:
        try:
            self.kafka.produce(msg.topic, on_delivery)
        except BufferError:
            self.blocked += 1
            raise
        return "ID"


class Producer:
    def __init__(self, kafka: Kafka) -> None:
        self.sender, self.group_id, self.send_timeout = Sender(kafka), "pg", 3.0
        self.started = 0

    def start(self) -> None:
        self.started += 1

    def flush(self, timeout: float) -> int:
        return self.sender.kafka.flush(timeout)

    def shutdown(self) -> None:
        pass


def door(queue: int) -> tuple[AsyncProducer, Kafka]:
    kafka = Kafka(queue)
    producer = AsyncProducer("pg")
    producer.producer = Producer(kafka)  # type: ignore[assignment]
    return producer, kafka


def test_sends_past_librdkafkas_queue_await_room_and_keep_their_order():
    producer, kafka = door(queue=50)

    async def main():
        async with producer:
            results = await asyncio.gather(*(producer.send(Message("t", body=b"x")) for _ in range(2000)))
        return [r.offset for r in results]

    offsets = asyncio.run(main())
    assert offsets == list(range(2000))  # in order, every one acknowledged
    assert producer.producer.sender.blocked == 0  # none met the full queue: they waited for room off it
    assert kafka.most_out <= 45  # 90% of the queue


def test_a_shutdown_fails_the_sends_never_acknowledged():
    producer, kafka = door(queue=1000)

    async def main():
        await producer.start()
        await producer.send(Message("t", body=b"x"))  # the topic is looked up: the next sends go out at once
        kafka.acking = False
        sends = [producer.send(Message("t", body=b"x")) for _ in range(5)]
        await producer.shutdown(timeout=0.2)
        return await asyncio.wait_for(asyncio.gather(*sends, return_exceptions=True), 5)

    results = asyncio.run(main())
    assert len(results) == 5 and all(isinstance(r, SendError) for r in results), results


def test_a_second_start_starts_nothing():
    producer, _kafka = door(queue=10)

    async def main():
        await producer.start()
        await producer.start()
        threads = [t for t in threading.enumerate() if t.name.startswith("rk-aio-acks")]
        await producer.shutdown()
        return len(threads)

    assert asyncio.run(main()) == 1
    assert producer.producer.started == 1


def test_a_report_that_comes_after_a_hand_over_still_reaches_its_loop():
    kafka = Kafka(queue=10)
    kafka.acking = False
    settled: list = []

    async def main():
        loop = asyncio.get_running_loop()
        acks = LoopAcks(kafka, settled.extend, 10, "test")
        first, second = acks.track(loop, loop.create_future(), 1), acks.track(loop, loop.create_future(), 2)
        first(None, "written")
        acks.hand_over()  # the first report goes, and is settled: the second comes into a new batch
        await asyncio.sleep(0)
        second(None, "written")
        acks.hand_over()
        await asyncio.sleep(0)
        acks.stop(lambda timeout: 0, 0)

    asyncio.run(main())
    assert [tag for _future, tag, _err, _msg in settled] == [1, 2]
