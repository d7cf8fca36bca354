"""Avro (fastavro) serdes: the body format of internal records, and an optional payload serde.

Bodies are schemaless Avro (no container header) behind a one-byte format marker and
the schema's 8-byte CRC-64-AVRO fingerprint, so a reader can refuse a body written
with another schema instead of misreading it.

>>> serde = AvroSerde({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]})
>>> serde.decode(serde.encode({"id": "o-1"}))
{'id': 'o-1'}
"""

from __future__ import annotations

import io
from typing import Any

import fastavro
from fastavro.schema import fingerprint, to_parsing_canonical_form

from facade.errors import MessageError

_MAGIC = b"\x01"


class AvroSerde:
    """Encode and decode one Avro schema's records to and from message bodies.

    Parameters:
        schema: an Avro schema as a dict (parsed once here; a bad schema raises at construction).
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        try:
            self.schema = fastavro.parse_schema(schema)
        except Exception as exc:  # fastavro raises several types for bad schemas
            raise MessageError(f"invalid Avro schema: {exc}") from exc
        self.fingerprint = bytes.fromhex(fingerprint(to_parsing_canonical_form(self.schema), "CRC-64-AVRO"))
        self.prefix = _MAGIC + self.fingerprint  # every body starts with it

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
        if body[:9] != self.prefix:
            raise MessageError(f"body is not Avro of schema {self.schema.get('name')!r} (marker or fingerprint differs)")
        try:
            return fastavro.schemaless_reader(io.BytesIO(body[9:]), self.schema, self.schema)
        except (EOFError, ValueError, TypeError, StopIteration) as exc:
            raise MessageError(f"garbled Avro body: {exc}") from exc
