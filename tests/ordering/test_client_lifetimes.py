"""A consumer that shut down leaves no open librdkafka client for the garbage collector.

The consumer and its engine live in reference cycles (bound callbacks), so the cycle
collector frees them, in whatever thread its pass runs. A librdkafka client destroyed
there can block that thread for a second -- with confluent-kafka 2.7, a lock keeper
missed its renewal that way and a graceful handover redelivered 101 messages in CI.
Shutdown therefore lets every client go itself (closed consumers are already destroyed).
"""

from __future__ import annotations

import gc

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from rocketkafka import PushConsumer
from tests.ordering.conftest import FAST, wait_until


def _open_clients_in_garbage() -> list[str]:
    """Kafka clients only the cycle collector would free, and still open (their destroy would do real work)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return [type(o).__name__ for o in gc.garbage
                if isinstance(o, (Producer, AdminClient)) or isinstance(o, Consumer) and _open(o)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def _open(consumer: Consumer) -> bool:
    try:
        consumer.assignment()
    except (RuntimeError, KafkaException):  # "Consumer closed"
        return False
    return True


@pytest.mark.integration
def test_a_shut_down_push_consumer_leaves_no_open_client_to_the_garbage_collector(rk_settings, rk_topic, rk_group,
                                                                                    produce):
    topic = rk_topic(partitions=2)
    produce(topic, 20)
    gc.collect()  # earlier tests' garbage is not this test's business
    seen = []
    consumer = PushConsumer(rk_group, settings=rk_settings, orderly=True, **FAST)
    consumer.subscribe(topic, seen.append)
    consumer.start()
    assert wait_until(lambda: len(seen) == 20)
    consumer.shutdown()
    del consumer
    assert _open_clients_in_garbage() == []
