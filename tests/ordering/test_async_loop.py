"""The event loop of ``async def`` listeners without a broker: answers, the per-partition bound, cancellation, shutdown
(``ordering/consumers/async_listening.py``)."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import warnings

import pytest

from rocketkafka.errors import StateError
from rocketkafka.message import ConsumeOrderlyStatus
from rocketkafka.ordering.consumers.async_listening import CANCELLED, ListenerLoop, is_async_listener

ALWAYS = lambda: True  # noqa: E731 - the lock stays ours


def answers(runner: ListenerLoop, listener, args, still_ours=ALWAYS, **how):
    how.setdefault("ordered", False)
    return runner.answers(runner.submit(listener, list(args), **how), still_ours)


@pytest.fixture
def runner():
    r = ListenerLoop(name="rk-listeners-test")
    r.start()
    yield r
    r.close(1)


def test_what_counts_as_an_async_listener():
    async def coroutine_function(msg):
        return None

    class Callable:
        async def __call__(self, msg):
            return None

    assert is_async_listener(coroutine_function) and is_async_listener(Callable())
    assert not is_async_listener(lambda m: None) and not is_async_listener(print)


def test_answers_come_back_in_order_and_a_raise_is_its_exception(runner):
    async def listener(n):
        await asyncio.sleep(0.01 * (5 - n))  # the last finishes first: answers still follow the arguments
        if n == 3:
            raise ValueError("three")
        return n * 10

    got = answers(runner, listener, range(5))
    assert got[:3] + got[4:] == [0, 10, 20, 40]
    assert isinstance(got[3], ValueError)


def test_in_order_each_call_ends_before_the_next_and_the_first_answer_to_act_on_stops_them(runner):
    log = []

    async def listener(n):
        log.append(("begin", n))
        await asyncio.sleep(0.01 * (5 - n))
        log.append(("end", n))
        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT if n == 2 else None

    assert answers(runner, listener, range(5), ordered=True) == [None, None,
                                                                 ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT]
    assert log == [("begin", 0), ("end", 0), ("begin", 1), ("end", 1), ("begin", 2), ("end", 2)]
    # the lock's validity passed: nothing more starts (the worker asks the lock table, then hands the rest again)
    assert answers(runner, listener, range(5), ordered=True, valid_until=time.monotonic()) == []


def test_the_gate_bounds_coroutines_running_at_once_per_key(runner):
    running, peak = [0], [0]

    async def listener(n):
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        await asyncio.sleep(0.01)
        running[0] -= 1

    answers(runner, listener, range(40), gate=("t", 0), gate_size=4)
    assert peak[0] == 4
    peak[0] = 0
    answers(runner, listener, range(40))  # no gate: all at once
    assert peak[0] == 40


def test_a_lost_lock_cancels_the_coroutines_and_they_answer_cancelled(runner):
    cancelled = []

    async def listener(n):
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(n)
            raise

    lost_at = time.monotonic() + 0.3
    began = time.monotonic()
    got = answers(runner, listener, range(3), lambda: time.monotonic() < lost_at)
    assert got == [CANCELLED] * 3 and sorted(cancelled) == [0, 1, 2]
    lost_at = time.monotonic() + 0.3
    assert answers(runner, listener, range(3), lambda: time.monotonic() < lost_at, ordered=True) == [CANCELLED]
    assert sorted(cancelled) == [0, 0, 1, 2]  # in order, only the first had begun
    assert time.monotonic() - began < 5  # noticed within a wait slice or so, not at the sleep's end
    assert wait_for_empty(runner)


def wait_for_empty(runner: ListenerLoop) -> bool:
    deadline = time.monotonic() + 5
    while runner._tasks and time.monotonic() < deadline:
        time.sleep(0.01)
    return not runner._tasks


def test_shutdown_waits_its_grace_then_cancels_and_closes_the_loop():
    r = ListenerLoop(name="rk-listeners-test")
    r.start()
    ended = []

    async def quick(n):
        await asyncio.sleep(0.05)
        ended.append(("quick", n))

    async def forever(n):
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            ended.append(("cancelled", n))
            raise

    quick_f, forever_f = r.submit(quick, [1], ordered=True), r.submit(forever, [2], ordered=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r.close(0.5)
        assert quick_f.result(0) == [None] and forever_f.result(0) == [CANCELLED]
        late = r.submit(quick, [3], ordered=True)  # after shutdown: refused, no coroutine made
        assert late.result(0) == [CANCELLED]
        gc.collect()
    assert sorted(ended) == [("cancelled", 2), ("quick", 1)]
    assert r.loop is not None and r.loop.is_closed() and r._tasks == {}
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []


def test_shutdown_on_the_listeners_loop_is_refused_not_a_deadlock(runner):
    async def listener(_):
        with pytest.raises(StateError, match="would wait for itself"):
            runner.closing(1)
        return "refused"

    assert answers(runner, listener, [0]) == ["refused"]


def test_the_callers_loop_runs_the_coroutines_and_stays_open():
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        r = ListenerLoop(loop)
        r.start()

        async def listener(n):
            return threading.get_ident()

        assert answers(r, listener, [0, 1]) == [thread.ident, thread.ident]
        r.close(1)
        assert loop.is_running() and r._tasks == {}
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_only_an_event_loop_is_taken():
    with pytest.raises(TypeError, match="must be an asyncio event loop"):
        ListenerLoop(object())  # type: ignore[arg-type]


def test_a_handler_with_async_listeners_never_runs_on_the_poll_thread():
    """A poll thread waiting for a coroutine would stop fetching for as long as it awaits I/O: such a handler
    says ``off_poll_thread`` and the scheduler never runs its lanes inline (as for a handler that ends lanes)."""
    from rocketkafka.message_selector import MessageSelector
    from rocketkafka.ordering.consumers.listening import ListenerHandler
    from rocketkafka.ordering.consumers.subscriptions import Subscription, Subscriptions
    from rocketkafka.ordering.work.failures import Drop
    from rocketkafka.ordering.work.scheduler import Scheduler

    async def listener(msg):
        return None

    made = []
    for asynchronous in (False, True):
        subs = Subscriptions(None)
        subs.add(Subscription("t", MessageSelector.by_tag("*"), listener if asynchronous else (lambda m: None),
                              0, asynchronous))
        handler = ListenerHandler(subs, Drop(), orderly=True, max_reconsume_times=1, suspend_ms=0)
        scheduler = Scheduler(handler, threads=1, max_continuous_ms=1000, rewind_pause_ms=20, name="test",
                              on_stall=lambda: None)
        made.append(scheduler)
        assert handler.off_poll_thread is asynchronous
        assert (scheduler._on_stall is None) is asynchronous
    for scheduler in made:
        scheduler.close()


def test_calls_that_never_wait_run_in_one_task_and_waiting_ones_spread_up_to_the_bound(runner):
    tasks = set()

    async def quick(n):
        tasks.add(asyncio.current_task())
        return n

    assert answers(runner, quick, range(64), gate=("t", 1), gate_size=64) == list(range(64))
    assert len(tasks) == 1  # not a task per message: no helper starts while no call gave the loop a turn
    tasks.clear()

    async def slow(n):
        tasks.add(asyncio.current_task())
        await asyncio.sleep(0.01)
        return n

    assert answers(runner, slow, range(64), gate=("t", 1), gate_size=8) == list(range(64))
    assert len(tasks) == 8


def test_the_bound_holds_across_submissions_of_one_partition(runner):
    running, peak = [0], [0]

    async def listener(n):
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        await asyncio.sleep(0.005)
        running[0] -= 1

    futures = [runner.submit(listener, list(range(20)), ordered=False, gate=("t", 2), gate_size=3) for _ in range(3)]
    assert [runner.answers(f, ALWAYS) for f in futures] == [[None] * 20] * 3
    assert peak[0] == 3


def test_a_listener_raising_cancelled_itself_answers_cancelled_and_the_others_go_on(runner):
    async def listener(n):
        await asyncio.sleep(0)
        if n == 1:
            raise asyncio.CancelledError
        return n

    assert answers(runner, listener, range(4), gate=("t", 3), gate_size=2) == [0, CANCELLED, 2, 3]


def test_a_lost_lock_keeps_the_answers_of_calls_that_ended(runner):
    async def listener(n):
        if n >= 2:
            await asyncio.sleep(3600)
        return n

    lost_at = time.monotonic() + 0.2
    got = answers(runner, listener, range(5), lambda: time.monotonic() < lost_at, gate=("t", 4), gate_size=2)
    assert got == [0, 1, CANCELLED, CANCELLED, CANCELLED]
    assert wait_for_empty(runner)
