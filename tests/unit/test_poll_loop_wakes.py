"""The poll loop waits on Kafka while nothing is out, and on the step's posts while work is out (fakes, no Kafka)."""

from __future__ import annotations

import threading
import time


from rocketkafka.ordering.engine import poll_loop
from rocketkafka.ordering.engine.poll_loop import IDLE_WAIT_S, PAUSED_WAIT_S, PENDING_WAIT_S, PollLoop, fetch_timeout


class Owned:
    def __init__(self, paused: bool = False) -> None:
        self.paused = {("t", 0)} if paused else set()


def test_an_idle_fetch_waits_the_idle_wait_a_paused_partition_or_a_step_less():
    assert fetch_timeout([], None) == fetch_timeout([Owned()], None) == IDLE_WAIT_S
    assert fetch_timeout([Owned()], 0.01) == 0.01 and fetch_timeout([Owned()], 5.0) == IDLE_WAIT_S
    assert fetch_timeout([Owned(), Owned(paused=True)], None) == PAUSED_WAIT_S
    assert fetch_timeout([Owned()], None, pending=True) == PENDING_WAIT_S < IDLE_WAIT_S  # a join's split waits on it
    assert fetch_timeout([Owned()], 0.01, pending=True) == 0.01


class Step:
    """Work is out while ``out`` is set; every tick is recorded."""

    def __init__(self) -> None:
        self.posted, self.out, self.ticks = threading.Event(), True, 0

    def awaited_posts(self) -> threading.Event | None:
        return self.posted if self.out else None

    def tick(self) -> float | None:
        self.ticks += 1
        return 0.005 if self.out else None


class Engine:
    """What the loop calls; ``fetches`` records each fetch's timeout."""

    name = group = "fake"
    metrics = None

    def __init__(self, step: Step) -> None:
        self.step, self._owned, self.fetches, self.pending = step, {}, [], False

    def maintain(self) -> None:
        pass

    def fetch(self, timeout: float) -> int:
        self.fetches.append(timeout)
        time.sleep(min(timeout, 0.05))  # as a Kafka poll that gets no record
        return 0

    def release_all(self) -> None:
        pass


def test_a_post_wakes_a_loop_with_work_out_and_kafka_is_only_asked_for_what_is_ready(monkeypatch):
    # a wait long enough that only the post can end it within the test
    monkeypatch.setattr(poll_loop, "PAUSED_WAIT_S", 60.0)
    monkeypatch.setattr(poll_loop, "IDLE_WAIT_S", 60.0)
    step = Step()
    engine = Engine(step)
    loop = PollLoop(engine)  # type: ignore[arg-type]
    loop._step_wait = 60.0
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    time.sleep(0.3)
    assert step.ticks == 0 and engine.fetches == [0]  # Kafka asked for what is ready, then the loop waits on posts
    step.out = False
    step.posted.set()  # the last outcome
    deadline = time.monotonic() + 10
    while step.ticks == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert step.ticks >= 1, "the post did not wake the loop"
    loop.stop(0)
