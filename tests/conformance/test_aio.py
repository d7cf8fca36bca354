"""confluent_kafka.aio and rocketkafka.kafka.aio, side by side: the same awaitables give the same records, reports,
assignments and commits; ours also takes RocketMQ's extras (and headers) on produce."""

from __future__ import annotations

import asyncio
import importlib
import time

import pytest
from confluent_kafka import KafkaException, TopicPartition

from rocketkafka.headers import header_map
from rocketkafka.names import Header
from rocketkafka.testing.reading import committed_offsets, read_all

pytestmark = [pytest.mark.integration]


@pytest.fixture
def aio(kafka_module):
    return importlib.import_module(f"{kafka_module.__name__}.aio")


def test_awaited_produces_write_the_same_records_and_give_the_same_reports(aio, conf, rk_topic, records_of):
    topic = rk_topic(partitions=3)

    async def main():
        producer = aio.AIOProducer(conf(**{"linger.ms": 5, "partitioner": "murmur2_random"}))
        # no timestamp= nor headers=: confluent-kafka's batch mode refuses them (ours takes both)
        futures = [await producer.produce(topic, b"v%d" % i, b"k%d" % i, partition=i % 3) for i in range(30)]
        futures.append(await producer.produce(topic, value=b"keyed", key=b"order-7"))
        delivered = await asyncio.gather(*futures)
        assert await producer.flush() == 0 and len(producer) == 0
        await producer.close()
        return delivered

    delivered = asyncio.run(main())
    assert [(m.error(), m.topic(), m.partition(), m.value()) for m in delivered[:3]] == \
        [(None, topic, 0, b"v0"), (None, topic, 1, b"v1"), (None, topic, 2, b"v2")]
    assert delivered[-1].partition() == 1  # murmur2("order-7") % 3, as the partitioner places it
    records = records_of(topic)
    assert len(records) == 31 and {(p, o) for p, o, *_ in records} == {(m.partition(), m.offset()) for m in delivered}
    assert all(r[4] is None for r in records)  # no headers added to a plain record


def test_a_purged_record_fails_its_future_with_the_purge_error(aio, conf, rk_topic):
    topic = rk_topic(partitions=1)

    async def main():
        producer = aio.AIOProducer(conf(**{"linger.ms": 60_000}))
        await (await producer.produce(topic, b"first"))  # the topic is known: the next produce queues at once
        future = await producer.produce(topic, b"x")
        if hasattr(producer, "_flush_buffer"):
            await producer._flush_buffer()  # confluent-kafka's batch buffer, into librdkafka
        await producer.purge(in_queue=True, in_flight=True)
        await producer.poll(1.0)
        with pytest.raises(KafkaException) as info:
            await asyncio.wait_for(future, 10)
        await producer.close()
        return info.value.args[0].code()

    assert asyncio.run(main()) in (-152, -151)  # _PURGE_QUEUE, _PURGE_INFLIGHT


def test_a_subscribed_consumer_reads_everything_and_commits(aio, conf, group, filled, rk_settings):
    topic = filled(partitions=2, n=3)
    assigned = []

    async def on_assign(consumer, partitions):
        assigned.extend((tp.topic, tp.partition) for tp in partitions)
        await consumer.assign(partitions)  # a call from inside the callback of the poll() running: not serialised

    async def main():
        consumer = aio.AIOConsumer(conf(**{"group.id": group, "auto.offset.reset": "earliest",
                                           "session.timeout.ms": 6000, "enable.auto.commit": False}))
        await consumer.subscribe([topic], on_assign=on_assign)
        got, deadline = [], time.monotonic() + 30
        while len(got) < 6 and time.monotonic() < deadline:
            got.extend(m for m in await consumer.consume(10, 0.2) if m.error() is None)
        committed = await consumer.commit(asynchronous=False)
        await consumer.close()
        return got, committed

    got, committed = asyncio.run(main())
    assert sorted(m.value() for m in got) == [b"0-0", b"0-1", b"0-2", b"1-0", b"1-1", b"1-2"]
    assert sorted((tp.partition, tp.offset) for tp in committed) == [(0, 3), (1, 3)]
    assert sorted(assigned) == [(topic, 0), (topic, 1)]
    assert committed_offsets(rk_settings.bootstrap_servers, group, topic, 2) == {0: 3, 1: 3}


def test_ours_takes_rocketmq_extras_and_headers(rk_settings, rk_topic):
    from rocketkafka.kafka import aio

    topic = rk_topic(partitions=2)
    conf = {"bootstrap.servers": rk_settings.bootstrap_servers, "linger.ms": 2,
            "rocketkafka.redis.urls": ",".join(rk_settings.redis_urls), "rocketkafka.topic.prefix": rk_settings.topic_prefix,
            **{k: v for k, v in rk_settings.client_properties().items() if k != "bootstrap.servers"}}

    async def main():
        async with aio.AIOProducer(conf) as producer:
            tagged = await (await producer.produce(topic, b"t", tags="paid", keys="order-1", headers=[("app", b"1")]))
            later = await (await producer.produce(topic, b"d", delay_level=1))
            seen = []
            plain = await (await producer.produce(topic, b"p", on_delivery=lambda err, msg: seen.append(err)))
            return tagged, later, plain, seen

    tagged, later, plain, seen = asyncio.run(main())
    assert seen == [None] and plain.topic() == topic
    assert later.topic() == rk_settings.topics.delay_level(1)  # the level's topic; the forwarder delivers it later
    record = next(r for r in read_all(rk_settings.bootstrap_servers, topic) if r.value() == b"t")
    headers = header_map(record.headers())
    assert (headers[Header.TAGS], headers[Header.KEYS], headers["app"], record.key()) == (b"paid", b"order-1", b"1",
                                                                                          b"order-1")
    assert TopicPartition(topic, tagged.partition()).partition == record.partition()
