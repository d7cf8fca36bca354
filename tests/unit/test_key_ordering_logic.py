"""Pure logic of key-ordered mode: order keys, per-record commit point, and the graceful-leave cut."""

from __future__ import annotations

import json

import pytest

from ordering.key_ordered import KeyOrderedDispatch
from ordering.order_keys import order_key_of, parse_json_path, validate_order_key
from ordering.process_queue import ProcessQueue


class Rec:
    """A stand-in for a confluent-kafka record."""

    def __init__(self, offset, key=None, value=b"", headers=None, topic="t", partition=0):
        self._o, self._k, self._v, self._h = offset, key, value, headers
        self._t, self._p = topic, partition

    def offset(self):
        return self._o

    def key(self):
        return self._k

    def value(self):
        return self._v

    def headers(self):
        return self._h

    def topic(self):
        return self._t

    def partition(self):
        return self._p


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
    dispatch = KeyOrderedDispatch.__new__(KeyOrderedDispatch)  # chunk needs only key_of
    dispatch.key_of = order_key_of("key")
    recs = [Rec(0, b"a"), Rec(1, b"b"), Rec(2, b"a"), Rec(3), Rec(4, b"a"), Rec(5), Rec(6, b"b")]
    groups = dispatch.chunk(recs, size=2)
    shaped = [(k if isinstance(k, bytes) else None, [r.offset() for r in g]) for k, g in groups]
    assert shaped == [(b"a", [0, 2]), (b"b", [1, 6]), (None, [3, 5]), (b"a", [4])]
    unkeyed = [k for k, _ in groups if not isinstance(k, bytes)]
    assert len(unkeyed) == 1  # keyless records of one fetch share a fresh key of their own


# -- commit point and cut --------------------------------------------------------------------------------
def _keyed_queue(layout: dict[str, list[int]]) -> tuple[ProcessQueue, dict]:
    pq = ProcessQueue("t", 0, 0, keyed=True)
    batches = {key: pq.add([Rec(o, key.encode()) for o in offsets], key) for key, offsets in layout.items()}
    return pq, batches


def _run(pq, batch, n):
    """Handle the next ``n`` records of ``batch`` as a worker would."""
    assert pq.admit(batch)
    for i in range(batch.index, batch.index + n):
        assert pq.admit_record(batch.records[i].offset())
        batch.advance(i)
    batch.running = False


def test_commit_point_is_the_lowest_unfinished_record_across_keys():
    pq, b = _keyed_queue({"a": [0, 2, 4], "b": [1, 3, 5]})
    assert pq.commit_point() == 0 and pq.buffered() == 6
    _run(pq, b["a"], 3)  # a done: 0, 2, 4
    assert pq.commit_point() == 1 and pq.buffered() == 3
    _run(pq, b["b"], 1)  # b: 1
    assert pq.commit_point() == 3
    _run(pq, b["b"], 2)
    assert pq.commit_point() == 6 == pq.next_offset


def test_graceful_cut_runs_everything_below_the_highest_delivered_and_nothing_above():
    pq, b = _keyed_queue({"a": [0, 3, 6, 9], "b": [1, 4, 7], "c": [2, 5, 8]})
    _run(pq, b["a"], 3)  # a handled 0, 3, 6; b and c have not started
    pq.drop()
    assert pq.cut == 7
    assert not pq.drained()
    assert not pq.may_start(9) and pq.may_start(1)
    assert not pq.admit(b["a"]) and not pq.admit_record(9)  # a's next record lies past the cut
    _run(pq, b["b"], 2)  # 1, 4
    assert not pq.admit(b["b"]) and not pq.admit_record(7)  # 7 is at the cut: never starts
    _run(pq, b["c"], 2)  # 2, 5
    assert not pq.may_start(8)
    assert pq.drained() and pq.commit_point() == 7 == pq.cut
    handled = {0, 3, 6, 1, 4, 2, 5}
    assert handled == set(range(pq.cut)), "handled set is exactly [start, cut)"


def test_a_running_record_counts_as_delivered_for_the_cut():
    pq, b = _keyed_queue({"a": [0, 2], "b": [1, 3]})
    assert pq.admit(b["b"]) and pq.admit_record(1)  # b's handler is inside record 1
    pq.drop()
    assert pq.cut == 2 and not pq.drained()  # 0 must still run, 1 must finish
    b["b"].advance(0)
    b["b"].running = False
    assert not pq.drained()
    _run(pq, b["a"], 1)
    assert pq.drained() and pq.commit_point() == 2


def test_revoked_queue_admits_nothing_and_drains_when_idle():
    pq, b = _keyed_queue({"a": [0, 1]})
    pq.revoke()
    assert not pq.admit(b["a"]) and not pq.admit_record(0) and not pq.may_start(0)
    assert pq.drained()


@pytest.mark.parametrize("start", [-2, 0, 57])  # -2: OFFSET_BEGINNING, before the first fetch resolved it
def test_keyed_queue_that_handed_nothing_drains_at_once_when_left(start):
    """A partition handed over before anything was fetched (a consumer joining at start-up) must be let go."""
    pq = ProcessQueue("t", 0, start, keyed=True)
    pq.drop()
    assert pq.cut == pq.commit_point() == start and pq.drained()


def test_serial_queue_cuts_at_the_commit_point():
    pq = ProcessQueue("t", 0, 0, serial=True)
    batch = pq.add([Rec(o) for o in range(5)])
    assert pq.admit(batch)
    batch.advance(0)
    batch.advance(1)
    pq.drop()
    assert pq.cut == 2 and not pq.may_start(2)
    batch.running = False
    assert pq.drained() and pq.commit_point() == 2


def test_serial_and_keyed_exclude_each_other():
    with pytest.raises(ValueError):
        ProcessQueue("t", 0, 0, serial=True, keyed=True)


# -- idempotent consume: the quorum decision ----------------------------------------------------------
def test_idempotent_begin_decisions():
    from ordering.idempotent import BUSY_RETRY_MS, MarkState, decide

    ours, consumed, other = [b"", 0], [b"consumed", 5000], [b"consuming:abc", 700]
    assert decide([ours, ours, ours], 2).state is MarkState.OURS
    assert decide([ours, ours, None], 2).state is MarkState.OURS  # one node down changes nothing
    assert decide([ours, None, None], 2).state is MarkState.BUSY  # no quorum: never run blind
    assert decide([ours, None, None], 2).wait_ms == BUSY_RETRY_MS
    assert decide([ours, ours, consumed], 2).state is MarkState.CONSUMED  # consumed anywhere wins
    busy = decide([ours, other, other], 2)
    assert busy.state is MarkState.BUSY and busy.wait_ms == 700 and busy.marked == [0]
    assert decide([other, ours, ours], 2).state is MarkState.OURS  # a lone stale mark loses to a quorum
