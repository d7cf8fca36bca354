"""A poll thread that dies is never silent: the next call raises it, health and metrics show it, its partitions move."""

from __future__ import annotations

import time

import pytest

from rocketkafka import PushConsumer
from rocketkafka.errors import ConsumerFailedError
from rocketkafka.ordering.engine.lifecycle import State
from tests.conftest import scrape
from tests.ordering.conftest import FAST, wait_until

pytestmark = pytest.mark.integration


class Injected(RuntimeError):
    """The failure injected into the poll loop."""


def test_a_dead_poll_thread_raises_on_the_next_call_and_its_partitions_move_at_once(
        rk_settings, rk_topic, rk_group, produce):
    topic = rk_topic(partitions=4)
    seen: dict[str, list[str]] = {"a": [], "b": []}
    consumers = {}
    for name in ("a", "b"):
        c = PushConsumer(rk_group, settings=rk_settings, orderly=True, metrics_port=0 if name == "a" else None,
                         **FAST)
        c.subscribe(topic, lambda m, n=name: seen[n].append(m.id))
        c.start()
        consumers[name] = c
    a, b = consumers["a"], consumers["b"]
    try:
        assert wait_until(lambda: [len(c.assignment()) for c in (a, b)] == [2, 2])

        def broken_fetch(timeout: float) -> int:
            raise Injected("the client blew up")

        a.engine.fetch = broken_fetch  # the next loop of a's poll thread dies here
        assert wait_until(lambda: a.state is State.FAILED, timeout=10)
        died = time.monotonic()

        with pytest.raises(ConsumerFailedError) as raised:
            a.assignment()
        assert isinstance(raised.value.__cause__, Injected)
        health = a.health()
        assert health.state is State.FAILED and isinstance(health.error, Injected) and health.partitions == 0
        failures = [v for (name, labels), v in scrape(a.metrics.port).items()
                    if name == "rocketkafka_consumer_poll_thread_failures_total"]
        assert failures == [1.0]

        # its locks were released, not left to expire: the survivor owns everything well within one lease
        assert wait_until(lambda: len(b.assignment()) == 4, timeout=FAST["lock_lease_ms"] / 1000)
        print(f"survivor owned every partition {time.monotonic() - died:.2f} s after the failure")
        ids = produce(topic, 200, key_of=lambda i: f"k{i % 16}")
        assert wait_until(lambda: set(ids) <= set(seen["b"]), timeout=20)
    finally:
        b.shutdown()
        with pytest.raises(ConsumerFailedError):  # an application that only shuts down still learns of it
            a.shutdown()
    assert a.state is State.CLOSED
