"""Avro (fastavro) serdes for message bodies, in the two framings other tools read.

- :class:`AvroSerde`: Avro's single-object encoding (the spec's framing): ``C3 01``, the
  writer schema's 8-byte little-endian CRC-64-AVRO fingerprint, the schemaless datum. Any
  Avro library's single-object decoder (Java's ``BinaryMessageDecoder``...) reads it, and a
  reader refuses a body written with another schema instead of misreading it. Bodies of
  earlier rocketkafka versions (``01`` + the same fingerprint) are still read.
- :class:`RegistryAvroSerde`: Confluent Schema Registry's wire format (``00``, 4-byte schema
  id, datum) through ``confluent_kafka.schema_registry``'s own Avro serializer and
  deserializer, so a registry-based consumer (confluent-kafka, the Java clients, Spark's
  ``from_avro`` after the 5-byte header, :func:`rocketkafka.spark.decode_avro`) reads what either
  door sends. On the Kafka door the same serializer objects work as in confluent-kafka.

>>> serde = AvroSerde({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]})
>>> serde.decode(serde.encode({"id": "o-1"}))
{'id': 'o-1'}
"""

from __future__ import annotations

import io
from typing import Any

import fastavro
from fastavro.schema import fingerprint, to_parsing_canonical_form

from rocketkafka.errors import MessageError

#: Avro's single-object encoding marker.
SINGLE_OBJECT_MARKER = b"\xc3\x01"
#: The marker of earlier rocketkafka versions' framing (read, never written).
_OLD_MARKER = b"\x01"


class AvroSerde:
    """Encode and decode one Avro schema's records to and from message bodies (single-object encoding).

    Parameters:
        schema: an Avro schema as a dict (parsed once here; a bad schema raises at construction).
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        try:
            parsed = fastavro.parse_schema(schema)
        except Exception as exc:  # fastavro raises several types for bad schemas
            raise MessageError(f"invalid Avro schema: {exc}") from exc
        # fastavro gives the fingerprint's bytes little-endian, as the spec's single-object encoding wants
        assert isinstance(parsed, dict)  # fastavro parses a dict schema into a dict
        self.schema: dict[str, Any] = parsed
        self.fingerprint = bytes.fromhex(fingerprint(to_parsing_canonical_form(self.schema), "CRC-64-AVRO"))
        self.prefix = SINGLE_OBJECT_MARKER + self.fingerprint  # every body starts with it
        self._old_prefix = _OLD_MARKER + self.fingerprint

    def encode(self, record: dict[str, Any]) -> bytes:
        """The body for ``record``; :class:`MessageError` when it does not fit the schema."""
        out = io.BytesIO()
        out.write(self.prefix)
        try:
            fastavro.schemaless_writer(out, self.schema, record, strict=True)
        except (ValueError, TypeError, KeyError) as exc:
            raise MessageError(f"record does not match Avro schema {self.schema.get('name')!r}: {exc}") from exc
        return out.getvalue()

    def decode(self, body: bytes) -> dict[str, Any]:
        """The record in ``body``; :class:`MessageError` when it was written with another schema or is garbled."""
        if body[:10] == self.prefix:
            start = 10
        elif body[:9] == self._old_prefix:
            start = 9
        else:
            raise MessageError(f"body is not Avro of schema {self.schema.get('name')!r} (marker or fingerprint differs)")
        try:
            record = fastavro.schemaless_reader(io.BytesIO(body[start:]), self.schema, self.schema)
        except (EOFError, ValueError, TypeError, StopIteration) as exc:
            raise MessageError(f"garbled Avro body: {exc}") from exc
        assert isinstance(record, dict)  # only encode() (a dict, strictly checked) writes bodies of this fingerprint
        return record


class RegistryAvroSerde:
    """Bodies in Confluent Schema Registry's wire format, by ``confluent_kafka.schema_registry.avro``.

    Parameters:
        registry: a ``SchemaRegistryClient``, or its URL (``"mock://name"`` is that library's
            in-memory registry, for tests), or its config dict.
        schema: the writer schema (Avro JSON text or a dict); ``None`` to only decode.
        serializer_conf / deserializer_conf: the serializer's and deserializer's own settings
            (``auto.register.schemas``, ``use.latest.version``, subject name strategy...).
        to_dict / from_dict: as the serializer's and deserializer's callables.

    The subject is the serializer's (``<topic>-value`` by default), so records sent through
    either door register and resolve exactly as confluent-kafka's ``AvroSerializer`` would.

    >>> serde = RegistryAvroSerde("mock://orders", ORDER_SCHEMA)           # doctest: +SKIP
    >>> producer.send_sync(Message("orders", body=serde.encode({"id": "o-1"}, "orders")))
    >>> serde.decode(msg.body, msg.topic)
    """

    def __init__(self, registry: Any, schema: str | dict[str, Any] | None = None, *,
                 serializer_conf: dict[str, Any] | None = None, deserializer_conf: dict[str, Any] | None = None,
                 to_dict: Any = None, from_dict: Any = None) -> None:
        import json

        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

        if isinstance(registry, str):
            registry = {"url": registry}
        if isinstance(registry, dict):
            registry = SchemaRegistryClient.new_client(registry)  # mock:// -> the library's in-memory registry
        self.registry = registry
        text = json.dumps(schema) if isinstance(schema, dict) else schema
        self.serializer = AvroSerializer(registry, text, to_dict=to_dict, conf=serializer_conf) if text is not None else None
        self.deserializer = AvroDeserializer(registry, text, from_dict=from_dict, conf=deserializer_conf)

    def encode(self, record: Any, topic: str) -> bytes:
        """The body for ``record`` sent to ``topic`` (registers the schema under the topic's subject).

        Raises:
            MessageError: the record does not fit the schema, or the serde has no writer schema.
        """
        from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError

        if self.serializer is None:
            raise MessageError("this RegistryAvroSerde has no writer schema: pass schema= to encode")
        try:
            return self.serializer(record, SerializationContext(topic, MessageField.VALUE))
        except (SerializationError, ValueError, TypeError, KeyError) as exc:
            raise MessageError(f"record does not fit the Avro schema of {topic!r}: {exc}") from exc

    def decode(self, body: bytes, topic: str) -> Any:
        """The record in ``body`` (read with the writer schema the registry holds for its id)."""
        from confluent_kafka.schema_registry.error import SchemaRegistryError
        from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError

        try:
            return self.deserializer(body, SerializationContext(topic, MessageField.VALUE))
        except (SerializationError, SchemaRegistryError, ValueError, TypeError, EOFError) as exc:
            raise MessageError(f"body on {topic!r} is not registry-framed Avro: {exc}") from exc
