"""Pure logic of partition work: order keys, chunking by mode, the commit point, and the graceful-leave cut."""

from __future__ import annotations

import json

import pytest

from rocketkafka.ordering.work.order_keys import order_key_of, parse_json_path, validate_order_key
from rocketkafka.ordering.work.lanes import Run
from rocketkafka.ordering.work.partition import Batch, ByKey, PartitionWork, Serial, Unordered
from rocketkafka.ordering.work.step import ClaimContext
from tests.ordering.conftest import Rec


# -- order keys ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("path", "steps"), [
    ("$.order.id", ("order", "id")),
    ("$.items[0].sku", ("items", 0, "sku")),
    ("$['order id'][\"x\"]", ("order id", "x")),
    ("$.a[-1]", ("a", -1)),
])
def test_json_paths_parse_into_steps(path, steps):
    assert parse_json_path(path) == steps


@pytest.mark.parametrize("bad", ["order.id", "$", "$.", "$.a..b", "$[x]", "$.a[0", "", "partitions"])
def test_bad_order_keys_are_refused_at_construction(bad):
    with pytest.raises(ValueError):
        validate_order_key(bad)


def test_message_key_is_the_record_key_else_the_first_of_keys():
    key_of = order_key_of("key")
    assert key_of(Rec(0, key=b"k1")) == b"k1"
    assert key_of(Rec(0, headers=[("rk.KEYS", b"k2 k3")])) == b"k2"
    assert key_of(Rec(0)) is None


def test_json_path_key_distinguishes_types_and_misses_to_none():
    key_of = order_key_of("$.order.id")
    body = lambda v: json.dumps({"order": {"id": v}}).encode()  # noqa: E731
    assert key_of(Rec(0, value=body("a"))) == key_of(Rec(0, value=b'{"order": {"id": "a", "x": 1}}'))
    assert key_of(Rec(0, value=body(1))) != key_of(Rec(0, value=body("1")))
    assert key_of(Rec(0, value=body({"b": 1, "a": 2}))) == key_of(Rec(0, value=b'{"order": {"id": {"a": 2, "b": 1}}}'))
    assert key_of(Rec(0, value=body(None))) is None
    assert key_of(Rec(0, value=b"not json")) is None
    assert key_of(Rec(0, value=b'{"order": 5}')) is None


def test_partition_order_has_no_record_key():
    with pytest.raises(ValueError):
        order_key_of("partition")


# -- chunking ------------------------------------------------------------------------------------------
def test_records_are_grouped_by_key_in_offset_order_and_unkeyed_ones_stand_alone():
    chunk = ByKey(2, order_key_of("key"))
    recs = [Rec(0, b"a"), Rec(1, b"b"), Rec(2, b"a"), Rec(3), Rec(4, b"a"), Rec(5), Rec(6, b"b")]
    work = _work(0, chunk)[0]
    groups = list(chunk(work, recs))
    shaped = [(k[1] if isinstance(k, tuple) else None, [r.offset() for r in g]) for k, g in groups]
    assert shaped == [(b"a", [0, 2]), (b"b", [1, 6]), (None, [3]), (b"a", [4]), (None, [5])]
    assert all(k[0] is work for k, _ in groups if isinstance(k, tuple))  # a key's shard is (partition, key)
    unkeyed = [k for k, _ in groups if not isinstance(k, tuple)]
    assert len(unkeyed) == 2 and unkeyed[0] != unkeyed[1]  # each keyless record waits for nothing


def test_orderly_batches_share_the_partitions_shard_and_concurrent_ones_have_none():
    recs = [Rec(o) for o in range(5)]
    work = _work(0, Serial(2))[0]
    assert [(k, [r.offset() for r in g]) for k, g in Serial(2)(work, recs)] == [(work, [0, 1]), (work, [2, 3]),
                                                                               (work, [4])]
    assert [k for k, _ in Unordered(2)(work, recs)] == [None, None, None]


