"""The records of a transaction: half, op, real message, check request, max-check copy.

A half message is the user's record parked on the half topic with where it really
goes in headers (RocketMQ's ``REAL_TOPIC`` / ``REAL_QID``), the producer group and
the transaction id. Everything downstream is derived from a :class:`HalfMessage`
view of it, so the producer's own end-transaction and a check-back answer write
byte-for-byte the same real message (same message id: the transaction id).

Op records (RocketMQ's ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, tag ``d``) name the half
offset they close; op partition ``p`` closes half partition ``p``. A *probe* is an
op record that closes nothing: the checker writes one before a scan and reads the
op partition up to it, so every op acknowledged before the scan began is seen.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rocketkafka.admin import TopicAdmin
from rocketkafka.avro import AvroSerde
from rocketkafka.errors import MalformedRecordError
from rocketkafka.errors import ConfigError, MessageError
from rocketkafka.message import MessageExt
from rocketkafka.names import HEADER_PREFIX, Header, TopicNames
from rocketkafka.record import Record
from rocketkafka.txn.status import TransactionStatus

#: Headers that describe a record's transactional plumbing, never copied onto the real message.
_PLUMBING = frozenset({Header.TRANSACTION, Header.REAL_TOPIC, Header.REAL_QUEUE_ID, Header.CHECK_TIMES,
                       Header.HALF_OFFSET, Header.HALF_PARTITION, Header.TRANSACTION_STATE})
#: Op record states (``TRANSACTION_STATE`` header).
OP_COMMIT, OP_ROLLBACK, OP_PROBE = "COMMIT", "ROLLBACK", "PROBE"
#: The body of an op record (internal records are Avro: rocketkafka.avro).
OP_BODY = AvroSerde({
    "type": "record", "name": "TransactionOp", "namespace": "rocketkafka.txn",
    "fields": [{"name": "transaction_id", "type": "string"}, {"name": "half_partition", "type": "int"},
               {"name": "half_offset", "type": "long"}, {"name": "state", "type": "string"},
               {"name": "producer_group", "type": "string"}],
})


class TransactionCheckMessage(MessageExt):
    """What ``check_local_transaction`` receives: the half message as the user sent it.

    ``topic`` is the real topic; ``queue_id`` / ``queue_offset`` locate the half copy being
    checked; ``reconsume_times`` is how many checks came before this one.
    """

    __slots__ = ("transaction_id",)

    def __init__(self, *args: Any, transaction_id: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.transaction_id = transaction_id


@dataclass(frozen=True)
class HalfMessage:
    """A stored half message, as the producer, the checker and the check-back channel see it."""

    transaction_id: str
    msg_id: str
    producer_group: str
    real_topic: str
    real_partition: int  # -1: the partitioner places it by key
    key: bytes | None
    body: bytes
    headers: tuple[tuple[str, bytes], ...]
    half_partition: int
    half_offset: int
    born_ms: int
    stored_ms: int
    check_times: int

    # -- parsing ---------------------------------------------------------------------
    @classmethod
    def from_half_record(cls, record: Any) -> HalfMessage:
        """The view of a record read from the half topic.

        Raises:
            MalformedRecordError: a transactional header is missing or garbled.
        """
        return cls._parse(record.topic(), record.partition(), record.offset(), record.headers() or [],
                          record.key(), record.value(), record.timestamp()[1], record.partition(), record.offset())

    @classmethod
    def from_check_request(cls, msg: MessageExt) -> HalfMessage:
        """The view of a check request (the half copy it names is in its headers).

        Raises:
            MalformedRecordError: a transactional header is missing or garbled.
        """
        try:
            h = _headers(msg.headers)
            partition, offset = int(h[Header.HALF_PARTITION]), int(h[Header.HALF_OFFSET])
        except (KeyError, ValueError) as exc:
            raise MalformedRecordError(msg.topic, msg.queue_id, msg.queue_offset,
                                       f"check request without a valid half position ({exc})") from exc
        return cls._parse(msg.topic, msg.queue_id, msg.queue_offset, msg.headers, msg.key, msg.body,
                          msg.store_timestamp, partition, offset)

    @classmethod
    def from_sent(cls, half: Record, partition: int, offset: int, stored_ms: int) -> HalfMessage:
        """The view of a half this process just stored at ``partition``/``offset``."""
        return cls._parse(half.topic, partition, offset, half.headers, half.key, half.value, stored_ms, partition, offset)

    @classmethod
    def _parse(cls, topic: str, partition: int, offset: int, headers: Iterable[tuple[str, bytes | None]],
               key: bytes | None, value: bytes | None, stored_ms: int, half_partition: int, half_offset: int) -> HalfMessage:
        kept = tuple((k, v) for k, v in headers if v is not None)
        try:
            h = _headers(kept)
            txid = h.get(Header.TRANSACTION_ID) or h[Header.MSG_ID]
            msg_id = h.get(Header.MSG_ID) or txid
            return cls(
                transaction_id=txid, msg_id=msg_id, producer_group=h[Header.PRODUCER_GROUP],
                real_topic=h[Header.REAL_TOPIC], real_partition=int(h.get(Header.REAL_QUEUE_ID, "-1")),
                key=key, body=value if value is not None else b"", headers=kept,
                half_partition=half_partition, half_offset=half_offset,
                born_ms=int(h.get(Header.BORN_TIMESTAMP, stored_ms)), stored_ms=stored_ms,
                check_times=int(h.get(Header.CHECK_TIMES, "0")))
        except (KeyError, ValueError, UnicodeDecodeError) as exc:
            raise MalformedRecordError(topic, partition, offset, f"not a valid half message ({exc!r})") from exc

    # -- what it turns into ------------------------------------------------------------
    def real_record(self) -> Record:
        """The real message: the user's record on its real topic, carrying the transaction id."""
        headers = [(k, v) for k, v in self.headers if k not in _PLUMBING]
        if not any(k == Header.TRANSACTION_ID for k, _ in headers):
            headers.append((Header.TRANSACTION_ID, self.transaction_id.encode()))
        return Record(self.real_topic, self.real_partition, self.key, self.body, headers, self.msg_id)

    def op_record(self, topics: TopicNames, state: TransactionStatus) -> Record:
        """The op record closing this half copy: an Avro body (:data:`OP_BODY`), mirrored in headers for Kafka tools."""
        name = OP_COMMIT if state is TransactionStatus.COMMIT else OP_ROLLBACK
        body = OP_BODY.encode({"transaction_id": self.transaction_id, "half_partition": self.half_partition,
                               "half_offset": self.half_offset, "state": name, "producer_group": self.producer_group})
        headers = [(Header.TRANSACTION_ID, self.transaction_id.encode()),
                   (Header.HALF_PARTITION, str(self.half_partition).encode()),
                   (Header.HALF_OFFSET, str(self.half_offset).encode()),
                   (Header.TRANSACTION_STATE, name.encode()),
                   (Header.PRODUCER_GROUP, self.producer_group.encode())]
        return Record(topics.op(), self.half_partition, self.transaction_id.encode(), body,
                      headers, f"{self.transaction_id}@{self.half_offset}")

    def copy_record(self, topics: TopicNames) -> Record:
        """The re-written half (same partition, original born time, one more check)."""
        return Record(topics.half(), self.half_partition, self.key, self.body,
                      self._with({Header.CHECK_TIMES: str(self.check_times + 1)}), self.msg_id)

    def check_request(self, topics: TopicNames, copy_partition: int, copy_offset: int) -> Record:
        """The check-back request for the copy at ``copy_partition``/``copy_offset``."""
        extra = {Header.CHECK_TIMES: str(self.check_times + 1), Header.HALF_PARTITION: str(copy_partition),
                 Header.HALF_OFFSET: str(copy_offset)}
        return Record(topics.check_request(self.producer_group), -1, self.key, self.body, self._with(extra), self.msg_id)

    def max_check_record(self, topics: TopicNames) -> Record:
        """The copy parked on the max-check topic (everything kept, so an operator can replay it)."""
        extra = {Header.HALF_PARTITION: str(self.half_partition), Header.HALF_OFFSET: str(self.half_offset)}
        return Record(topics.max_check(), -1, self.key, self.body, self._with(extra), self.msg_id)

    def to_check_message(self) -> TransactionCheckMessage:
        """What ``check_local_transaction`` receives."""
        h = _headers(self.headers)
        return TransactionCheckMessage(
            id=self.msg_id, topic=self.real_topic, body=self.body, tags=h.get(Header.TAGS), keys=h.get(Header.KEYS),
            queue_id=self.half_partition, queue_offset=self.half_offset, reconsume_times=max(self.check_times - 1, 0),
            born_timestamp=self.born_ms, store_timestamp=self.stored_ms,
            properties={k: v.decode("utf-8", "replace") for k, v in self.headers if not k.startswith(HEADER_PREFIX)},
            key=self.key, headers=list(self.headers), transaction_id=self.transaction_id)

    def _with(self, replace: dict[str, str]) -> list[tuple[str, bytes]]:
        return [(k, v) for k, v in self.headers if k not in replace] + [(k, v.encode()) for k, v in replace.items()]


