"""A topic rocketkafka creates is written to only once its leaders serve it, and every producer of ours keeps one
request in flight: together they close librdkafka's "implicitly acked" loss (confluent-kafka-go#921).

The loss, seen on Apache Kafka 4.1 in the forwarder crash tests: a new idempotent producer's first batch to a
just-created delay topic failed NOT_LEADER_OR_FOLLOWER, its second batch (already in flight) succeeded, and
librdkafka reported the first one delivered with no offset. The message was nowhere.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from rocketkafka import Message, Producer
from rocketkafka.admin import TopicAdmin
from rocketkafka.config import SAFE_PRODUCER_CONFIG
from rocketkafka.delay.forwarder import FORWARDER_PRODUCER_CONFIG
from rocketkafka.ordering.consumers.transactions import TRANSACTIONAL_PRODUCER_CONFIG
from rocketkafka.sender import Sender

pytestmark = pytest.mark.integration


def test_every_partition_of_new_topics_is_served_when_create_returns(rk_settings, _rk_made_topics):
    """Eleven topics of four partitions in one request, as a delay router provisions its tiers: the moment
    ``create_internal`` returns, each partition's leader answers a ListOffsets (on Apache Kafka without the
    wait this failed 3 runs of 3 beside three busy CPUs: some answered NOT_LEADER_OR_FOLLOWER)."""
    raw = AdminClient({"bootstrap.servers": rk_settings.bootstrap_servers})
    with TopicAdmin(rk_settings) as admin:
        for _ in range(3):
            names = [f"t-new-topics-{uuid.uuid4().hex[:8]}" for _ in range(11)]
            _rk_made_topics.update(names)
            admin.create_internal({name: 4 for name in names})
            futures = raw.list_offsets({tp: OffsetSpec.latest() for tp in _partitions(names, 4)}, request_timeout=10)
            refused = {f"{tp.topic}[{tp.partition}]": future.exception() for tp, future in futures.items()
                       if future.exception() is not None}
            assert refused == {}, f"partitions not served yet: {refused}"


def test_a_first_send_to_a_new_delay_topic_is_stored_where_its_result_says(rk_settings, rk_topic):
    """The first delayed sends provision the delay topics; each result carries a real offset (an implicit
    ack carries none)."""
    settings = rk_settings.model_copy(update={"topic_prefix": f"rk{uuid.uuid4().hex[:8]}"})
    topic = rk_topic(partitions=2)
    with Producer("new-topics", settings=settings) as producer:
        results = [producer.send_sync(Message(topic, body=b"x", delay_time_level=1 + i % 3)) for i in range(12)]
    assert all(r.offset is not None and r.offset >= 0 for r in results), results


@pytest.mark.parametrize("config", [FORWARDER_PRODUCER_CONFIG, TRANSACTIONAL_PRODUCER_CONFIG],
                         ids=["forwarder", "transactional"])
def test_every_producer_of_ours_keeps_one_request_in_flight(config):
    assert SAFE_PRODUCER_CONFIG.items() <= config.items()


def test_the_sender_keeps_one_request_in_flight_unless_told_otherwise(rk_settings):
    ours = Sender(rk_settings)
    told = Sender(rk_settings, {"max.in.flight.requests.per.connection": 5})
    try:
        assert ours.config["max.in.flight.requests.per.connection"] == 1
        assert told.config["max.in.flight.requests.per.connection"] == 5
    finally:
        ours.close()
        told.close()


def _partitions(names: list[str], count: int) -> list[TopicPartition]:
    return [TopicPartition(name, p) for name in names for p in range(count)]
