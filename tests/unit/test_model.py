"""Pure logic of the message model: ids, hashing, tags, validation, the header codec."""

from __future__ import annotations

import pytest

from rocketkafka.codec import encode_headers
from rocketkafka.errors import MalformedRecordError
from rocketkafka.message import MessageExt
from rocketkafka.errors import MessageError, SelectorError, TagExpressionError
from rocketkafka.message import Message
from rocketkafka.msgid import msg_id_timestamp_ms, new_msg_id
from rocketkafka.murmur2 import murmur2, murmur2_partition
from rocketkafka.names import Header, TopicNames, is_valid_topic_name
from rocketkafka.queue_selectors import hash_selector, select_partition
from rocketkafka.tags import TagFilter


class FakeRecord:
    """A stand-in for confluent_kafka.Message (unit tests of pure decoding only)."""

    def __init__(self, value=b"v", key=None, headers=None, topic="t", partition=3, offset=42, ts=1_700_000_000_000):
        self._v, self._k, self._h, self._t, self._p, self._o, self._ts = value, key, headers, topic, partition, offset, ts

    def value(self): return self._v
    def key(self): return self._k
    def headers(self): return self._h
    def topic(self): return self._t
    def partition(self): return self._p
    def offset(self): return self._o
    def timestamp(self): return (1, self._ts)


@pytest.mark.parametrize("text,expected", [
    ("21", -973932308), ("foobar", -790332482), ("a-little-bit-long-string", -985981536),
    ("a-little-bit-longer-string", -1486304829), ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    ("abc", 479470107),
])
def test_murmur2_matches_kafka_utils_test_vectors(text, expected):
    assert murmur2(text.encode()) == expected


def test_hash_selector_is_kafka_default_partitioner():
    msg = Message("t", b"x")
    for key in ("order-1", "order-2", "42"):
        assert hash_selector(8, msg, key) == murmur2_partition(key.encode(), 8)


def test_msg_ids_are_unique_and_sorted_in_one_process():
    ids = [new_msg_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    assert all(len(i) == 32 for i in ids)
    assert abs(msg_id_timestamp_ms(ids[0]) - msg_id_timestamp_ms(ids[-1])) < 5_000


@pytest.mark.parametrize("expr,tag,ok", [("*", "X", True), (None, None, True), ("A || B", "B", True),
                                         ("A || B", "C", False), ("A", None, False), (" A ||B ", "A", True)])
def test_tag_filter(expr, tag, ok):
    assert TagFilter.parse(expr).matches(tag) is ok


@pytest.mark.parametrize("expr", ["A ||", "|| A", "A | B", "A || || B", "A*", "two words"])
def test_bad_tag_expressions_raise(expr):
    with pytest.raises(TagExpressionError, match="bad tag expression"):
        TagFilter.parse(expr)


@pytest.mark.parametrize("kwargs,match", [
    ({"body": 3.5}, "body must be bytes"),  # a str is sent as UTF-8, as by rocketmq-client-python
    ({"tags": "A || B"}, "one non-empty tag"),
    ({"properties": {"rk.TAGS": "x"}}, "reserved prefix"),
    ({"properties": {"n": 1}}, "must be strings"),
    ({"delay_time_level": -1}, "delay_time_level"),
])
def test_message_validation_names_the_problem(kwargs, match):
    with pytest.raises(MessageError, match=match):
        Message("t", **kwargs).validate()


def test_selector_result_is_checked():
    msg = Message("t", b"x")
    for bad in (8, -1, "1", None, True):
        with pytest.raises(SelectorError, match="returned"):
            select_partition(lambda n, m, a, bad=bad: bad, 8, msg, None)
    assert select_partition(lambda n, m, a: 7, 8, msg, None) == 7


def test_codec_round_trip():
    msg = Message("t", b"body", tags="TagA", keys=["k1", "k2"], properties={"region": "eu"})
    headers = encode_headers(msg, "ID1", 123, {Header.RECONSUME_TIMES: "2"})
    ext = MessageExt.of(FakeRecord(b"body", b"k1", headers)).decode()
    assert (ext.id, ext.tags, ext.keys, ext.key_list, ext.properties) == ("ID1", "TagA", "k1 k2", ["k1", "k2"], {"region": "eu"})
    assert (ext.reconsume_times, ext.born_timestamp, ext.queue_id, ext.queue_offset) == (2, 123, 3, 42)


def test_foreign_record_gets_a_stable_id_and_garbled_headers_raise():
    ext = MessageExt.of(FakeRecord(headers=None)).decode()
    assert ext.id == "t@3@42" and ext.tags is None and ext.properties == {}
    with pytest.raises(MalformedRecordError, match="bad system header"):
        MessageExt.of(FakeRecord(headers=[(Header.TAGS, b"\xff\xfe")])).decode()
    with pytest.raises(MalformedRecordError):
        MessageExt.of(FakeRecord(headers=[(Header.RECONSUME_TIMES, b"many")])).decode()


def test_internal_topic_names_are_legal_kafka_names():
    names = TopicNames("rk")
    for name in (names.retry("my group/1"), names.dead_letter("g"), names.delay_level(3), names.half(), names.op(),
                 names.check_request("pg"), names.max_check()):
        assert is_valid_topic_name(name), name
    assert names.retry("my group/1") == "rk.retry.my_20_group_2f_1--bkgt7d74xjf4"  # escaped + hash: injective
    assert names.retry("orders") == "rk.retry.orders"  # names of Kafka's alphabet keep their spelling