def half_record(prepared: Record, topics: TopicNames, producer_group: str, real_partitions: int) -> Record:
    """The half message of ``prepared`` (a validated record for the real topic).

    The real partition is fixed now when the user chose one, or when the record has no
    key (a random one, so every end path writes the same place); keyed records are
    placed by the partitioner, which maps the same key to the same partition.
    """
    partition = prepared.partition
    if partition < 0 and prepared.key is None:
        partition = random.randrange(real_partitions)
    extra = [(Header.TRANSACTION, b"true"), (Header.TRANSACTION_ID, prepared.msg_id.encode()),
             (Header.REAL_TOPIC, prepared.topic.encode())]
    if partition >= 0:
        extra.append((Header.REAL_QUEUE_ID, str(partition).encode()))
    headers = [(k, v) for k, v in prepared.headers if k != Header.PRODUCER_GROUP]
    headers += [(Header.PRODUCER_GROUP, producer_group.encode())] + extra
    return Record(topics.half(), -1, prepared.key, prepared.value, headers, prepared.msg_id)


def probe_record(topics: TopicNames, partition: int) -> Record:
    """An op record that closes nothing: the checker's read-up-to-here mark on op ``partition``."""
    return Record(topics.op(), partition, None, b"", [(Header.TRANSACTION_STATE, OP_PROBE.encode())], "")


