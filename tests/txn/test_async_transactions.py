"""The asyncio transaction producer on a real broker: an awaited local transaction decides the send, an async check
callback resolves an undecided one by check-back, a cancelled local transaction leaves the half to the checker."""

from __future__ import annotations

import asyncio

import pytest

from rocketkafka import Message
from rocketkafka.txn import AsyncTransactionProducer
from tests.txn.conftest import COMMIT, ROLLBACK, UNKNOWN, fast_producer_options, tx_ids, wait_until

pytestmark = pytest.mark.integration


def test_an_awaited_local_transaction_decides_what_is_delivered(rk_settings, rk_topic, read_topic):
    topic = rk_topic(partitions=2)

    async def check(msg):  # never asked here: every local transaction answers
        return UNKNOWN

    async def local(msg, arg):
        await asyncio.sleep(0.01)  # the local transaction's own I/O, on the loop
        return arg

    async def main():
        async with AsyncTransactionProducer("aio-tx", check, settings=rk_settings,
                                            options=fast_producer_options()) as producer:
            return await asyncio.gather(*(producer.send_message_in_transaction(Message(topic, b"%d" % i), local,
                                                                               COMMIT if i % 2 else ROLLBACK)
                                          for i in range(10)))

    results = asyncio.run(main())
    committed = {r.transaction_id for r in results if r.local_state is COMMIT}
    assert len(committed) == 5 and {r.local_state for r in results} == {COMMIT, ROLLBACK}
    assert wait_until(lambda: sorted(tx_ids(read_topic(topic))) == sorted(committed), 30)


def test_an_async_check_callback_resolves_an_undecided_transaction(rk_settings, rk_topic, read_topic, make_checker):
    topic = rk_topic(partitions=1)
    asked: list[str] = []

    async def check(msg):
        await asyncio.sleep(0)  # it runs on the producer's loop
        asked.append(msg.transaction_id)
        return COMMIT

    async def main():
        async with AsyncTransactionProducer("aio-tx-check", check, settings=rk_settings,
                                            options=fast_producer_options()) as producer:
            result = await producer.send_message_in_transaction(Message(topic, b"later"), lambda m, a: UNKNOWN)
            make_checker()
            for _ in range(300):  # the loop stays free for the check-back meanwhile (30 s at most)
                if result.transaction_id in asked:
                    break
                await asyncio.sleep(0.1)
            return result

    result = asyncio.run(main())
    assert result.local_state is UNKNOWN and result.transaction_id in asked
    assert wait_until(lambda: result.transaction_id in tx_ids(read_topic(topic)), 30)
    assert tx_ids(read_topic(topic)).count(result.transaction_id) == 1


def test_a_cancelled_local_transaction_ends_nothing_and_the_checker_decides(rk_settings, rk_topic, read_topic,
                                                                            make_checker):
    topic = rk_topic(partitions=1)
    asked: list[str] = []

    async def check(msg):
        asked.append(msg.transaction_id)
        return ROLLBACK

    async def main():
        async with AsyncTransactionProducer("aio-tx-cancel", check, settings=rk_settings,
                                            options=fast_producer_options()) as producer:
            running = asyncio.Event()
            ids: list[str] = []

            async def local(msg, arg):
                ids.append(msg.id)  # the transaction id, set once the half is stored
                running.set()
                await asyncio.sleep(3600)

            send = asyncio.ensure_future(producer.send_message_in_transaction(Message(topic, b"never"), local))
            await running.wait()
            send.cancel()
            with pytest.raises(asyncio.CancelledError):
                await send
            make_checker()
            for _ in range(300):  # the checker asks for the half nobody ended (30 s at most)
                if ids[0] in asked:
                    break
                await asyncio.sleep(0.1)
            return ids[0]

    txid = asyncio.run(main())
    assert txid in asked  # the half waited for the checker, which asked, and was told to roll back
    assert tx_ids(read_topic(topic, 2.0)) == []
