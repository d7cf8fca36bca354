"""``async def`` listeners on the real broker: order, bounded concurrency, statuses, retry and DLQ, shutdown, and
the caller's loop (``ordering/consumers/async_listening.py``)."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
import warnings
from collections import Counter, defaultdict

import pytest

from rocketkafka import ConsumeOrderlyStatus, ConsumeStatus, PushConsumer
from rocketkafka.errors import StateError
from rocketkafka.testing.history import History, check
from rocketkafka.testing.reading import read_all
from tests.ordering.conftest import FAST, STEADY, shut_down, wait_until

pytestmark = pytest.mark.integration


class Concurrency:
    """Counts coroutine bodies running at once, overall and per partition (touched on the loop thread only)."""

    def __init__(self) -> None:
        self.now, self.peak = 0, 0
        self.by_queue: Counter = Counter()
        self.peak_by_queue: Counter = Counter()

    async def hold(self, msg, seconds: float) -> None:
        q = msg.queue_id
        self.now += 1
        self.by_queue[q] += 1
        self.peak = max(self.peak, self.now)
        self.peak_by_queue[q] = max(self.peak_by_queue[q], self.by_queue[q])
        try:
            await asyncio.sleep(seconds)
        finally:
            self.now -= 1
            self.by_queue[q] -= 1


def _no_asyncio_complaints(caplog, caught) -> None:
    gc.collect()  # a task or coroutine dropped un-awaited complains when it is collected
    complaints = [r.getMessage() for r in caplog.records if r.name == "asyncio"]
    complaints += [str(w.message) for w in caught if "never awaited" in str(w.message)]
    assert complaints == [], complaints


def test_orderly_async_listener_keeps_queue_order_while_queues_overlap(rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=6)
    history = History()
    running = {"a1": Concurrency(), "a2": Concurrency()}  # each on its member's loop thread only

    async def listener(msg, name):
        with history.handler_call(name, msg):
            await running[name].hold(msg, 0.002)  # long enough for queues to overlap, and for a reorder to show
        return ConsumeOrderlyStatus.SUCCESS

    consumers = []
    for name in ("a1", "a2"):
        c = PushConsumer(rk_group, settings=rk_settings, orderly=True, **STEADY)

        async def bound(msg, name=name):
            return await listener(msg, name)
        c.subscribe(topic, bound)
        consumers.append(c)
    for c in consumers:
        c.start()
    ids = produce(topic, 1200, key_of=lambda i: f"order-{i % 100}")
    try:
        assert wait_until(lambda: len({call.msg_id for call in history.calls}) >= 1200, timeout=90)
    finally:
        locks_lost = shut_down(consumers)
    report = check(history.calls, ids, order_by="partition", serial_by="partition")
    assert report.lost_count == 0 and report.duplicate_count == 0, f"{report.summary()}; locks lost: {locks_lost}"
    assert report.reorders == [] and report.overlaps == []
    print({name: (r.peak, dict(r.peak_by_queue)) for name, r in running.items()})
    # the history checker found no two calls of a queue overlapping in the group; on each member's loop, at most
    # one coroutine of a queue ran at a time, and the queues of a member overlapped
    assert all(max(r.peak_by_queue.values()) == 1 for r in running.values())
    assert max(r.peak for r in running.values()) > 1


def test_concurrent_async_listener_runs_many_coroutines_bounded_per_partition(rk_settings, rk_topic, rk_group,
                                                                              produce):
    topic = rk_topic(partitions=3)
    running = Concurrency()
    seen: list[str] = []

    async def listener(msg):
        await running.hold(msg, 0.02)
        seen.append(msg.id)
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(rk_group, settings=rk_settings, async_max_in_flight=8, consume_batch_size=32, **STEADY)
    c.subscribe(topic, listener)
    c.start()
    ids = produce(topic, 600, key_of=lambda i: f"k{i}")  # spread over the partitions
    try:
        assert wait_until(lambda: set(ids) <= set(seen), timeout=90)
    finally:
        c.shutdown()
    print(f"coroutines at once: {running.peak} in all, per partition {dict(running.peak_by_queue)}")
    # a run of 32 starts its 32 coroutines together: the gate, not the batch, holds a partition to 8
    assert max(running.peak_by_queue.values()) == 8, running.peak_by_queue
    assert running.peak > 1
    assert len(seen) == len(set(seen))


def test_concurrent_async_failures_retry_then_dead_letter(rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=2)
    ids = produce(topic, 20)
    raising, later = ids[3], ids[11]
    tries: dict[str, list[int]] = defaultdict(list)

    async def listener(msg):
        tries[msg.id].append(msg.reconsume_times)
        await asyncio.sleep(0)
        if msg.id == raising:
            raise RuntimeError("boom")
        return ConsumeStatus.RECONSUME_LATER if msg.id == later else ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(rk_group, settings=rk_settings, max_reconsume_times=2, retry_backoff=False, **FAST)
    c.subscribe(topic, listener)
    c.start()
    dlq_topic = rk_settings.topics.dead_letter(rk_group)
    try:
        assert wait_until(lambda: len(tries[raising]) >= 3 and len(tries[later]) >= 3 and len(tries) == 20,
                          timeout=90)
        assert wait_until(lambda: len(read_all(rk_settings.bootstrap_servers, dlq_topic)) >= 2, timeout=60)
    finally:
        c.shutdown()
    assert tries[raising] == [0, 1, 2] and tries[later] == [0, 1, 2]
    dead = {dict(r.headers())["rk.UNIQ_KEY"].decode() for r in read_all(rk_settings.bootstrap_servers, dlq_topic)}
    assert dead == {raising, later}
    assert all(t == [0] for i, t in tries.items() if i not in (raising, later))


def test_a_coroutine_answering_with_a_future_is_handled_by_the_futures_answer(rk_settings, rk_topic, rk_group,
                                                                               produce):
    from concurrent.futures import Future

    topic = rk_topic(partitions=1)
    ids = produce(topic, 4)
    tries: dict[str, list[int]] = defaultdict(list)

    async def listener(msg):
        tries[msg.id].append(msg.reconsume_times)
        answer: Future = Future()
        status = ConsumeStatus.RECONSUME_LATER if msg.id == ids[1] and msg.reconsume_times == 0 \
            else ConsumeStatus.CONSUME_SUCCESS
        threading.Timer(0.2, answer.set_result, (status,)).start()  # decided later, elsewhere
        return answer

    c = PushConsumer(rk_group, settings=rk_settings, retry_backoff=False, **FAST)
    c.subscribe(topic, listener)
    c.start()
    try:
        assert wait_until(lambda: len(tries) == 4 and len(tries[ids[1]]) == 2, timeout=60), dict(tries)
    finally:
        c.shutdown()
    assert tries[ids[1]] == [0, 1] and all(t == [0] for i, t in tries.items() if i != ids[1])


def test_orderly_async_suspend_retries_in_place_then_dead_letters(rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=1)
    ids = produce(topic, 5)
    seen = []

    async def listener(msg):
        seen.append((msg.id, msg.reconsume_times))
        await asyncio.sleep(0.001)
        if msg.id == ids[1]:
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        if msg.id == ids[3] and msg.reconsume_times == 0:
            raise ValueError("first try of the fourth fails")
        return ConsumeOrderlyStatus.SUCCESS

    c = PushConsumer(rk_group, settings=rk_settings, orderly=True, max_reconsume_times=2,
                     suspend_current_queue_time_ms=50, **FAST)
    c.subscribe(topic, listener)
    c.start()
    try:
        assert wait_until(lambda: any(i == ids[4] for i, _ in seen), timeout=60)
    finally:
        c.shutdown()
    assert seen == [(ids[0], 0)] + [(ids[1], n) for n in range(3)] + [(ids[2], 0), (ids[3], 0), (ids[3], 1),
                                                                        (ids[4], 0)]
    dlq = read_all(rk_settings.bootstrap_servers, rk_settings.topics.dead_letter(rk_group))
    assert [dict(r.headers())["rk.UNIQ_KEY"].decode() for r in dlq] == [ids[1]]


def test_shutdown_awaits_coroutines_in_flight_and_the_next_member_gets_only_the_rest(rk_settings, rk_topic, rk_group,
                                                                                    produce, caplog):
    """A graceful shutdown finishes what its lanes hold, as with a plain listener: nothing it handled comes again."""
    topic = rk_topic(partitions=2)
    ids = produce(topic, 40)
    started: list[str] = []
    finished: list[str] = []

    async def listener(msg):
        started.append(msg.id)
        await asyncio.sleep(0.3)  # in flight when shutdown begins
        finished.append(msg.id)
        return ConsumeOrderlyStatus.SUCCESS

    caplog.set_level(logging.WARNING)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c = PushConsumer(rk_group, settings=rk_settings, orderly=True, consume_batch_size=4, **STEADY)
        c.subscribe(topic, listener)
        c.start()
        try:
            assert wait_until(lambda: len(started) >= 2, timeout=60)
        finally:
            c.shutdown()
        runner = c._listeners_loop
        assert runner.loop is not None and runner.loop.is_closed() and runner._tasks == {}
        _no_asyncio_complaints(caplog, caught)
    assert sorted(started) == sorted(finished) and len(finished) < len(ids)  # awaited, none cancelled
    again: list[str] = []
    c2 = PushConsumer(rk_group, settings=rk_settings, **STEADY)
    c2.subscribe(topic, lambda m: again.append(m.id))
    c2.start()
    try:
        assert wait_until(lambda: set(ids) <= set(again) | set(finished), timeout=60)
    finally:
        c2.shutdown()
    assert set(again).isdisjoint(finished), "a graceful shutdown re-delivered what it had handled"


def test_shutdown_cancels_what_still_runs_after_its_timeout_leaving_nothing_pending(rk_settings, rk_topic, rk_group,
                                                                                   produce, caplog):
    topic = rk_topic(partitions=2)
    ids = produce(topic, 40)
    started: list[str] = []
    cancelled: list[str] = []
    finished: list[str] = []

    async def listener(msg):
        started.append(msg.id)
        try:
            await asyncio.sleep(3600)  # never ends by itself: shutdown must cancel it
        except asyncio.CancelledError:
            cancelled.append(msg.id)
            raise
        finished.append(msg.id)

    caplog.set_level(logging.WARNING)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c = PushConsumer(rk_group, settings=rk_settings, **FAST)
        c.subscribe(topic, listener)
        c.start()
        try:
            assert wait_until(lambda: len(started) >= 10, timeout=60)
        finally:
            began = time.monotonic()
            c.shutdown(timeout=2)
            took = time.monotonic() - began
        runner = c._listeners_loop
        assert runner.loop is not None and runner.loop.is_closed() and runner._tasks == {}
        _no_asyncio_complaints(caplog, caught)
    assert took < 2 + 10, took  # the timeout, then the cancellation (a loaded machine: slack)
    assert sorted(cancelled) == sorted(started) and finished == []
    # a cancelled coroutine's record was neither committed nor retried: the next member gets every one (once the
    # lease of the partitions that could not drain expired)
    again: set[str] = set()
    c2 = PushConsumer(rk_group, settings=rk_settings, **FAST)
    c2.subscribe(topic, lambda m: again.add(m.id))
    c2.start()
    try:
        assert wait_until(lambda: set(ids) <= again, timeout=60)
    finally:
        c2.shutdown()
    assert read_all(rk_settings.bootstrap_servers, rk_settings.topics.retry(rk_group)) == []


def test_callers_loop_runs_the_listeners_and_async_with_shuts_down(rk_settings, rk_topic, rk_group, produce,
                                                                   caplog):
    topic = rk_topic(partitions=2)
    ids = produce(topic, 100)
    threads: set[int] = set()
    seen: list[str] = []

    class Handler:  # an object whose __call__ is a coroutine function
        async def __call__(self, msg):
            threads.add(threading.get_ident())
            await asyncio.sleep(0.001)
            seen.append(msg.id)

    async def main() -> str:
        consumer = PushConsumer(rk_group, settings=rk_settings, loop=asyncio.get_running_loop(), **STEADY)
        consumer.subscribe(topic, Handler())
        async with consumer:
            deadline = time.monotonic() + 60
            while not set(ids) <= set(seen) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            with pytest.raises(StateError, match="would wait for itself"):
                consumer.shutdown()  # on the listeners' loop: refused, not a deadlock
        return "done"

    caplog.set_level(logging.WARNING)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loop_thread: list[int] = []

        async def runner():
            loop_thread.append(threading.get_ident())
            return await main()
        assert asyncio.run(runner()) == "done"
        _no_asyncio_complaints(caplog, caught)
    assert set(ids) <= set(seen) and len(seen) == len(set(seen))
    assert threads == set(loop_thread)  # every coroutine ran on the caller's loop


def test_async_batch_listener_gets_batches_in_order(rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=1)
    ids = produce(topic, 50)
    got: list[str] = []

    async def listener(batch):
        await asyncio.sleep(0.001)
        got.extend(m.id for m in batch)

    c = PushConsumer(rk_group, settings=rk_settings, orderly=True, **STEADY)
    c.subscribe_batch(topic, listener, max_batch_size=8)
    c.start()
    try:
        assert wait_until(lambda: len(got) >= 50, timeout=60)
    finally:
        c.shutdown()
    assert got == ids


@pytest.mark.rk_needs("stop-redis")
def test_a_lost_lock_cancels_its_coroutines_and_their_messages_come_again(rk_backend, rk_settings, rk_topic,
                                                                          rk_group, produce, caplog):
    """The quorum of lock nodes goes: the locks are lost, the coroutines holding their messages are cancelled (not
    awaited: another member may own the queue now), nothing is committed, retried or dead-lettered; once the locks
    are back, the same messages run again, first try."""
    topic = rk_topic(partitions=2)
    ids = produce(topic, 16, key_of=lambda i: f"k{i}")
    calls: list[tuple[str, int]] = []
    queues: set[int] = set()
    cancelled: list[str] = []

    async def listener(msg):
        calls.append((msg.id, msg.reconsume_times))
        if msg.queue_id in queues:
            return ConsumeOrderlyStatus.SUCCESS
        queues.add(msg.queue_id)  # the first message of each queue hangs until its lock is lost
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(msg.id)
            raise

    caplog.set_level(logging.WARNING)
    consumer = PushConsumer(rk_group, settings=rk_settings, orderly=True, **FAST)
    consumer.subscribe(topic, listener)
    consumer.start()
    restarted: list[int] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            assert wait_until(lambda: len(queues) == 2, timeout=60)
            heads = [c[0] for c in calls]
            rk_backend.stop_redis(0)
            rk_backend.stop_redis(1)
            expiry = (FAST["lock_client_expiry_ms"] + FAST["lock_renew_interval_ms"]) / 1000
            assert wait_until(lambda: sorted(cancelled) == sorted(heads), timeout=expiry + 10), (cancelled, calls)
            for i in (0, 1):
                rk_backend.start_redis(i)
                restarted.append(i)
            assert wait_until(lambda: {c[0] for c in calls} >= set(ids), timeout=60), calls
        finally:
            for i in (0, 1):
                if i not in restarted:
                    rk_backend.start_redis(i)
            consumer.shutdown()
        _no_asyncio_complaints(caplog, caught)
    # each head again, not counted as a failed try; nothing else twice (orderly: nothing after a head had run)
    assert sorted(calls) == sorted([(i, 0) for i in ids] + [(i, 0) for i in heads])
    assert read_all(rk_settings.bootstrap_servers, rk_settings.topics.dead_letter(rk_group)) == []


def test_key_ordered_async_listener_keeps_each_key_serial_while_keys_overlap(rk_settings, rk_topic, rk_group,
                                                                             produce):
    from tests.ordering.conftest import overlapping_keys

    topic = rk_topic(partitions=2)
    history = History()

    async def listener(msg):
        with history.handler_call("k1", msg, key=msg.key.decode() if msg.key else None):
            await asyncio.sleep(0.01)

    c = PushConsumer(rk_group, settings=rk_settings, orderly=True, order_key="key", consume_thread_max=32, **STEADY)
    c.subscribe(topic, listener)
    c.start()
    ids = produce(topic, 800, key_of=lambda i: f"order-{i % 40}", keys_of=lambda i: f"order-{i % 40}")
    try:
        assert wait_until(lambda: len({x.msg_id for x in history.calls}) >= 800, timeout=90)
    finally:
        c.shutdown()
    report = check(history.calls, ids, order_by="key", serial_by="key")
    overlaps = overlapping_keys(history.calls)
    print(report.summary(), f"overlapping keys within a partition: {overlaps}")
    assert report.lost_count == 0 and report.duplicate_count == 0
    assert report.reorders == [] and report.overlaps == []  # one coroutine of a key at a time, in offset order
    assert overlaps > 50, "different keys of one partition must run concurrently"
