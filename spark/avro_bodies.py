"""Avro bodies decoded in Spark: ``decode_avro`` runs fastavro over whole Arrow batches in ``mapInArrow``.

Body framings (bytes before the Avro datum) :func:`decode_avro` reads:

- ``none``: the bare datum;
- ``single-object``: Avro's single-object encoding (the spec's framing): ``C3 01``, the
  8-byte little-endian CRC-64-AVRO fingerprint of the writer schema, the datum;
- ``rocketkafka``: what :class:`rocketkafka.avro.AvroSerde` writes: the single-object
  encoding, or the marker framing of earlier versions (``01`` + the same 8-byte fingerprint);
  both are read;
- ``confluent``: Confluent Schema Registry's wire format (``00``, a 4-byte big-endian
  schema id, the datum) for the given writer schema (``schema_id`` checks the id);
- ``auto``: each body by its first bytes: single-object, the old marker or Confluent.

A framed body whose fingerprint (or schema id) is not the schema's decodes to null,
never to garbage read with the wrong schema.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from rocketkafka.errors import ConfigError

_PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
    "double": DoubleType(), "bytes": BinaryType(), "string": StringType(),
}


def _name(schema: dict, named: dict[str, DataType], spark_type: DataType) -> DataType:
    name = schema["name"]
    named[name] = spark_type
    if "." not in name and schema.get("namespace"):
        named[f"{schema['namespace']}.{name}"] = spark_type
    named[name.rsplit(".", 1)[-1]] = spark_type
    return spark_type


def avro_spark_type(schema: Any, named: dict[str, DataType] | None = None) -> DataType:
    """The Spark type of an Avro schema (records, enums, fixed, arrays, maps, nullable unions, logical types).

    Raises:
        ConfigError: a construct without a Spark equivalent (general unions, time logical types, recursion).
    """
    named = {} if named is None else named
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        if schema in named:
            return named[schema]
        raise ConfigError(f"Avro type {schema!r} is unknown or recursive (recursive types have no Spark type)")
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise ConfigError(f"Avro union {schema!r} has no Spark type (only [\"null\", T] unions are supported)")
        return avro_spark_type(branches[0], named)
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical in ("timestamp-millis", "timestamp-micros"):
        return TimestampType()
    if logical == "date":
        return DateType()
    if logical == "decimal":
        return DecimalType(int(schema["precision"]), int(schema.get("scale", 0)))
    if logical in ("time-millis", "time-micros", "local-timestamp-millis", "local-timestamp-micros"):
        raise ConfigError(f"Avro logical type {logical!r} is not supported")
    if kind == "record":
        struct = StructType([StructField(f["name"], avro_spark_type(f["type"], named), nullable=True)
                             for f in schema["fields"]])
        _name(schema, named, struct)
        return struct
    if kind == "enum":
        return _name(schema, named, StringType())
    if kind == "fixed":
        return _name(schema, named, BinaryType())
    if kind == "array":
        return ArrayType(avro_spark_type(schema["items"], named))
    if kind == "map":
        return MapType(StringType(), avro_spark_type(schema["values"], named))
    if kind in _PRIMITIVES or isinstance(kind, (dict, list)):
        return avro_spark_type(kind, named)
    raise ConfigError(f"Avro schema {schema!r} is not supported")


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


#: Body framings :func:`decode_avro` understands (see the module docstring).
AVRO_FRAMINGS = ("none", "single-object", "rocketkafka", "confluent", "auto")
#: Avro single-object encoding's marker.
SINGLE_OBJECT_MARKER = b"\xc3\x01"
#: The marker of rocketkafka's earlier AvroSerde framing (``01`` + fingerprint).
OLD_MARKER = b"\x01"
#: Confluent's wire-format magic byte (then a 4-byte big-endian schema id).
CONFLUENT_MAGIC = b"\x00"


def schema_fingerprint(parsed: Any) -> bytes:
    """The CRC-64-AVRO (Rabin) fingerprint of a parsed schema's canonical form, little-endian (8 bytes)."""
    from fastavro.schema import fingerprint, to_parsing_canonical_form

    return bytes.fromhex(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"))


class AvroBatchDecoder:
    """Decode a binary Arrow column of (framed) Avro datums into a struct column.

    The datums of a batch, framing bytes cut out, are laid end to end as one block
    of an in-memory Avro object container file, so fastavro's compiled reader loops
    over them; only a batch that fails to decode as a block is decoded datum by
    datum (bad ones become null).
    """

    _SYNC = b"rocketkafka-sync"  # 16 bytes

    def __init__(self, schema: dict | str, framing: str = "none", schema_id: int | None = None) -> None:
        import fastavro

        if framing not in AVRO_FRAMINGS:
            raise ConfigError(f"Avro framing {framing!r}: use one of {', '.join(AVRO_FRAMINGS)}")
        self._fastavro = fastavro
        self.schema = json.loads(schema) if isinstance(schema, str) else schema
        try:
            self.parsed = fastavro.parse_schema(self.schema)
        except Exception as exc:  # noqa: BLE001 - fastavro raises several types for bad schemas
            raise ConfigError(f"invalid Avro schema: {exc}") from exc
        self.framing = framing
        self.schema_id = schema_id
        fp = schema_fingerprint(self.parsed)
        # (prefix every body of that kind starts with, datum offset); checked in this order
        heads: list[tuple[bytes, int]] = []
        if framing in ("single-object", "rocketkafka", "auto"):
            heads.append((SINGLE_OBJECT_MARKER + fp, 10))
        if framing in ("rocketkafka", "auto"):
            heads.append((OLD_MARKER + fp, 9))
        if framing in ("confluent", "auto"):
            heads.append((CONFLUENT_MAGIC + (schema_id.to_bytes(4, "big") if schema_id is not None else b""), 5))
        self.heads = heads
        header = io.BytesIO()
        fastavro.writer(header, self.parsed, [], sync_marker=self._SYNC)
        self._header = header.getvalue()
        from pyspark.sql.pandas.types import to_arrow_type

        self.spark_type = avro_spark_type(self.schema)
        self.arrow_type = to_arrow_type(self.spark_type, timezone="UTC")

    def decode(self, column: pa.Array) -> pa.Array:
        """Decoded values of ``column`` (null where the body is null, badly framed or does not decode)."""
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if column.type != pa.binary():
            column = column.cast(pa.binary())
        skips = self._skips(column)
        mask = column.is_valid().to_numpy(zero_copy_only=False) & (skips >= 0)
        present = column if mask.all() else column.filter(pa.array(mask))
        decoded = pa.array(self._decode_present(present, skips[mask]), type=self.arrow_type)
        if mask.all():
            return decoded
        positions = np.cumsum(mask) - 1
        return decoded.take(pa.array(positions, mask=~mask, type=pa.int64()))

    @staticmethod
    def _layout(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """Value offsets (n + 1) and the data bytes of a binary array."""
        n = len(column)
        offsets = np.frombuffer(column.buffers()[1], dtype=np.int32)[column.offset:column.offset + n + 1]
        data = column.buffers()[2]
        return offsets, (np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8))

    def _skips(self, column: pa.Array) -> np.ndarray:
        """Per row: the framing bytes before the datum, or -1 for a body no accepted framing fits."""
        n = len(column)
        if not self.heads:
            return np.zeros(n, dtype=np.int64)
        offsets, data = self._layout(column)
        lengths = np.diff(offsets)
        starts = offsets[:-1].astype(np.int64)
        skips = np.full(n, -1, dtype=np.int64)
        for prefix, skip in self.heads:
            candidates = (skips < 0) & (lengths >= max(skip, len(prefix)))
            if not candidates.any():
                continue
            heads = data[starts[candidates][:, None] + np.arange(len(prefix))]
            fits = (heads == np.frombuffer(prefix, dtype=np.uint8)).all(axis=1)
            chosen = np.flatnonzero(candidates)[fits]
            skips[chosen] = skip
        return skips

    def _decode_present(self, present: pa.Array, skips: np.ndarray) -> list:
        n = len(present)
        if n == 0:
            return []
        offsets, data = self._layout(present)
        raw = data[int(offsets[0]):int(offsets[-1])]
        if skips.any():  # cut each datum's framing bytes out
            keep = np.ones(len(raw), dtype=bool)
            starts = (offsets[:-1] - offsets[0]).astype(np.int64)
            cut = np.repeat(starts, skips) + (np.arange(int(skips.sum())) - np.repeat(np.cumsum(skips) - skips, skips))
            keep[cut] = False
            raw = raw[keep]
        payload = raw.tobytes()
        block = self._header + _zigzag(n) + _zigzag(len(payload)) + payload + self._SYNC
        try:
            records = list(self._fastavro.reader(io.BytesIO(block)))
            if len(records) == n:
                return records
        except Exception:  # noqa: BLE001 - some datum is malformed: decode one by one
            pass
        out = []
        for body, skip in zip(present.to_pylist(), skips.tolist()):
            try:
                out.append(self._fastavro.schemaless_reader(io.BytesIO(body[skip:]), self.parsed, None))
            except Exception:  # noqa: BLE001 - a garbled datum decodes to null
                out.append(None)
        return out


def decode_avro(df: DataFrame, schema: dict | str, column: str | None = None, output: str = "payload",
                framing: str = "none", schema_id: int | None = None) -> DataFrame:
    """Add ``output``: the Avro datum in ``column`` (``body`` or ``value``) decoded with ``schema``.

    Parameters:
        schema: the writer's Avro schema (dict or JSON text).
        column: the binary column; default ``body`` if present, else ``value``.
        output: name of the new struct column (null where a body does not decode).
        framing: ``none``, ``single-object``, ``rocketkafka`` (single-object or the old marker),
            ``confluent`` or ``auto`` (see the module docstring).
        schema_id: with ``confluent`` / ``auto``: the registry id the bodies must carry (default: any).

    Raises:
        ConfigError: a bad schema, a schema without a Spark type, an unknown framing or column.
    """
    column = column or ("body" if "body" in df.columns else "value")
    if column not in df.columns:
        raise ConfigError(f"no column {column!r} to decode")
    decoder = AvroBatchDecoder(schema, framing, schema_id)  # checks the schema on the driver
    out_schema = StructType([*df.schema.fields, StructField(output, decoder.spark_type, True)])
    index = df.columns.index(column)
    schema_json = json.dumps(decoder.schema)

    def decode_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        worker_decoder = AvroBatchDecoder(schema_json, framing, schema_id)
        for batch in batches:
            decoded = worker_decoder.decode(batch.column(index))
            yield pa.RecordBatch.from_arrays([*batch.columns, decoded], names=[*batch.schema.names, output])

    return df.mapInArrow(decode_batches, out_schema)
