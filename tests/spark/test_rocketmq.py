"""RocketMQ columns, tag filter, msg-id dedup and Avro bodies on a topic holding duplicates."""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone

import fastavro
import pytest

from rocketkafka.avro import AvroSerde
from rocketkafka.errors import ConfigError, TagExpressionError
from rocketkafka.names import Header
from rocketkafka.spark import dedup_by_msg_id, decode_avro, filter_tags, read_message_stream, read_messages, rocketmq_view
from tests.conftest import crc64_avro
from tests.spark.conftest import Record, run_available_now

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("engine")]  # each test on both reader engines

BORN = 1_700_000_000_000
TAGS = ["TagA", "TagB", "TagC"]


def _message(i: int, partition: int, reconsume: int = 0) -> Record:
    headers = [
        (Header.MSG_ID, f"MSG-{i:04d}".encode()),
        (Header.BORN_TIMESTAMP, str(BORN + i).encode()),
        (Header.TAGS, TAGS[i % 3].encode()),
        (Header.KEYS, f"order-{i} user-{i % 7}".encode()),
        ("region", b"eu"),
        ("region", f"eu-{i % 2}".encode()),  # the last header of a name wins
    ]
    if reconsume:
        headers.append((Header.RECONSUME_TIMES, str(reconsume).encode()))
    stored = BORN + 1000 + i + 500 * reconsume  # a resend is stored later than the original
    return Record(value=b"body-%d" % i, key=b"k%d" % i, partition=partition, headers=headers, timestamp=stored)


@pytest.fixture
def duplicated_topic(rk_topic, produce):
    """300 messages; 60 of them re-sent (same msg id, another partition, as after a producer retry); 5 foreign."""
    topic = rk_topic(partitions=4)
    records = [_message(i, i % 4) for i in range(300)]
    records += [_message(i, (i + 1) % 4, reconsume=1) for i in range(0, 300, 5)]
    records += [Record(value=b"foreign-%d" % i, partition=i % 4) for i in range(5)]  # no headers at all
    produce(topic, records)
    return topic


def test_view_columns_come_from_headers(spark, duplicated_topic, source):
    view = rocketmq_view(read_messages(spark, source(duplicated_topic), includeHeaders=True))
    rows = {r.msg_id: r for r in view.where("reconsume_times = 0").collect()}
    r = rows["MSG-0007"]
    assert (r.topic, r.tags, r.keys, r.body, r.key) == (duplicated_topic, "TagB", ["order-7", "user-0"], b"body-7", b"k7")
    assert r.queue_id == 3 and r.queue_offset >= 0
    assert round(r.born_timestamp.timestamp() * 1000) == BORN + 7  # PySpark returns local naive datetimes
    assert round(r.store_timestamp.timestamp() * 1000) == BORN + 1007
    assert r.properties == {"region": "eu-1"} and r.reconsume_times == 0 and r.deliver_timestamp is None
    foreign = [row for row in rows.values() if row.body.startswith(b"foreign")]
    assert len(foreign) == 5
    for row in foreign:  # like rocketkafka.codec: id = topic@partition@offset, born = store time, no keys/tags
        assert row.msg_id == f"{duplicated_topic}@{row.queue_id}@{row.queue_offset}"
        assert row.born_timestamp == row.store_timestamp and row.keys == [] and row.tags is None
        assert row.properties == {}
    assert view.where("reconsume_times = 1").count() == 60


def test_tag_filter_and_dedup_on_duplicates(spark, duplicated_topic, source):
    raw = read_messages(spark, source(duplicated_topic), includeHeaders=True)
    view = rocketmq_view(raw)
    assert view.count() == 365

    unique = dedup_by_msg_id(view)
    assert unique.count() == 305
    assert unique.where("reconsume_times = 1").count() == 0  # the first copy (earlier store time) is kept

    ab = filter_tags(unique, "TagA || TagB")
    expected = {f"MSG-{i:04d}" for i in range(300) if TAGS[i % 3] in ("TagA", "TagB")}
    assert {r.msg_id for r in ab.select("msg_id").collect()} == expected
    assert filter_tags(unique, "*").count() == 305  # "*" keeps untagged (foreign) messages too
    # the filter also works straight on the Kafka schema, before the view
    assert filter_tags(raw, " TagC ").count() == 100 + 20
    assert dedup_by_msg_id(raw).count() == 305
    with pytest.raises(TagExpressionError):
        filter_tags(view, "TagA ||")
    with pytest.raises(ConfigError, match="includeHeaders"):
        rocketmq_view(read_messages(spark, source(duplicated_topic)))


@pytest.mark.alone  # a stream of ours: Spark's fixed 10 s for its Python worker (conftest)
def test_streaming_dedup_within_watermark(spark, duplicated_topic, source, tmp_path):
    stream = read_message_stream(spark, source(duplicated_topic), startingOffsets="earliest", includeHeaders=True,
                                 maxOffsetsPerTrigger=100)
    deduped = filter_tags(dedup_by_msg_id(rocketmq_view(stream), watermark="1 hour"), "TagA || TagB")
    run_available_now(deduped.select("msg_id").writeStream.format("memory").queryName("dedup_stream")
                      .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True), 300)
    ids = [r.msg_id for r in spark.table("dedup_stream").collect()]
    assert len(ids) == len(set(ids)) == 200  # TagA and TagB, each message once despite 60 resends


