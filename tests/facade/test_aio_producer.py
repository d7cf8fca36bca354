"""The asyncio producer against a real broker: awaited results match what was written, orderly and delayed sends
route as the sync producer's, bad input raises before anything is sent, shutdown leaves nothing pending."""

from __future__ import annotations

import asyncio
import warnings

import pytest

from rocketkafka import Message, Producer, TopicNotFoundError
from rocketkafka.aio import AsyncProducer
from rocketkafka.errors import MessageError, StateError
from rocketkafka.message import MessageExt
from rocketkafka.testing.reading import read_all

pytestmark = pytest.mark.integration


def test_awaited_sends_match_the_records_written(rk_settings, rk_topic):
    topic = rk_topic(partitions=3)

    async def main():
        async with AsyncProducer("pg", settings=rk_settings) as producer:
            return await asyncio.gather(*(producer.send(Message(topic, body=b"%d" % i, tags="T", keys=f"k{i}"))
                                          for i in range(300)))

    results = asyncio.run(main())
    records = {(r.partition(), r.offset()): MessageExt.of(r).decode() for r in read_all(rk_settings.bootstrap_servers, topic)}
    assert len(records) == 300
    for i, result in enumerate(results):
        got = records[(result.queue_id, result.offset)]
        assert (got.id, got.body, got.tags, result.topic) == (result.msg_id, b"%d" % i, "T", topic)


def test_orderly_and_delayed_sends_route_as_the_sync_producers(rk_settings, rk_topic):
    topic = rk_topic(partitions=8)
    with Producer("pg", settings=rk_settings) as sync:
        orderly = {k: sync.send_orderly(Message(topic, body=b"s"), k).queue_id for k in ("a", "b", "c", "d")}
        delayed = sync.send_sync(Message(topic, body=b"s", delay_time_level=1))

    async def main():
        async with AsyncProducer("pg", settings=rk_settings) as producer:
            keyed = {k: (await producer.send(Message(topic, body=b"a"), sharding_key=k)).queue_id for k in orderly}
            return keyed, await producer.send(Message(topic, body=b"a", delay_time_level=1))

    keyed, later = asyncio.run(main())
    assert keyed == orderly
    assert later.topic == delayed.topic != topic  # the level's topic, as the sync producer says


def test_bad_input_raises_before_anything_is_sent(rk_settings, rk_topic):
    topic = rk_topic(partitions=1)

    async def main():
        producer = AsyncProducer("pg", settings=rk_settings)
        with pytest.raises(StateError, match="not started"):
            await producer.send(Message(topic, body=b"x"))
        async with producer:
            with pytest.raises(TopicNotFoundError):
                await producer.send(Message(f"{topic}-missing", body=b"x"))
            with pytest.raises(MessageError):
                await producer.send(Message(topic, body=b"x", tags="a||b"))
            with pytest.raises(TypeError):
                await producer.send(b"not a message")  # type: ignore[arg-type]

    asyncio.run(main())
    assert read_all(rk_settings.bootstrap_servers, topic) == []


def test_a_cancelled_send_drops_only_its_result(rk_settings, rk_topic):
    topic = rk_topic(partitions=1)

    async def main():
        async with AsyncProducer("pg", settings=rk_settings) as producer:
            await producer.send(Message(topic, body=b"first"))  # the topic's look-up is done
            sends = [asyncio.ensure_future(producer.send(Message(topic, body=b"%d" % i))) for i in range(50)]
            await asyncio.sleep(0)
            sends[0].cancel()
            done = await asyncio.gather(*sends, return_exceptions=True)
        return done

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Task was destroyed but it is pending" and the like fail the test
        done = asyncio.run(main())
    assert isinstance(done[0], asyncio.CancelledError) and all(r.offset >= 0 for r in done[1:])
    assert len(read_all(rk_settings.bootstrap_servers, topic)) == 51  # a cancelled send still reaches Kafka


def test_a_sharding_keys_order_holds_across_a_topic_look_up_and_each_send_has_its_own_id(rk_settings, rk_topic):
    """Sends made while the topic is looked up (off the loop) queue in order; later ones wait behind them."""
    topic = rk_topic(partitions=4)

    async def main():
        async with AsyncProducer("pg", settings=rk_settings) as producer:
            first = [producer.send(Message(topic, body=b"%d" % i), sharding_key="k") for i in range(100)]
            await asyncio.sleep(0)
            later = [producer.send(Message(topic, body=b"%d" % i), sharding_key="k") for i in range(100, 200)]
            again = Message(topic, body=b"same object")
            twice = [producer.send(again, sharding_key="k"), producer.send(again, sharding_key="k")]
            return await asyncio.gather(*first, *later), await asyncio.gather(*twice)

    ordered, twice = asyncio.run(main())
    assert len({r.queue_id for r in ordered}) == 1
    by_offset = sorted((r.offset, i) for i, r in enumerate(ordered))
    assert [i for _, i in by_offset] == list(range(200))
    assert twice[0].msg_id != twice[1].msg_id
    written = {MessageExt.of(r).decode().id for r in read_all(rk_settings.bootstrap_servers, topic)}
    assert {twice[0].msg_id, twice[1].msg_id} <= written
