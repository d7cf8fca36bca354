"""RocketMQ semantics on a Kafka-schema DataFrame: columns from headers, tags, dedup, Avro bodies.

Everything here is Spark SQL expressions (higher-order functions over the
``headers`` array) except the Avro decoder, which runs fastavro over whole Arrow
batches in ``mapInArrow``. The same rules as :mod:`facade.codec` apply: system
properties are ``rk.*`` headers with UTF-8 values, user properties are the other
headers, the last header of a name wins, a record without a message id is
identified as ``topic@partition@offset``, a missing born time is the record time.

>>> view = rocketmq_view(read_messages(spark, opts, includeHeaders=True))  # doctest: +SKIP
>>> filter_tags(view, "TagA || TagB")                                       # doctest: +SKIP
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
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

from facade.errors import ConfigError
from facade.names import HEADER_PREFIX, Header
from facade.tags import TagFilter

#: Columns of :func:`rocketmq_view`, in order.
VIEW_COLUMNS = (
    "topic", "queue_id", "queue_offset", "msg_id", "tags", "keys", "key", "body",
    "born_timestamp", "store_timestamp", "deliver_timestamp", "delay_level", "reconsume_times",
    "properties", "headers",
)


def _require_headers(df: DataFrame) -> None:
    if "headers" not in df.columns:
        raise ConfigError("the DataFrame has no 'headers' column: read the topic with includeHeaders=true")


def header_value(name: str, headers: str | Column = "headers") -> Column:
    """The UTF-8 value of the last header called ``name`` (null when absent)."""
    column = F.col(headers) if isinstance(headers, str) else headers
    matching = F.filter(column, lambda h: h["key"] == F.lit(name))
    return F.try_element_at(matching, F.lit(-1))["value"].cast("string")


def header_long(name: str, headers: str | Column = "headers") -> Column:
    """A header holding a decimal number, as a long (null when absent or not a number)."""
    return header_value(name, headers).try_cast("long")


def user_properties(headers: str | Column = "headers") -> Column:
    """``map<string,string>`` of the user (non ``rk.*``) headers with a value; the last of a name wins."""
    column = F.col(headers) if isinstance(headers, str) else headers
    size = F.size(column)
    last_of_name = F.filter(
        column,
        lambda h, i: (~h["key"].startswith(HEADER_PREFIX)) & h["value"].isNotNull()
        & ~F.exists(F.slice(column, i + 2, F.greatest(size, F.lit(1))), lambda later: later["key"] == h["key"]),
    )
    entries = F.transform(last_of_name, lambda h: F.struct(h["key"].alias("key"), h["value"].cast("string").alias("value")))
    return F.coalesce(F.map_from_entries(entries), F.create_map().cast("map<string,string>"))


def message_id(df: DataFrame) -> Column:
    """RocketMQ message id: ``msg_id`` / the ``rk.UNIQ_KEY`` header, else ``topic@partition@offset``."""
    if "msg_id" in df.columns:
        return F.col("msg_id")
    fallback = F.concat_ws("@", F.col("topic"), F.col("partition").cast("string"), F.col("offset").cast("string"))
    return F.coalesce(header_value(Header.MSG_ID), fallback) if "headers" in df.columns else fallback


def rocketmq_view(df: DataFrame) -> DataFrame:
    """RocketMQ message columns (:data:`VIEW_COLUMNS`) from a Kafka-schema DataFrame with headers.

    ``keys`` is an array (RocketMQ's space-separated KEYS), ``key`` the Kafka record
    key, ``store_timestamp`` the record timestamp, ``deliver_timestamp`` the
    DELIVER_AT header, ``delay_level`` the DELAY header; batch and streaming alike.
    """
    _require_headers(df)
    keys_text = F.trim(header_value(Header.KEYS))
    born_ms = header_long(Header.BORN_TIMESTAMP)
    return df.select(
        F.col("topic"),
        F.col("partition").alias("queue_id"),
        F.col("offset").alias("queue_offset"),
        message_id(df).alias("msg_id"),
        header_value(Header.TAGS).alias("tags"),
        F.when(F.length(keys_text) > 0, F.split(keys_text, r"\s+")).otherwise(F.array().cast("array<string>")).alias("keys"),
        F.col("key"),
        F.col("value").alias("body"),
        F.coalesce(F.timestamp_millis(born_ms), F.col("timestamp")).alias("born_timestamp"),
        F.col("timestamp").alias("store_timestamp"),
        F.timestamp_millis(header_long(Header.DELIVER_AT)).alias("deliver_timestamp"),
        header_long(Header.DELAY_LEVEL).cast("int").alias("delay_level"),
        F.coalesce(header_long(Header.RECONSUME_TIMES).cast("int"), F.lit(0)).alias("reconsume_times"),
        user_properties().alias("properties"),
        F.col("headers"),
    )


def filter_tags(df: DataFrame, expression: str | None) -> DataFrame:
    """Rows whose tag matches a subscription expression (``"*"``, ``"TagA || TagB"``).

    Works on the view (``tags`` column) or on the Kafka schema (``headers``).

    Raises:
        TagExpressionError: the expression does not parse (at the call, before any job).
    """
    parsed = TagFilter.parse(expression)
    if parsed.tags is None:
        return df
    if "tags" in df.columns:
        tag = F.col("tags")
    else:
        _require_headers(df)
        tag = header_value(Header.TAGS)
    return df.where(tag.isin(sorted(parsed.tags)))


def dedup_by_msg_id(df: DataFrame, watermark: str = "10 minutes", event_time: str | None = None) -> DataFrame:
    """One row per message id.

    Batch: the first copy in (event time, topic, partition, offset) order is kept.
    Streaming: ``dropDuplicatesWithinWatermark`` on the id, with a watermark of
    ``watermark`` on ``event_time`` (default ``store_timestamp`` or ``timestamp``):
    copies arriving further apart than the watermark are not recognised.
    """
    time_column = event_time or ("store_timestamp" if "store_timestamp" in df.columns else "timestamp")
    partition_column = "queue_id" if "queue_id" in df.columns else "partition"
    offset_column = "queue_offset" if "queue_offset" in df.columns else "offset"
    with_id = df.withColumn("_rk_dedup_id", message_id(df))
    if df.isStreaming:
        return (with_id.withWatermark(time_column, watermark)
                .dropDuplicatesWithinWatermark(["_rk_dedup_id"]).drop("_rk_dedup_id"))
    order = Window.partitionBy("_rk_dedup_id").orderBy(time_column, "topic", partition_column, offset_column)
    return with_id.withColumn("_rk_dedup_n", F.row_number().over(order)).where("_rk_dedup_n = 1").drop(
        "_rk_dedup_id", "_rk_dedup_n")


# -- Avro bodies ---------------------------------------------------------------------------
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


#: Body framings :func:`decode_avro` understands: bytes before the Avro datum.
AVRO_FRAMINGS = ("none", "confluent", "rocketkafka")


class AvroBatchDecoder:
    """Decode a binary Arrow column of schemaless Avro datums into a struct column.

    The datums of a batch are laid end to end as one block of an in-memory Avro
    object container file, so fastavro's compiled reader loops over them; only a
    batch that fails to decode as a block is decoded datum by datum (bad ones
    become null).

    Framings: ``none`` (bare datum), ``confluent`` (Confluent's magic byte + 4-byte
    schema id, not checked), ``rocketkafka`` (:class:`facade.avro.AvroSerde`'s marker
    + CRC-64-AVRO fingerprint of ``schema``; a body with another fingerprint is null).
    """

    _SYNC = b"rocketkafka-sync"  # 16 bytes

    def __init__(self, schema: dict | str, framing: str = "none") -> None:
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
        self.prefix = b""  # bytes every body must start with (checked)
        self.skip = 0  # bytes before the datum
        if framing == "confluent":
            self.skip = 5
        elif framing == "rocketkafka":
            from facade.avro import AvroSerde

            serde = AvroSerde(self.schema)
            self.prefix = serde.prefix  # marker + fingerprint
            self.skip = len(self.prefix)
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
        mask = column.is_valid().to_numpy(zero_copy_only=False)
        if self.skip:
            mask &= self._framed(column)
        present = column if mask.all() else column.filter(pa.array(mask))
        decoded = pa.array(self._decode_present(present), type=self.arrow_type)
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

    def _framed(self, column: pa.Array) -> np.ndarray:
        """Rows long enough for the framing whose first bytes are the expected prefix."""
        offsets, data = self._layout(column)
        long_enough = np.diff(offsets) >= self.skip
        if not self.prefix or not long_enough.any():
            return long_enough
        starts = offsets[:-1][long_enough].astype(np.int64)
        heads = data[starts[:, None] + np.arange(len(self.prefix))]
        ok = long_enough.copy()
        ok[long_enough] = (heads == np.frombuffer(self.prefix, dtype=np.uint8)).all(axis=1)
        return ok

    def _decode_present(self, present: pa.Array) -> list:
        n = len(present)
        if n == 0:
            return []
        offsets, data = self._layout(present)
        raw = data[int(offsets[0]):int(offsets[-1])]
        if self.skip:  # drop each datum's framing bytes
            keep = np.ones(len(raw), dtype=bool)
            starts = (offsets[:-1] - offsets[0]).astype(np.int64)
            keep[(starts[:, None] + np.arange(self.skip)).ravel()] = False
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
        for body in present.to_pylist():
            try:
                out.append(self._fastavro.schemaless_reader(io.BytesIO(body[self.skip:]), self.parsed, None))
            except Exception:  # noqa: BLE001 - a garbled datum decodes to null
                out.append(None)
        return out


def decode_avro(df: DataFrame, schema: dict | str, column: str | None = None, output: str = "payload",
                framing: str = "none") -> DataFrame:
    """Add ``output``: the Avro datum in ``column`` (``body`` or ``value``) decoded with ``schema``.

    Parameters:
        schema: the writer's Avro schema (dict or JSON text).
        column: the binary column; default ``body`` if present, else ``value``.
        output: name of the new struct column (null where a body does not decode).
        framing: ``none``, ``confluent`` or ``rocketkafka`` (see :class:`AvroBatchDecoder`).

    Raises:
        ConfigError: a bad schema, a schema without a Spark type, an unknown framing or column.
    """
    column = column or ("body" if "body" in df.columns else "value")
    if column not in df.columns:
        raise ConfigError(f"no column {column!r} to decode")
    decoder = AvroBatchDecoder(schema, framing)  # checks the schema on the driver
    out_schema = StructType([*df.schema.fields, StructField(output, decoder.spark_type, True)])
    index = df.columns.index(column)
    schema_json = json.dumps(decoder.schema)

    def decode_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        worker_decoder = AvroBatchDecoder(schema_json, framing)
        for batch in batches:
            decoded = worker_decoder.decode(batch.column(index))
            yield pa.RecordBatch.from_arrays([*batch.columns, decoded], names=[*batch.schema.names, output])

    return df.mapInArrow(decode_batches, out_schema)