# -- commit point and cut --------------------------------------------------------------------------------
def _work(start: int, chunker) -> tuple[PartitionWork, list[Batch]]:
    submitted: list[Batch] = []
    context = ClaimContext(("t", 0), (("t", 0),), 1, {("t", 0): start}, lambda: float("inf"), lambda tp, o: None)
    return PartitionWork(context, submitted.append, chunker), submitted


def _keyed(layout: dict[bytes, list[int]], size: int = 100) -> tuple[PartitionWork, dict[bytes, list[Batch]]]:
    work, submitted = _work(0, ByKey(size, order_key_of("key")))
    records = sorted((Rec(o, key) for key, offsets in layout.items() for o in offsets), key=lambda r: r.offset())
    work.take(("t", 0), records)
    by_key: dict[bytes, list[Batch]] = {}
    for batch in submitted:
        by_key.setdefault(batch.shard[1], []).append(batch)
    return work, by_key


def _run(work: PartitionWork, batch: Batch, n: int | None = None, stays_out: bool = False) -> list[int]:
    """The scheduler hands ``batch`` to a lane, whose handler handles ``n`` records (all it may), and the
    poll thread applies the outcome; ``stays_out``: the lane still holds the batch (its handler is inside it).
    Returns the offsets handled."""
    stop = work.stop_for(batch)
    assert stop is not None, "the batch may not start"
    if batch.run is None:
        batch.run = Run(batch, stop, {})
        work.out += 1
    upto = stop if n is None else min(stop, batch.index + n)
    handled = [r.offset() for r in batch.records[batch.index:upto]]
    batch.index = batch.done = upto
    if not stays_out:
        batch.run = None
        work.out -= 1
    return handled


def test_commit_point_is_the_lowest_unfinished_record_across_keys():
    work, b = _keyed({b"a": [0, 2, 4], b"b": [1, 3, 5]})
    assert work.commit_point() == 0 and work.backlog() == {("t", 0): 6}
    _run(work, b[b"a"][0])  # a done: 0, 2, 4
    assert work.commit_point() == 1
    _run(work, b[b"b"][0], 1)  # b: 1
    assert work.commit_point() == 3
    _run(work, b[b"b"][0])
    assert work.commit_point() == 6 == work.next_offset and work.backlog() == {("t", 0): 0}


def test_graceful_cut_lies_after_every_batch_begun_and_hands_over_exactly_what_is_below_it():
    work, b = _keyed({b"a": [0, 3, 6, 9], b"b": [1, 4, 7], b"c": [2, 5, 8]}, size=2)
    handled = _run(work, b[b"a"][0])  # a: 0, 3
    handled += _run(work, b[b"a"][1], 1, stays_out=True)  # a: 6, and 9 not yet: a's second batch is out
    work.leave()
    assert work.cut == 10  # after the last record of every batch begun
    assert not work.drained()
    handled += _run(work, b[b"a"][1])  # 9 still runs: its batch was begun
    for key in (b"b", b"c"):
        for batch in b[key]:
            assert work.stop_for(batch) == len(batch.records)  # all below the cut run
            handled += _run(work, batch)
    assert work.drained() and work.commit_point() == 10 == work.cut
    assert sorted(handled) == list(range(work.cut)), "handled set is exactly [start, cut)"


def test_a_key_finished_above_the_commit_point_moves_the_cut_past_it():
    work, b = _keyed({b"a": [0, 2, 4], b"b": [1, 3, 5]})
    handled = _run(work, b[b"b"][0])  # b finished 1, 3, 5; a has not begun: the commit point is 0
    assert work.commit_point() == 0
    work.leave()
    assert work.cut == 6  # handing over at 0 would run 1, 3, 5 again
    handled += _run(work, b[b"a"][0])
    assert work.drained() and sorted(handled) == list(range(6))


