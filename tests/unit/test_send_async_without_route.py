"""A send_async that cannot start (no route: no broker answers) goes to the exception callback, as RocketMQ's
onException; without one it raises. Nothing listens at 127.0.0.1:9, so no broker is needed."""

from __future__ import annotations

import time

import pytest

from rocketkafka.config import Settings
from rocketkafka.errors import BrokerUnavailableError, SendError
from rocketkafka.message import Message
from rocketkafka.producer import Producer
from rocketkafka.queue_selectors import hash_selector

NOWHERE = Settings(bootstrap_servers="127.0.0.1:9", redis_urls=[])


@pytest.fixture
def producer():
    made = Producer("no-route", settings=NOWHERE, send_timeout=1.0)  # the route look-up waits this long
    made.start()
    yield made
    made.shutdown()


@pytest.mark.parametrize("routed", ["delayed", "selector"])
def test_a_send_without_a_route_goes_to_the_exception_callback(producer, routed):
    msg = Message("orders", body=b"x", delay_time_level=2 if routed == "delayed" else 0)
    acked, failed = [], []
    started = time.monotonic()
    producer.send_async(msg, acked.append, failed.append,
                        **({"selector": hash_selector, "arg": "k"} if routed == "selector" else {}))
    assert time.monotonic() - started < 5
    assert acked == [] and len(failed) == 1 and isinstance(failed[0], (SendError, BrokerUnavailableError))


def test_without_an_exception_callback_it_raises(producer):
    with pytest.raises((SendError, BrokerUnavailableError)):
        producer.send_async(Message("orders", body=b"x", delay_time_level=2), lambda r: None)
