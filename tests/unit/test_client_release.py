"""Closing lets librdkafka clients go at once, in the closing thread.

A client left in a reference cycle (the consumer engine lives in several) is destroyed
by a later garbage collection, in whatever thread runs that pass, and a librdkafka
destroy can block it for a second: with confluent-kafka 2.7 this stalled lock keepers
past their renewal in CI (spurious lock losses, then redeliveries). No broker is needed:
clients connect lazily, and nothing here waits for one.
"""

import gc
import sys
import weakref

import pytest
from confluent_kafka import Producer

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.errors import StateError
from rocketkafka.sender import Sender

NOWHERE = Settings(bootstrap_servers="127.0.0.1:9", redis_urls=[])  # nothing listens: clients connect lazily


def test_a_closed_topic_admin_drops_its_client_and_refuses_calls():
    admin = TopicAdmin(NOWHERE)
    client = weakref.ref(admin._client)
    gc.disable()  # freed by reference counting, not by a collection
    try:
        admin.close()
        assert client() is None
    finally:
        gc.enable()
    admin.close()  # idempotent
    with pytest.raises(StateError, match="closed"):
        admin.partitions("orders")


def test_a_closed_sender_holds_no_reference_to_its_own_producer():
    sender = Sender(NOWHERE)
    producer = sender.kafka
    before = sys.getrefcount(producer)
    sender.close(timeout=1)
    assert sys.getrefcount(producer) < before - 1  # the attribute and both bound methods are gone
    assert sender.admin._admin is None
    assert sender.flush() == 0 and sender.poll(0) == 0
    with pytest.raises(StateError, match="closed"):
        sender.kafka


def test_a_producer_given_to_a_sender_stays_its_owners():
    given = Producer(NOWHERE.kafka_config())
    sender = Sender(NOWHERE, kafka=given)
    sender.close(timeout=1)
    assert sender.kafka is given