SCHEMA = {
    "type": "record", "name": "Order", "namespace": "demo",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "item", "type": "string"},
        {"name": "price", "type": ["null", "double"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    ],
}


def _avro(record: dict) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(SCHEMA), record)
    return buf.getvalue()


def test_avro_bodies_decode_in_arrow_batches(spark, rk_topic, produce, source):
    topic = rk_topic(partitions=2)
    at = datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)
    orders = [{"id": i, "item": f"item-{i}", "price": None if i % 4 == 0 else i * 1.5, "tags": ["a"] * (i % 3),
               "at": at, "status": "PAID" if i % 2 else "NEW"} for i in range(2000)]
    records = [Record(value=_avro(o), partition=i % 2) for i, o in enumerate(orders)]
    records.append(Record(value=None, partition=0))  # a tombstone
    records.append(Record(value=b"\x02\xff\xff\xff", partition=1))  # not an Order: that batch falls back to one by one
    produce(topic, records)
    decoded = decode_avro(rocketmq_view(read_messages(spark, source(topic), includeHeaders=True)), SCHEMA)
    assert decoded.schema["payload"].dataType.simpleString() == (
        "struct<id:bigint,item:string,price:double,tags:array<string>,at:timestamp,status:string>")
    got = {r.payload.id: r.payload for r in decoded.where("payload IS NOT NULL").collect()}
    assert len(got) == 2000 and decoded.where("payload IS NULL").count() == 2
    for o in orders[:50]:
        p = got[o["id"]]
        assert (p.item, p.price, p.tags, p.status) == (o["item"], o["price"], o["tags"], o["status"])
        assert p.at.timestamp() == at.timestamp()

    with pytest.raises(ConfigError, match="union"):
        decode_avro(decoded, {"type": "record", "name": "U", "fields": [{"name": "x", "type": ["int", "string"]}]})

    with pytest.raises(ConfigError, match="framing"):
        decode_avro(decoded, SCHEMA, framing="protobuf")

    framed_topic = rk_topic(partitions=1, suffix="-framed")  # Confluent wire format: magic byte + schema id + datum
    produce(framed_topic, [Record(value=b"\x00\x00\x00\x00\x07" + _avro(o)) for o in orders[:100]])
    framed = decode_avro(read_messages(spark, source(framed_topic)), json.dumps(SCHEMA), framing="confluent")
    assert sorted(r.payload.id for r in framed.collect()) == list(range(100))

    ours_topic = rk_topic(partitions=1, suffix="-serde")  # rocketkafka.avro.AvroSerde bodies: marker + fingerprint
    serde = AvroSerde(SCHEMA)
    other = AvroSerde({"type": "record", "name": "Other", "fields": [{"name": "id", "type": "long"}]})
    produce(ours_topic, [Record(value=serde.encode(o)) for o in orders[:100]] + [Record(value=other.encode({"id": 1}))])
    ours = decode_avro(read_messages(spark, source(ours_topic)), SCHEMA, framing="rocketkafka").collect()
    assert sorted(r.payload.id for r in ours if r.payload) == list(range(100))
    assert sum(r.payload is None for r in ours) == 1  # another schema's fingerprint: null, not garbage




def test_avro_decode_reads_single_object_old_marker_and_confluent_framings(spark, rk_topic, produce, source):
    from fastavro.schema import to_parsing_canonical_form

    small = {"type": "record", "name": "Ping", "namespace": "demo", "fields": [{"name": "id", "type": "long"}]}
    fp = crc64_avro(to_parsing_canonical_form(fastavro.parse_schema(small)).encode()).to_bytes(8, "little")
    other_fp = crc64_avro(b'{"name":"Other","type":"record","fields":[]}').to_bytes(8, "little")

    def datum(i: int) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, fastavro.parse_schema(small), {"id": i})
        return buf.getvalue()

    topic = rk_topic(partitions=1)
    bodies = ([b"\xc3\x01" + fp + datum(i) for i in range(0, 10)]             # Avro single-object encoding
              + [b"\x01" + fp + datum(i) for i in range(10, 20)]              # the old AvroSerde marker framing
              + [b"\x00" + (42).to_bytes(4, "big") + datum(i) for i in range(20, 30)]  # Confluent, schema id 42
              + [b"\xc3\x01" + other_fp + datum(99), b"\x01" + other_fp + datum(98)])  # another schema: null
    produce(topic, [Record(value=b) for b in bodies])
    raw = read_messages(spark, source(topic))

    def ids(framing: str, **kw) -> list[int]:
        return sorted(r.payload.id for r in decode_avro(raw, small, framing=framing, **kw).collect() if r.payload)

    assert ids("single-object") == list(range(10))
    assert ids("rocketkafka") == list(range(20))  # both framings AvroSerde has written
    assert ids("confluent", schema_id=42) == list(range(20, 30)) and ids("confluent", schema_id=7) == []
    assert ids("auto") == list(range(30))
