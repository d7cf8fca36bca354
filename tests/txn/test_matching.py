"""Half/op matching as RocketMQ's removeMap / doneOpOffset: pure logic, no broker."""

from __future__ import annotations

import pytest

from rocketkafka.txn.matching import Decision, HalfOpLedger, decide

T, I = 6_000, 15  # RocketMQ's transaction timeout (ms) and max checks


def _decide(ledger, offset, txid="T", born=0, stored=0, checks=0, now=100_000, start=100_000):
    return decide(ledger, offset, txid, born, stored, checks, now, start, T, I)


def test_op_progress_stops_at_the_first_op_whose_half_is_still_open():
    # RocketMQ's example: halves 0..3, ops closing 0, 3, 2 (in that order); half 1 still open
    ledger = HalfOpLedger(half_next=0, op_next=0)
    for op_offset, half_offset in enumerate([0, 3, 2]):
        ledger.add_op(op_offset, half_offset, f"T{half_offset}")
    assert _decide(ledger, 0, "T0") is Decision.DONE
    ledger.pass_half(0)
    assert _decide(ledger, 1, "T1", born=99_000) is Decision.WAIT  # open and not due: the scan stops
    assert ledger.half_next == 1
    assert ledger.op_commit_point() == 1  # not 3: the op of half 3 must be read again after a restart


def test_op_progress_moves_over_ops_of_halves_already_passed():
    ledger = HalfOpLedger(half_next=5, op_next=10)
    ledger.add_op(10, 2, "late")  # a late end for a half before the progress: doneOpOffset
    ledger.add_op(11, None, None)  # a probe
    ledger.add_op(12, 7, "T7")  # waits for half 7
    assert ledger.op_commit_point() == 12
    ledger.pass_half(5), ledger.pass_half(6)
    assert ledger.op_commit_point() == 12
    assert _decide(ledger, 7, "T7") is Decision.DONE
    ledger.pass_half(7)
    assert ledger.op_commit_point() == 13 and ledger.waiting_ops == 0


def test_an_op_of_another_copy_closes_the_transaction():
    ledger = HalfOpLedger(half_next=4, op_next=0)
    ledger.add_op(0, 1, "T")  # closes the old copy at 1, arrived after it was re-written at 4
    assert _decide(ledger, 4, "T") is Decision.CLOSED
    assert _decide(ledger, 4, "U") is Decision.CHECK


def test_closed_transactions_are_remembered_within_capacity_only():
    ledger = HalfOpLedger(half_next=100, op_next=0, closed_capacity=2)
    for i, txid in enumerate(["A", "B", "C"]):
        ledger.add_op(i, i, txid)
    assert not ledger.is_closed("A") and ledger.is_closed("B") and ledger.is_closed("C")


@pytest.mark.parametrize("born, stored, checks, expected", [
    (95_000, 95_000, 0, Decision.WAIT),  # younger than the timeout
    (50_000, 100_000, 1, Decision.WAIT),  # a copy written during this scan: next scan
    (50_000, 60_000, 0, Decision.CHECK),
    (50_000, 60_000, 14, Decision.CHECK),
    (50_000, 60_000, 15, Decision.MAX_CHECK),  # checked max_check_times times already
])
def test_decide_follows_rocketmq_order(born, stored, checks, expected):
    assert _decide(HalfOpLedger(0, 0), 0, born=born, stored=stored, checks=checks) is expected


def test_an_op_beats_every_other_rule():
    ledger = HalfOpLedger(0, 0)
    ledger.add_op(0, 0, "T")
    assert _decide(ledger, 0, "T", born=99_999, stored=100_001, checks=99) is Decision.DONE


def test_ops_read_twice_after_a_seek_are_ignored():
    ledger = HalfOpLedger(0, 0)
    ledger.add_op(0, 3, "T")
    ledger.add_op(0, 3, "T")
    assert ledger.waiting_ops == 1


def test_skipped_half_offsets_release_their_ops():
    ledger = HalfOpLedger(0, 0)
    ledger.add_op(0, 1, "T1")  # half 1 never arrives (offset gap)
    ledger.pass_half(0)
    ledger.pass_half(2)
    assert ledger.op_commit_point() == 1
