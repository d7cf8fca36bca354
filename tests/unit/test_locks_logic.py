"""Pure logic of the lock table: quorum, validity, settings, fencing-token choice, vote counting."""

from __future__ import annotations

import time

import pytest

from rocketkafka.errors import ConfigError
import hashlib

from rocketkafka.ordering.locks.nodes import SCRIPTS, SHAS
from rocketkafka.ordering.locks.settings import grants, partition_pairs
from rocketkafka.ordering.locks.rounds import Lease
from rocketkafka.ordering.locks import (Held, LockSettings, agree, issue_token, quorum, quorum_ttl, valid_until)


@pytest.mark.parametrize(("nodes", "needed"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (7, 4)])
def test_quorum_is_a_strict_majority(nodes, needed):
    assert quorum(nodes) == needed
    assert 2 * quorum(nodes) > nodes  # any two quorums share a node


def test_quorum_needs_a_node():
    with pytest.raises(ValueError):
        quorum(0)


def test_defaults_are_rocketmqs():
    s = LockSettings()
    assert (s.lease_ms, s.renew_interval_ms, s.client_expiry_ms) == (60_000, 20_000, 30_000)
    assert s.drift_ms == 60_000 * 0.01 + 2


def test_validity_is_client_expiry_minus_drift_from_the_start_of_the_round():
    s = LockSettings(lease_ms=10_000, renew_interval_ms=2_000, client_expiry_ms=5_000, drift_factor=0.01)
    assert s.validity_ms == 5_000 - 102
    assert valid_until(100.0, s) == pytest.approx(100.0 + 4.898)
    # the client gives up before the server forgets, even with the full drift
    assert s.client_expiry_ms + s.drift_ms < s.lease_ms


@pytest.mark.parametrize("bad", [
    dict(lease_ms=0),
    dict(lease_ms=-5),
    dict(lease_ms=1.5),
    dict(lease_ms=True),
    dict(socket_timeout_ms="200"),
    dict(drift_factor=-0.1),
    dict(drift_factor=0.5),
    dict(client_expiry_ms=60_000),  # not below the lease
    dict(client_expiry_ms=59_500),  # below the lease but not by the drift (602 ms)
    dict(renew_interval_ms=30_000),  # renewing no sooner than the expiry
    dict(renew_interval_ms=29_300),  # a renewal started on time could end after the expiry
    dict(socket_timeout_ms=15_000),  # two rounds would not fit in the validity
])
def test_nonsense_settings_fail_at_construction(bad):
    with pytest.raises(ConfigError):
        LockSettings(**bad)


def test_short_settings_for_tests_are_valid():
    LockSettings(lease_ms=1000, renew_interval_ms=200, client_expiry_ms=700, socket_timeout_ms=200)


def test_token_is_one_above_everything_any_answering_node_or_this_process_knows():
    assert issue_token([]) == 1
    assert issue_token([0, 0, 0]) == 1
    assert issue_token([7, 3]) == 8  # a node that restarted empty reports 0 or less than the others
    assert issue_token([0, 0], floor=9) == 10  # all answering nodes forgot; this process did not


def test_token_beats_the_last_one_when_one_node_of_the_previous_quorum_lost_its_data():
    # previous acquisition wrote token 5 to nodes 0, 1 and 2 (every answering node);
    # node 1 restarts empty; the next acquisition wins nodes 1 and 2
    reported = {0: 5, 1: 0, 2: 5}
    assert issue_token([reported[1], reported[2]]) > 5


def test_quorum_ttl_is_how_long_a_quorum_still_holds():
    assert quorum_ttl([5000, 50000, 60000], 2) == 50000
    assert quorum_ttl([60000], 2) == 0


def _entry(owner, token="t", fence=3, delivered=None, acked=None, ttl=1000):
    return {"owner": owner, "token": token, "fence": fence, "delivered": delivered, "acked": acked, "ttl_ms": ttl}


def test_describe_needs_a_quorum_of_identical_entries():
    assert agree([_entry("A"), None, None], 2) is None
    assert agree([_entry("A"), _entry("B"), None], 2) is None
    assert agree([_entry("A", token="x"), _entry("A", token="y"), None], 2) is None  # two acquisitions of A
    merged = agree([_entry("A", delivered=10, acked=8, ttl=900), _entry("A", delivered=12, acked=9, ttl=1000),
                    _entry("B")], 2)
    assert merged == {"owner": "A", "fencing_token": 3, "delivered": 12, "acked": 9, "ttl_ms": 900, "votes": 2}


def test_votes_count_only_answering_nodes_that_say_ours():
    assert [m.bit_count() for m in grants([b"101", None, b"100"], 3)] == [2, 0, 1]
    assert [m.bit_count() for m in grants([b"10", b"1"], 2)] == [1, 0]  # a malformed answer is no vote


def test_grants_say_which_nodes_hold_each_lock():
    assert grants([b"101", None, b"100"], 3) == [0b101, 0, 0b001]  # node 2 holds the first lock only
    assert grants([b"1", 1, [b"1"]], 1) == [0b001]  # anything but a flag string grants nothing


def test_partitions_are_validated_and_deduplicated():
    assert partition_pairs([("t", 1), ("t", 0), ("t", 1)]) == [("t", 1), ("t", 0)]
    for bad in (["t"], [("t", -1)], [("", 0)], [("t", "0")], [("t", True)], [None]):
        with pytest.raises(ValueError):
            partition_pairs(bad)


def test_the_scripts_shas_are_those_redis_computes():
    for name, text in SCRIPTS.items():
        assert SHAS[name] == hashlib.sha1(text.encode()).hexdigest() and len(SHAS[name]) == 40


def test_progress_is_sent_until_a_quorum_stored_it():
    held = Held("t", 0, fencing_token=4, acquired_at=0.0, valid_until=0.0)
    lease = Lease(held, "tok", "lock", "fence")
    assert lease.progress() is None
    assert lease.claim_args(None) == ("tok", "4", "", "")
    lease.delivered, lease.acked = 10, 7
    assert lease.progress() == (10, 7)
    lease.written = (10, 7)
    assert lease.progress() is None
    lease.set_fence(5)
    assert lease.claim_args((11, 8)) == ("tok", "5", "11", "8")


def test_held_is_valid_by_the_monotonic_clock():
    now = time.monotonic()
    held = Held("t", 3, fencing_token=1, acquired_at=now, valid_until=now + 1)
    assert held.tp == ("t", 3)
