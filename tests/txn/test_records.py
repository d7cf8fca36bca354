"""Record shapes of a transaction: what the half carries and what every end path derives from it."""

from __future__ import annotations

import pytest

from rocketkafka.codec import encode_headers
from rocketkafka.errors import MalformedRecordError
from rocketkafka.headers import header_map
from rocketkafka.message import Message, MessageExt
from rocketkafka.names import Header, TopicNames
from rocketkafka.record import Record
from rocketkafka.txn import TransactionListenerError, TransactionStatus
from rocketkafka.txn.records import OP_BODY, HalfMessage, OpRecord, half_record, probe_record
from rocketkafka.txn.status import as_status

TOPICS = TopicNames("rk")


def _half(key: bytes | None = b"order-1", partition: int = -1) -> Record:
    msg = Message("orders", b"body", tags="paid", keys="order-1", properties={"region": "eu"})
    prepared = Record("orders", partition, key, b"body", encode_headers(msg, "MSGID1", 1234, {Header.PRODUCER_GROUP: "pg"}), "MSGID1")
    return half_record(prepared, TOPICS, "pg", 8)


def test_half_carries_real_topic_group_and_transaction_id():
    h = header_map(_half().headers)
    assert h[Header.REAL_TOPIC] == b"orders" and h[Header.PRODUCER_GROUP] == b"pg"
    assert h[Header.TRANSACTION_ID] == b"MSGID1" and h[Header.TRANSACTION] == b"true"
    assert Header.REAL_QUEUE_ID not in h  # keyed: the partitioner places it by key
    unkeyed = header_map(_half(key=None).headers)
    assert 0 <= int(unkeyed[Header.REAL_QUEUE_ID]) < 8  # fixed now, so every end path writes the same place
    assert header_map(_half(partition=5).headers)[Header.REAL_QUEUE_ID] == b"5"


def test_real_message_is_the_same_from_every_path():
    half = HalfMessage.from_sent(_half(), 2, 40, 1234)
    copy = half.copy_record(TOPICS)
    request = half.check_request(TOPICS, 2, 77)
    via_check = HalfMessage.from_check_request(MessageExt(
        "MSGID1", request.topic, request.value, None, None, 0, 9, 0, 0, 5555, key=request.key, headers=request.headers))
    direct, checked = half.real_record(), via_check.real_record()
    assert (direct.topic, direct.partition, direct.key, direct.value, direct.msg_id) == \
        (checked.topic, checked.partition, checked.key, checked.value, checked.msg_id) == ("orders", -1, b"order-1", b"body", "MSGID1")
    assert header_map(direct.headers) == header_map(checked.headers)
    real = header_map(direct.headers)
    assert real[Header.TRANSACTION_ID] == b"MSGID1" and real[Header.MSG_ID] == b"MSGID1" and real["region"] == b"eu"
    assert not {Header.TRANSACTION, Header.REAL_TOPIC, Header.CHECK_TIMES, Header.HALF_OFFSET} & real.keys()
    assert header_map(copy.headers)[Header.CHECK_TIMES] == b"1" and copy.partition == 2
    assert header_map(copy.headers)[Header.BORN_TIMESTAMP] == b"1234"  # born time kept
    assert (via_check.half_partition, via_check.half_offset, via_check.check_times) == (2, 77, 1)


def test_op_names_the_half_offset_it_closes():
    op = HalfMessage.from_sent(_half(), 3, 41, 0).op_record(TOPICS, TransactionStatus.ROLLBACK)
    h = header_map(op.headers)
    assert (op.topic, op.partition) == ("rk.txn.op", 3)
    assert OP_BODY.decode(op.value) == {"transaction_id": "MSGID1", "half_partition": 3, "half_offset": 41,
                                        "state": "ROLLBACK", "producer_group": op.headers[-1][1].decode()}
    assert (h[Header.HALF_OFFSET], h[Header.TRANSACTION_STATE], h[Header.TRANSACTION_ID]) == (b"41", b"ROLLBACK", b"MSGID1")


class _Raw:
    def __init__(self, record: Record, partition: int, offset: int) -> None:
        self.r, self.p, self.o = record, partition, offset

    def topic(self): return self.r.topic
    def partition(self): return self.p
    def offset(self): return self.o
    def headers(self): return self.r.headers
    def key(self): return self.r.key
    def value(self): return self.r.value
    def timestamp(self): return (1, 99)


def test_op_parsing_treats_probes_and_foreign_partitions_as_closing_nothing():
    op = HalfMessage.from_sent(_half(), 3, 41, 0).op_record(TOPICS, TransactionStatus.COMMIT)
    assert OpRecord.parse(_Raw(op, 3, 7)) == OpRecord(7, 41, "MSGID1")
    assert OpRecord.parse(_Raw(op, 2, 7)).half_offset is None
    assert OpRecord.parse(_Raw(probe_record(TOPICS, 3), 3, 8)) == OpRecord(8, None, None)


def test_half_without_transactional_headers_is_malformed():
    with pytest.raises(MalformedRecordError):
        HalfMessage.from_half_record(_Raw(Record("rk.txn.half", 0, None, b"", [(Header.MSG_ID, b"X")], "X"), 0, 3))


def test_status_is_strict_but_none_means_unknown():
    assert as_status(None, "T", "f") is TransactionStatus.UNKNOWN
    assert as_status(TransactionStatus.COMMIT, "T", "f") is TransactionStatus.COMMIT
    for wrong in (True, 0, "COMMIT"):
        with pytest.raises(TransactionListenerError, match="TransactionStatus"):
            as_status(wrong, "T", "f")
