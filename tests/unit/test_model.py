"""Pure logic of the message model: ids, hashing, tags, validation, the header codec."""

from __future__ import annotations

import pytest

from facade.codec import MalformedRecordError, decode, encode_headers
from facade.errors import MessageError, SelectorError, TagExpressionError
from facade.message import Message
from facade.msgid import msg_id_timestamp_ms, new_msg_id
from facade.murmur2 import murmur2, murmur2_partition
from facade.names import Header, TopicNames, is_valid_topic_name
from facade.selectors import hash_selector, select_partition
from facade.tags import TagFilter


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
    ({"body": "text"}, "body must be bytes"),
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
    ext = decode(FakeRecord(b"body", b"k1", headers))
    assert (ext.id, ext.tags, ext.keys, ext.key_list, ext.properties) == ("ID1", "TagA", "k1 k2", ["k1", "k2"], {"region": "eu"})
    assert (ext.reconsume_times, ext.born_timestamp, ext.queue_id, ext.queue_offset) == (2, 123, 3, 42)


def test_foreign_record_gets_a_stable_id_and_garbled_headers_raise():
    ext = decode(FakeRecord(headers=None))
    assert ext.id == "t@3@42" and ext.tags is None and ext.properties == {}
    with pytest.raises(MalformedRecordError, match="bad system header"):
        decode(FakeRecord(headers=[(Header.TAGS, b"\xff\xfe")]))
    with pytest.raises(MalformedRecordError):
        decode(FakeRecord(headers=[(Header.RECONSUME_TIMES, b"many")]))


def test_internal_topic_names_are_legal_kafka_names():
    names = TopicNames("rk")
    for name in (names.retry("my group/1"), names.dead_letter("g"), names.delay_level(3), names.half(), names.op(),
                 names.check_request("pg"), names.max_check()):
        assert is_valid_topic_name(name), name
    assert names.retry("my group/1") == "rk.retry.my_group_1"
