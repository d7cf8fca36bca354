"""Confluent Schema Registry Avro on both doors: records carry the Confluent wire format, written by
``confluent_kafka.schema_registry``'s own serializer, and whichever client reads them decodes them
(the library's ``mock://`` registry here; one test for a real registry named by the environment)."""

from __future__ import annotations

import json
import os

import pytest
from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from rocketkafka import Message, Producer, RegistryAvroSerde
from rocketkafka.message import MessageExt
from rocketkafka.testing.reading import read_all

pytestmark = pytest.mark.integration

ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "string"}, {"name": "qty", "type": "int"}]}


def _roundtrip_rocketmq_door(rk_settings, topic, registry):
    serde = RegistryAvroSerde(registry, ORDER)
    with Producer("avro", settings=rk_settings) as producer:
        producer.send_sync(Message(topic, body=serde.encode({"id": "o-1", "qty": 2}, topic), tags="created"))
    [record] = read_all(rk_settings.bootstrap_servers, topic)
    # a registry-based Kafka consumer reads it with confluent-kafka's own deserializer
    theirs = AvroDeserializer(registry)(record.value(), SerializationContext(topic, MessageField.VALUE))
    ours = serde.decode(MessageExt.of(record).body, topic)
    assert theirs == ours == {"id": "o-1", "qty": 2}
    assert MessageExt.of(record).tags == "created"
    return record


def test_rocketmq_door_sends_registry_framed_avro(rk_settings, rk_topic):
    registry = SchemaRegistryClient.new_client({"url": "mock://rocketmq-door"})
    topic = rk_topic(partitions=1)
    record = _roundtrip_rocketmq_door(rk_settings, topic, registry)
    assert record.value()[0] == 0
    assert int.from_bytes(record.value()[1:5], "big") == registry.get_latest_version(f"{topic}-value").schema_id


def test_kafka_door_takes_confluents_serializer_as_is(rk_settings, rk_topic):
    from rocketkafka.kafka import Consumer, Producer as KafkaProducer

    registry = SchemaRegistryClient.new_client({"url": "mock://kafka-door"})
    topic = rk_topic(partitions=1)
    serialize = AvroSerializer(registry, json.dumps(ORDER))
    p = KafkaProducer({"bootstrap.servers": rk_settings.bootstrap_servers})
    p.produce(topic, value=serialize({"id": "o-9", "qty": 1}, SerializationContext(topic, MessageField.VALUE)),
              key=b"o-9")
    assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": rk_settings.bootstrap_servers, "group.id": f"avro-{topic}"})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    msg = None
    for _ in range(50):
        msg = c.poll(0.2)
        if msg is not None and msg.error() is None:
            break
    c.close()
    assert msg is not None and msg.error() is None
    assert AvroDeserializer(registry)(msg.value(), SerializationContext(topic, MessageField.VALUE)) == \
        {"id": "o-9", "qty": 1}
    assert RegistryAvroSerde(registry).decode(msg.value(), topic) == {"id": "o-9", "qty": 1}


@pytest.mark.skipif(not os.environ.get("ROCKETKAFKA_TEST_SCHEMA_REGISTRY_URL"),
                    reason="set ROCKETKAFKA_TEST_SCHEMA_REGISTRY_URL to a Schema Registry to run this")
def test_against_an_external_registry(rk_settings, rk_topic):
    registry = SchemaRegistryClient({"url": os.environ["ROCKETKAFKA_TEST_SCHEMA_REGISTRY_URL"]})
    _roundtrip_rocketmq_door(rk_settings, rk_topic(partitions=1), registry)
