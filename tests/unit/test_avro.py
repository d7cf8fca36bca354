"""Avro serde: round trip, schema mismatch and garbage are refused with clear errors."""

from __future__ import annotations

import pytest

from facade.avro import AvroSerde
from facade.errors import MessageError

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
