"""Avro serde: round trip, schema mismatch and garbage are refused with clear errors."""

from __future__ import annotations

import pytest

from rocketkafka.avro import AvroSerde
from rocketkafka.errors import MessageError
from tests.conftest import crc64_avro

ORDER = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}, {"name": "qty", "type": "int"}]}
OTHER = {"type": "record", "name": "Other", "fields": [{"name": "id", "type": "string"}]}


def test_round_trip():
    serde = AvroSerde(ORDER)
    assert serde.decode(serde.encode({"id": "o-1", "qty": 3})) == {"id": "o-1", "qty": 3}


def test_refuses_other_schema_and_garbage_and_bad_records():
    serde = AvroSerde(ORDER)
    with pytest.raises(MessageError, match="not Avro of schema"):
        serde.decode(AvroSerde(OTHER).encode({"id": "x"}))
    with pytest.raises(MessageError, match="garbled"):
        serde.decode(serde.encode({"id": "o", "qty": 1})[:10])
    with pytest.raises(MessageError, match="does not match"):
        serde.encode({"id": "o"})
    with pytest.raises(MessageError, match="invalid Avro schema"):
        AvroSerde({"type": "record", "name": "X", "fields": [{"name": "a", "type": "nope"}]})


# -- Avro's single-object encoding (the spec), and the framing of earlier versions ----------------------------


def test_bodies_are_avros_single_object_encoding():
    import io

    import fastavro

    serde = AvroSerde(ORDER)
    body = serde.encode({"id": "o-1", "qty": 3})
    canonical = '{"name":"Order","type":"record","fields":[{"name":"id","type":"string"},{"name":"qty","type":"int"}]}'
    assert body[:2] == b"\xc3\x01"
    assert body[2:10] == crc64_avro(canonical.encode()).to_bytes(8, "little")
    assert fastavro.schemaless_reader(io.BytesIO(body[10:]), fastavro.parse_schema(ORDER)) == {"id": "o-1", "qty": 3}


def test_bodies_of_earlier_versions_are_still_read():
    serde = AvroSerde(ORDER)
    old = b"\x01" + serde.fingerprint + serde.encode({"id": "o-1", "qty": 3})[10:]
    assert serde.decode(old) == {"id": "o-1", "qty": 3}


# -- Confluent Schema Registry's wire format through confluent_kafka.schema_registry (its mock:// registry) ----
def test_registry_serde_writes_confluent_framing_that_confluents_deserializer_reads():
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from rocketkafka.avro import RegistryAvroSerde

    registry = SchemaRegistryClient.new_client({"url": "mock://unit-avro"})
    serde = RegistryAvroSerde(registry, ORDER)
    body = serde.encode({"id": "o-1", "qty": 3}, "orders")
    schema_id = registry.get_latest_version("orders-value").schema_id
    assert body[0] == 0 and int.from_bytes(body[1:5], "big") == schema_id  # magic byte, big-endian schema id
    ctx = SerializationContext("orders", MessageField.VALUE)
    assert AvroDeserializer(registry)(body, ctx) == {"id": "o-1", "qty": 3}
    theirs = AvroSerializer(registry, '{"type": "record", "name": "Order", "fields": [{"name": "id", "type": '
                                      '"string"}, {"name": "qty", "type": "int"}]}')({"id": "o-2", "qty": 1}, ctx)
    assert RegistryAvroSerde(registry).decode(theirs, "orders") == {"id": "o-2", "qty": 1}
    with pytest.raises(MessageError):
        serde.encode({"id": "o"}, "orders")
    with pytest.raises(MessageError):
        serde.decode(b"\x00\x00\x00\x03\xe7garbage", "orders")


def test_registry_serde_takes_a_url():
    from rocketkafka.avro import RegistryAvroSerde

    serde = RegistryAvroSerde("mock://unit-avro-url", ORDER)
    assert serde.decode(serde.encode({"id": "x", "qty": 0}, "t"), "t") == {"id": "x", "qty": 0}