def test_a_batch_not_begun_reaching_past_the_cut_is_trimmed_to_it():
    work, b = _keyed({b"a": [0, 5], b"b": [1, 2, 3, 4, 6, 7]})
    _run(work, b[b"a"][0], 1, stays_out=True)  # a is inside record 0: its batch [0, 5] is out
    work.leave()
    assert work.cut == 6
    assert work.stop_for(b[b"b"][0]) == 4  # 1..4 run, 6 and 7 never start
    handled = _run(work, b[b"b"][0]) + _run(work, b[b"a"][0])
    assert sorted(handled) == [1, 2, 3, 4, 5] and work.drained() and work.commit_point() == 6


def test_revoked_partition_admits_nothing_and_drains_when_idle():
    work, b = _keyed({b"a": [0, 1]})
    work.revoke()
    assert work.stop_for(b[b"a"][0]) is None and not work.may_start(0)
    assert work.drained() and work.positions() == {("t", 0): 0}


@pytest.mark.parametrize("start", [-2, 0, 57])  # -2: OFFSET_BEGINNING, before the first fetch resolved it
def test_a_partition_that_handed_nothing_drains_at_once_when_left(start):
    """A partition handed over before anything was fetched (a consumer joining at start-up) must be let go."""
    work, _ = _work(start, ByKey(10, order_key_of("key")))
    work.leave()
    assert work.cut == work.commit_point() == start and work.drained()


def test_orderly_partition_cuts_after_the_batch_in_the_handler():
    work, submitted = _work(0, Serial(3))
    work.take(("t", 0), [Rec(o) for o in range(7)])  # batches [0..2] [3..5] [6]
    _run(work, submitted[0], 2, stays_out=True)  # the handler is inside the first batch
    work.leave()
    assert work.cut == 3 and not work.may_start(3) and work.stop_for(submitted[1]) is None
    _run(work, submitted[0])
    assert work.drained() and work.commit_point() == 3


def test_a_paused_batch_cuts_after_the_records_handed_and_the_rest_goes_to_the_next_owner():
    """A batch suspended mid-way (a record not yet due, an orderly retry) is not being executed: the
    cut lies after what was handed, so leaving never waits for the suspension (it may be long)."""
    work, submitted = _work(0, Serial(5))
    work.take(("t", 0), [Rec(o) for o in range(5)])
    _run(work, submitted[0], 2)  # the handler returned with a pause: the batch is back
    work.leave()
    assert work.cut == 2 and work.drained() and work.commit_point() == 2


def test_a_revoked_partition_with_a_paused_batch_drains_at_once():
    work, submitted = _work(0, Serial(5))
    work.take(("t", 0), [Rec(o) for o in range(5)])
    _run(work, submitted[0], 2)
    work.revoke()
    assert work.drained()


def test_records_fetched_again_after_a_seek_are_not_taken_twice():
    work, submitted = _work(0, Unordered(10))
    work.take(("t", 0), [Rec(o) for o in range(5)])
    work.take(("t", 0), [Rec(o) for o in range(3, 8)])
    assert [[r.offset() for r in b.records] for b in submitted] == [[0, 1, 2, 3, 4], [5, 6, 7]]


# -- idempotent consume: the quorum decision ----------------------------------------------------------
def test_idempotent_begin_decisions():
    from rocketkafka.ordering.consumers.idempotent import BUSY_RETRY_MS, MarkState, decide

    ours, consumed, other = [b"", 0], [b"consumed", 5000], [b"consuming:abc", 700]
    assert decide([ours, ours, ours], 2).state is MarkState.OURS
    assert decide([ours, ours, None], 2).state is MarkState.OURS  # one node down changes nothing
    assert decide([ours, None, None], 2).state is MarkState.BUSY  # no quorum: never run blind
    assert decide([ours, None, None], 2).wait_ms == BUSY_RETRY_MS
    assert decide([ours, ours, consumed], 2).state is MarkState.CONSUMED  # consumed anywhere wins
    busy = decide([ours, other, other], 2)
    assert busy.state is MarkState.BUSY and busy.wait_ms == 700 and busy.marked == [0]
    assert decide([other, ours, ours], 2).state is MarkState.OURS  # a lone stale mark loses to a quorum
