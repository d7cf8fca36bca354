"""Open transactions: half messages no op record closed yet, by producer group (``mqadmin`` has none; the dashboard does).

The checker commits the half topic up to the first undecided half and the op topic up
to the first op still waiting for its half (:mod:`rocketkafka.txn.scanning`), so what is
open lies after the committed half offset, and every op that could close it after the
committed op offset. A half re-written by a check is one transaction: its latest copy
counts (its check count is the checks done).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rocketkafka.config import Settings
from rocketkafka.errors import MalformedRecordError
from rocketkafka.operations.reading import LogReader
from rocketkafka.txn.records import HalfMessage, OpRecord


@dataclass(frozen=True)
class PendingHalf:
    """One open transaction: its latest half copy, how old it is and how often it was checked."""

    producer_group: str
    transaction_id: str
    msg_id: str
    real_topic: str
    half_partition: int
    half_offset: int
    age_ms: int
    checks: int


def pending_transactions(settings: Settings, producer_group: str | None = None) -> list[PendingHalf]:
    """Open halves (of ``producer_group``, else all), oldest first."""
    topics = settings.topics
    now = int(time.time() * 1000)
    with LogReader(settings) as reader:
        if not reader.exists(topics.half()) or not reader.exists(topics.op()):  # hidden ones: refused, named
            return []
        halves, ops = reader.partitions(topics.half()), reader.partitions(topics.op())
        ends = reader.ends([*halves, *ops])
        committed = reader.committed(topics.txn_checker_group(), [*halves, *ops])
        open_: dict[str, PendingHalf] = {}
        for half_tp, op_tp in zip(halves, ops):
            closed_offsets, closed_txns = set(), set()
            op_start = committed.get(op_tp)
            for record in reader.read(op_tp, ends[op_tp][0] if op_start is None else op_start, ends[op_tp][1]):
                op = OpRecord.parse(record)
                if op.half_offset is not None:
                    closed_offsets.add(op.half_offset)
                if op.transaction_id:
                    closed_txns.add(op.transaction_id)
            half_start = committed.get(half_tp)
            for record in reader.read(half_tp, ends[half_tp][0] if half_start is None else half_start, ends[half_tp][1]):
                try:
                    half = HalfMessage.from_half_record(record)
                except MalformedRecordError:
                    continue
                if record.offset() in closed_offsets or half.transaction_id in closed_txns:
                    open_.pop(half.transaction_id, None)
                    continue
                if producer_group is not None and half.producer_group != producer_group:
                    continue
                open_[half.transaction_id] = PendingHalf(half.producer_group, half.transaction_id, half.msg_id,
                                                         half.real_topic, half.half_partition, half.half_offset,
                                                         max(0, now - half.born_ms), half.check_times)
    return sorted(open_.values(), key=lambda h: (h.producer_group, -h.age_ms))
