"""Allocation strategies: every partition to exactly one member, deterministically."""

from __future__ import annotations

import pytest

from rocketkafka.ordering.group.allocation import Averagely, AveragelyByCircle, ByConfig, ConsistentHash, MachineRoomNearby, Member

PARTS = [("t", i) for i in range(8)]


@pytest.mark.parametrize("strategy", [Averagely(), AveragelyByCircle(), ConsistentHash()])
@pytest.mark.parametrize("n_members", [1, 2, 3, 5, 8, 11])
def test_every_partition_has_exactly_one_owner(strategy, n_members):
    members = [Member(f"c{i}") for i in range(n_members)]
    shares = [strategy.allocate("g", m.id, PARTS, members) for m in members]
    assert sorted(tp for share in shares for tp in share) == PARTS


def test_averagely_matches_rocketmq_ranges():
    members = [Member(f"c{i}") for i in range(3)]
    assert [[p for _, p in Averagely().allocate("g", m.id, PARTS, members)] for m in members] == [[0, 1, 2], [3, 4, 5], [6, 7]]


def test_circle_deals_round_robin():
    members = [Member(f"c{i}") for i in range(3)]
    assert [p for _, p in AveragelyByCircle().allocate("g", "c1", PARTS, members)] == [1, 4, 7]


def test_consistent_hash_moves_little_on_join():
    three = [Member(f"c{i}") for i in range(3)]
    four = three + [Member("c3")]
    strategy = ConsistentHash(virtual_nodes=50)
    before = {tp: m.id for m in three for tp in strategy.allocate("g", m.id, PARTS, three)}
    after = {tp: m.id for m in four for tp in strategy.allocate("g", m.id, PARTS, four)}
    moved = [tp for tp in PARTS if before[tp] != after[tp]]
    assert all(after[tp] == "c3" for tp in moved)  # only the newcomer gains


def test_by_config_and_non_members():
    table = {"a": [("t", 0), ("t", 5)]}
    assert ByConfig(table).allocate("g", "a", PARTS, [Member("a")]) == [("t", 0), ("t", 5)]
    assert Averagely().allocate("g", "ghost", PARTS, [Member("a")]) == []


def test_machine_room_prefers_own_room_and_shares_orphans():
    room_of = lambda tp: "east" if tp[1] < 4 else ("west" if tp[1] < 6 else "north")  # noqa: E731
    members = [Member("a", "east"), Member("b", "west")]
    strategy = MachineRoomNearby(room_of)
    a = strategy.allocate("g", "a", PARTS, members)
    b = strategy.allocate("g", "b", PARTS, members)
    assert sorted(a + b) == PARTS
    assert {p for _, p in a} >= {0, 1, 2, 3} and {p for _, p in b} >= {4, 5}
