"""The timer thread behind suspended shards and held delay records: fires in due order, and once closed
and joined leaves nothing that keeps its owner (and the Kafka clients the owner holds) alive."""

from __future__ import annotations

import gc
import threading
import time
import weakref

from rocketkafka.ordering.work.timers import DueTimers


class _Owner:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.fired: list[str] = []
        self.timers = DueTimers(self.lock, self.fired.append, "rk-timers-test")

    def close(self) -> None:
        with self.lock:
            self.timers.close()
        self.timers.join()


def test_items_fire_in_due_order_not_in_insertion_order():
    owner = _Owner()
    now = time.monotonic()
    with owner.lock:
        owner.timers.add(now + 0.06, "late")
        owner.timers.add(now + 0.02, "early")
    deadline = time.monotonic() + 5
    while len(owner.fired) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    owner.close()
    assert owner.fired == ["early", "late"]


def test_a_closed_owner_is_freed_without_a_garbage_collection():
    """The owner and its timers form a cycle while the thread runs; after close() and join() nothing
    but the owner's own references remain, so dropping it frees it at once (a failed start that leaves
    a producer to the next full collection leaves librdkafka's threads running until then)."""
    gc.disable()
    try:
        owner = _Owner()
        with owner.lock:
            owner.timers.add(time.monotonic() + 60, "never")
        thread = owner.timers._thread
        owner.close()
        assert not thread.is_alive()
        gone = weakref.ref(owner)
        del owner
        assert gone() is None
    finally:
        gc.enable()