@dataclass(frozen=True)
class OpRecord:
    """An op record as the checker reads it: which half offset it closes (``None``: a probe or garbage)."""

    offset: int
    half_offset: int | None
    transaction_id: str | None
    state: str | None = field(default=None, compare=False)  # OP_COMMIT or OP_ROLLBACK (None: a probe or garbage)

    @classmethod
    def parse(cls, record: Any) -> OpRecord:
        """Read the Avro body; anything else (a probe, a foreign record, garbage) closes nothing."""
        try:
            op = OP_BODY.decode(record.value() or b"")
        except MessageError:
            return cls(record.offset(), None, None)
        if op["half_partition"] != record.partition():
            return cls(record.offset(), None, op["transaction_id"])  # names another partition: closes nothing here
        return cls(record.offset(), op["half_offset"], op["transaction_id"], op["state"])


def provision(admin: TopicAdmin, topics: TopicNames, half_partitions: int, check_partitions: int,
              producer_group: str | None = None) -> int:
    """Create the half and op topics that do not exist yet, and the max-check topic (the checker's: no
    ``producer_group``) or a producer group's check-request topic; returns the half partitions.

    Existing topics keep their partition counts, and need no CREATE grant (:meth:`TopicAdmin.create_many`).

    Raises:
        ConfigError: the half and op topics exist with different partition counts, or one is missing and
            this principal may not create it.
    """
    wanted = {topics.half(): half_partitions, topics.op(): half_partitions}
    if producer_group is None:
        wanted[topics.max_check()] = 1  # only the checker writes there
    else:
        wanted[topics.check_request(producer_group)] = check_partitions
    admin.create_internal(wanted)
    half, op = admin.partitions(topics.half()), admin.partitions(topics.op())
    if half != op:
        raise ConfigError(f"half topic {topics.half()!r} has {half} partitions but op topic {topics.op()!r} has {op}; "
                          "op partition p closes half partition p, so they must be equal")
    return half


def _headers(headers: Iterable[tuple[str, bytes | None]]) -> dict[str, str]:
    """System headers as text (the last value wins); user headers are skipped."""
    return {k: v.decode() for k, v in headers if v is not None and k.startswith(HEADER_PREFIX)}
