"""The partition lock table against three real Redis nodes: who may hold a partition, and when.

Each test reads as one guarantee of the lock table (DESIGN §3, "Order" and "No loss"):
one owner per partition, hand-over only after unlock or lease expiry, the old owner
knows it lost before the new one wins, fencing tokens only grow (also across node
restarts), one node of three may be down or slow, two down means nothing is held.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import redis

from rocketkafka.errors import ConfigError, StateError
from rocketkafka.ordering.engine.keeper import Keeper
from rocketkafka.ordering.locks import LockSettings, LockTable
from rocketkafka.testing.capabilities import Capability

pytestmark = pytest.mark.integration

#: Short timings: a lease of 1 s, lost at the client after 0.7 s without a renewal.
SHORT = LockSettings(lease_ms=1000, renew_interval_ms=200, client_expiry_ms=700, socket_timeout_ms=200)
#: For a test of renewals over several leases: under SHORT a stall of half a second (CI's Kafka run, four JVM
#: brokers on two cores) is a lost lock, which is what a lease is for, not a failure of renewals.
RENEWING = LockSettings(lease_ms=3000, renew_interval_ms=500, client_expiry_ms=2000, socket_timeout_ms=500)


def wait_until(predicate: Callable[[], object], timeout: float = 10.0, interval: float = 0.02) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := predicate():
            return result
        time.sleep(interval)
    return None


@pytest.fixture
def tables(rk_backend, rk_settings, rk_group) -> Iterator[Callable[..., LockTable]]:
    """``tables(owner, settings=LockSettings())``: lock tables of one group, closed after the test."""
    made: list[LockTable] = []

    def make(owner: str, settings: LockSettings = LockSettings()) -> LockTable:
        table = LockTable(rk_backend.redis_urls, rk_group, owner, rk_settings.keys, settings)
        made.append(table)
        return table

    yield make
    for table in made:
        table.close()


@pytest.fixture
def nodes(rk_backend) -> Iterator[object]:
    """Stop and restart Redis nodes (restarted empty); every node runs again after the test.

    Declares the capability: on a backend that cannot stop Redis nodes the test is skipped with the reason.
    """
    if (reason := rk_backend.missing(Capability.STOP_REDIS)) is not None:
        pytest.skip(reason)
    stopped: set[int] = set()

    class Nodes:
        def stop(self, index: int) -> None:
            rk_backend.stop_redis(index)
            stopped.add(index)

        def start(self, index: int) -> None:
            rk_backend.start_redis(index)
            stopped.discard(index)

        def restart_empty(self, index: int) -> None:
            self.stop(index)
            self.start(index)

    yield Nodes()
    for index in sorted(stopped):
        rk_backend.start_redis(index)


def fence_counters(rk_backend, rk_settings, group: str, tp: tuple[str, int]) -> list[int | None]:
    values = []
    for url in rk_backend.redis_urls:
        raw = redis.Redis.from_url(url).get(rk_settings.keys.fence(group, *tp))
        values.append(None if raw is None else int(raw))
    return values


P = [("orders", p) for p in range(8)]


def _take(table: LockTable, partitions: list) -> dict:
    """``table`` locks all of ``partitions``, trying again while a round misses its quorum: SHORT's 200 ms round
    passed before its calls started once, on a starved CI machine. What is taken is the test's start, not its claim."""
    won = wait_until(lambda: (got := table.lock_batch(partitions)) and len(got) == len(partitions) and got, timeout=10)
    assert won, f"{table.owner} never locked {partitions}"
    return won


# -- mutual exclusion ------------------------------------------------------------------------------
def test_exactly_one_owner_wins_each_partition_when_two_compete(tables):
    a, b = tables("A"), tables("B")
    won: dict[str, dict] = {}
    start = threading.Barrier(2)

    def compete(name: str, table: LockTable) -> None:
        start.wait()
        won[name] = table.lock_batch(P)

    threads = [threading.Thread(target=compete, args=(n, t)) for n, t in (("A", a), ("B", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not won["A"].keys() & won["B"].keys()
    assert won["A"].keys() | won["B"].keys() == set(P)
    assert {tp for tp in P if a.is_held(tp)} == won["A"].keys()
    assert {tp for tp in P if b.is_held(tp)} == won["B"].keys()
    # a second round changes nothing: held partitions stay with their owner
    assert b.lock_batch(won["A"]) == {}
    assert a.lock_batch(won["B"]) == {}


def test_lock_batch_is_reentrant_and_keeps_the_fencing_token(tables):
    a = tables("A")
    first = a.lock_batch(P[:2])
    again = a.lock_batch(P)
    assert again.keys() == set(P)
    for tp in P[:2]:
        assert again[tp].fencing_token == first[tp].fencing_token
        assert again[tp].valid_until > first[tp].valid_until
    assert a.held().keys() == set(P)


def test_many_locks_go_in_rounds_of_a_bounded_size_and_each_has_one_owner(tables, monkeypatch):
    from rocketkafka.ordering.locks import table as table_module

    monkeypatch.setattr(table_module, "ROUND_LOCKS", 3)  # 10 locks: rounds of 3, 3, 3 and 1
    many = [("orders", p) for p in range(10)]
    a, b = tables("A"), tables("B")
    sizes: list[int] = []
    claim = a._calls.claim
    monkeypatch.setattr(a._calls, "claim", lambda leases: sizes.append(len(leases)) or claim(leases))
    assert a.lock_batch(many).keys() == set(many) and b.lock_batch(many) == {}
    assert sizes == [3, 3, 3, 1]
    a.unlock_batch(many[:7])
    assert a.held().keys() == set(many[7:]) and b.lock_batch(many).keys() == set(many[:7])


def test_other_owner_wins_after_unlock_with_a_larger_fencing_token(tables):
    a, b = tables("A"), tables("B")
    token_a = a.lock_batch(P[:1])[P[0]].fencing_token
    assert b.lock_batch(P[:1]) == {}
    a.unlock_batch(P[:1])
    assert not a.is_held(P[0]) and a.fencing_token(P[0]) is None
    won = b.lock_batch(P[:1])
    assert won[P[0]].fencing_token > token_a
    assert b.fencing_token(P[0]) == won[P[0]].fencing_token


def test_other_owner_wins_after_lease_expiry_and_the_old_owner_knew_first(tables):
    a, b = tables("A", SHORT), tables("B", SHORT)
    held_a = _take(a, P[:1])[P[0]]
    assert b.lock_batch(P[:1]) == {}

    won = wait_until(lambda: b.lock_batch(P[:1]), timeout=5)  # A never renews
    won_at = time.monotonic()

    assert won, "B never won after A's lease expired"
    assert not a.is_held(P[0])
    assert held_a.valid_until < won_at - 0.2  # A gave up well before B could win
    assert won[P[0]].fencing_token > held_a.fencing_token
    assert a.renew_batch() == {P[0]}  # A learns it on its next renewal ...
    assert b.describe(P[0])["owner"] == "B"  # ... and its release does not touch B's entry


def test_stale_unlock_does_not_release_the_new_owners_lock(tables):
    a, b = tables("A", SHORT), tables("B", SHORT)
    _take(a, P[:1])
    assert wait_until(lambda: b.lock_batch(P[:1]), timeout=5)
    before = b.describe(P[0])  # B won a quorum; A's entry may linger on a node whose copy expires later
    a.unlock_batch(P[:1])  # A still believes it had it: its token no longer matches B's entries
    after = b.describe(P[0])
    assert before["owner"] == after["owner"] == "B"
    assert after["votes"] == before["votes"] >= 2


@contextmanager
def _renewing(table: LockTable, on_lost):
    """The engine's keeper renewing ``table`` (no membership), as long as the block runs."""
    keeper = Keeper(None, table, dict, lambda members: None, on_lost, heartbeat_s=1.0, tick_s=0.05, name="test")
    keeper.start([])
    try:
        yield keeper
    finally:
        keeper.stop()


def test_renewals_keep_the_lock_past_its_lease(tables):
    a, b = tables("A", RENEWING), tables("B", RENEWING)
    token = _take(a, P[:2])[P[0]].fencing_token
    lost: list[set] = []
    with _renewing(a, lost.append):
        deadline = time.monotonic() + 2.5 * RENEWING.lease_ms / 1000
        while time.monotonic() < deadline:
            assert b.lock_batch(P[:2]) == {}
            time.sleep(0.1)
    assert lost == []
    assert a.is_held(P[0]) and a.fencing_token(P[0]) == token


def test_renew_due_after_the_interval(tables):
    # a 1 s interval: a round slower than SHORT's 200 ms interval (seen under load) made a lock due at once
    a = tables("A", LockSettings(lease_ms=4000, renew_interval_ms=1000, client_expiry_ms=3000, socket_timeout_ms=1000))
    assert not a.renew_due()  # nothing held
    a.lock_batch(P[:1])
    assert not a.renew_due()
    assert wait_until(a.renew_due, timeout=3)
    assert a.renew_batch() == set()
    assert not a.renew_due()


def test_close_releases_every_lock_and_refuses_further_use(tables):
    a, b = tables("A"), tables("B")
    a.lock_batch(P)
    a.close()
    assert b.lock_batch(P).keys() == set(P)
    with pytest.raises(StateError):
        a.lock_batch(P[:1])
    with pytest.raises(StateError):
        a.renew_batch()
    a.close()  # idempotent


# -- fencing tokens ----------------------------------------------------------------------------------
def test_fencing_tokens_strictly_increase_across_acquisitions(tables):
    owners = [tables("A"), tables("B"), tables("C")]
    tokens = []
    for i in range(9):
        table = owners[i % 3]
        tokens.append(table.lock_batch(P[:1])[P[0]].fencing_token)
        table.unlock_batch(P[:1])
    assert tokens == sorted(set(tokens)), tokens


def test_fencing_token_increases_after_a_node_restarted_empty(tables, nodes, rk_backend, rk_settings, rk_group):
    a, b = tables("A"), tables("B")
    first = a.lock_batch(P[:1])[P[0]].fencing_token
    a.unlock_batch(P[:1])
    nodes.restart_empty(0)
    assert fence_counters(rk_backend, rk_settings, rk_group, P[0])[0] is None  # node 0 forgot everything
    second = b.lock_batch(P[:1])[P[0]].fencing_token
    assert second > first
    assert fence_counters(rk_backend, rk_settings, rk_group, P[0]) == [second] * 3  # written back everywhere


def test_renewals_heal_nodes_so_every_node_may_restart_once(tables, nodes, rk_backend, rk_settings, rk_group):
    a, b = tables("A"), tables("B")
    first = a.lock_batch(P[:1])[P[0]].fencing_token
    for index in range(3):  # each node in turn loses all its data; A renews in between
        nodes.restart_empty(index)
        assert a.renew_batch() == set()
        assert a.describe(P[0])["votes"] == 3
    assert fence_counters(rk_backend, rk_settings, rk_group, P[0]) == [first] * 3
    a.unlock_batch(P[:1])
    assert b.lock_batch(P[:1])[P[0]].fencing_token > first


# -- node failures ----------------------------------------------------------------------------------------
def test_locking_works_with_one_of_three_nodes_down(tables, nodes):
    a, b = tables("A"), tables("B")
    nodes.stop(2)
    won = a.lock_batch(P)
    assert won.keys() == set(P)
    assert b.lock_batch(P) == {}
    assert a.renew_batch() == set()
    assert a.describe(P[0])["votes"] == 2
    nodes.start(2)
    assert a.renew_batch() == set()  # the restarted node gets the entries back
    assert a.describe(P[0])["votes"] == 3


def test_with_two_of_three_nodes_down_nothing_is_won_and_held_locks_are_lost(tables, nodes):
    a, b = tables("A"), tables("B")
    token = a.lock_batch(P[:4])[P[0]].fencing_token
    nodes.stop(1)
    nodes.stop(2)
    assert a.renew_batch() == set(P[:4])
    assert a.held() == {} and not a.is_held(P[0])
    assert a.lock_batch(P[4:]) == {}
    assert b.lock_batch(P) == {}
    nodes.start(1)
    nodes.start(2)
    # A released what it still had on node 0, nodes 1 and 2 came back empty: B may lock now,
    # and node 0 still knows A's token
    won = b.lock_batch(P[:1])
    assert won[P[0]].fencing_token > token


def test_renewer_reports_locks_lost_when_a_quorum_is_gone(tables, nodes):
    a = tables("A", SHORT)
    _take(a, P[:3])
    lost: list[set] = []
    with _renewing(a, lost.append):
        nodes.stop(0)
        nodes.stop(1)
        assert wait_until(lambda: lost, timeout=3)
    assert set().union(*lost) == set(P[:3])
    assert a.held() == {}


def test_a_slow_node_is_a_no_vote_and_does_not_hold_up_the_batch(tables, rk_backend):
    a = tables("A")  # socket timeout 200 ms
    slow = redis.Redis.from_url(rk_backend.redis_urls[0])
    sleeper = threading.Thread(target=slow.execute_command, args=("DEBUG", "SLEEP", "2"))
    sleeper.start()
    try:
        time.sleep(0.05)
        started = time.monotonic()
        won = a.lock_batch(P)
        elapsed = time.monotonic() - started
    finally:
        sleeper.join()
    assert won.keys() == set(P)
    assert elapsed < 1.5  # two rounds, each bounded by the socket timeout, not by the 2 s sleep


# -- transition state ---------------------------------------------------------------------------------------
def test_recorded_progress_reaches_the_entry_with_the_next_renewal(tables):
    a, b = tables("A"), tables("B")
    held = a.lock_batch(P[:1])[P[0]]
    before = b.describe(P[0])
    assert before["owner"] == "A" and before["delivered"] is None and before["acked"] is None
    a.record_progress(P[0], delivered=42, acked=40)
    assert a.renew_batch() == set()
    entry = b.describe(P[0])
    assert entry["owner"] == "A"
    assert entry["fencing_token"] == held.fencing_token
    assert (entry["delivered"], entry["acked"]) == (42, 40)
    assert 0 < entry["ttl_ms"] <= LockSettings().lease_ms
    assert entry["votes"] == 3
    a.record_progress(P[0], delivered=50, acked=50)
    a.lock_batch(P[:1])  # a re-entrant lock_batch is a renewal too
    assert (b.describe(P[0])["delivered"], b.describe(P[0])["acked"]) == (50, 50)
    a.unlock_batch(P[:1])
    assert b.describe(P[0]) is None


def test_describe_of_a_free_partition_is_none(tables):
    assert tables("A").describe(P[0]) is None


def test_record_progress_refuses_non_integers(tables):
    a = tables("A")
    a.lock_batch(P[:1])
    with pytest.raises(TypeError):
        a.record_progress(P[0], "42", 40)


def test_bad_arguments_fail_at_the_call(rk_backend, rk_settings, rk_group):
    with pytest.raises(ConfigError):
        LockTable([], rk_group, "A", rk_settings.keys)
    with pytest.raises(ConfigError):
        LockTable(rk_backend.redis_urls, rk_group, "", rk_settings.keys)
    with pytest.raises(ConfigError):
        LockTable(["http://nowhere"], rk_group, "A", rk_settings.keys)
    with LockTable(rk_backend.redis_urls, rk_group, "A", rk_settings.keys) as table:
        with pytest.raises(ValueError):
            table.lock_batch([("orders", -1)])
        with pytest.raises(ValueError):
            table.lock_batch(["orders"])


# -- session leases ----------------------------------------------------------------------------------------
def _commands_on(url: str, action: Callable[[], object], needle: str) -> list[str]:
    """The commands node ``url`` ran (scripts' inner calls included) that name ``needle``, while ``action`` ran.

    Read from MONITOR up to a marker sent after the action, so nothing is missed and no wait is guessed.
    """
    marker = f"rk-test-marker-{time.monotonic_ns()}"
    watcher = redis.Redis.from_url(url, socket_timeout=30)
    seen: list[str] = []
    with watcher.monitor() as monitor:
        action()
        redis.Redis.from_url(url).echo(marker)
        while marker not in (command := monitor.next_command()["command"]):
            if needle in command:
                seen.append(command)
    return seen


def test_a_renewal_costs_the_same_few_commands_for_one_lock_and_for_two_hundred(tables, rk_backend, rk_group):
    url = rk_backend.redis_urls[0]
    few, many = tables("A"), tables("B")
    few.lock_batch(P[:1])
    many.lock_batch([("orders", p) for p in range(100, 300)])
    few.renew_batch()  # a node's first RENEW may meet NOSCRIPT and send the script again: not counted
    one = _commands_on(url, few.renew_batch, "{%s}" % rk_group)
    two_hundred = _commands_on(url, many.renew_batch, "{%s}" % rk_group)
    assert len(one) == len(two_hundred) <= 4, (one, two_hundred)  # EVALSHA; the stamp read and moved; PEXPIRE
    many.record_progress(("orders", 100), delivered=5, acked=4)
    with_progress = _commands_on(url, many.renew_batch, "{%s}" % rk_group)
    assert len(with_progress) == len(two_hundred) + 2, with_progress  # the entry's token read, progress written


def test_a_node_back_from_an_older_copy_is_claimed_again_in_full(tables, rk_backend, rk_settings, rk_group):
    a = tables("A")
    a.lock_batch(P[:1])
    node = redis.Redis.from_url(rk_backend.redis_urls[0])
    session = rk_settings.keys.session(rk_group, "A")
    older = node.dump(session)  # node 0 as a snapshot taken now would bring it back
    a.lock_batch(P[1:2])
    node.restore(session, 0, older, replace=True)
    node.delete(rk_settings.keys.lock(rk_group, *P[1]))
    assert a.describe(P[1])["votes"] == 2
    assert a.renew_batch() == set()
    assert a.describe(P[1])["votes"] == 3  # the renewal saw the older stamp and rewrote the lost entry
    assert a.describe(P[0])["votes"] == 3


def test_a_crashed_owners_entries_stay_but_are_free_after_its_lease(tables, rk_backend, rk_settings, rk_group):
    a, b = tables("A", SHORT), tables("B", SHORT)
    token = _take(a, P[:2])[P[0]].fencing_token
    a.close(release=False)  # as a SIGKILL leaves them: no release, no more renewals
    assert b.lock_batch(P[:2]) == {}
    won = wait_until(lambda: b.lock_batch(P[:2]), timeout=5)
    assert won and won.keys() == set(P[:2]), "B never won after A's session expired"
    assert won[P[0]].fencing_token > token
    entries = [redis.Redis.from_url(url).hget(rk_settings.keys.lock(rk_group, *P[0]), "owner")
               for url in rk_backend.redis_urls]
    assert entries.count(b"B") >= 2  # B overwrote A's entries, which had no expiry of their own


def test_describe_shows_no_owner_once_its_session_is_gone(tables):
    a, b = tables("A", SHORT), tables("B", SHORT)
    _take(a, P[:1])
    a.close(release=False)
    assert b.describe(P[0])["owner"] == "A"
    assert wait_until(lambda: b.describe(P[0]) is None, timeout=5)


def _old_style_entry(rk_backend, rk_settings, group: str, tp: tuple[str, int], ttl_ms: int,
                     nodes: range | None = None) -> None:
    """An entry as a member of the version before sessions writes it: the lease is its own TTL."""
    for index in nodes or range(len(rk_backend.redis_urls)):
        client = redis.Redis.from_url(rk_backend.redis_urls[index])
        key = rk_settings.keys.lock(group, *tp)
        client.hset(key, mapping={"owner": "old@1", "token": "t", "fence": "1"})
        client.pexpire(key, ttl_ms)


def test_an_entry_leased_the_old_way_is_live_until_its_ttl_ends(tables, rk_backend, rk_settings, rk_group):
    """A rolling upgrade: a member of the old version holds the partition until its lease runs out."""
    b = tables("B", SHORT)
    _old_style_entry(rk_backend, rk_settings, rk_group, P[0], ttl_ms=1500)
    assert b.lock_batch(P[:1]) == {}
    assert b.describe(P[0])["owner"] == "old@1"
    assert wait_until(lambda: b.lock_batch(P[:1]), timeout=5)


def test_a_node_that_refused_a_lock_grants_it_at_a_later_renewal(tables, rk_backend, rk_settings, rk_group):
    a = tables("A")
    _old_style_entry(rk_backend, rk_settings, rk_group, P[0], ttl_ms=1000, nodes=range(1))
    assert a.lock_batch(P[:1]).keys() == {P[0]}  # nodes 1 and 2
    assert a.describe(P[0])["votes"] == 2
    assert wait_until(lambda: not redis.Redis.from_url(rk_backend.redis_urls[0]).exists(
        rk_settings.keys.lock(rk_group, *P[0])), timeout=5)
    assert a.renew_batch() == set()
    assert a.describe(P[0])["votes"] == 3  # node 0 was asked to claim it again, not only to renew


def test_a_node_back_from_a_copy_taken_before_a_full_claim_is_claimed_again(tables, rk_backend, rk_settings,
                                                                           rk_group):
    a = tables("A")
    _old_style_entry(rk_backend, rk_settings, rk_group, P[0], ttl_ms=1000, nodes=range(2, 3))
    assert a.lock_batch(P[:1]).keys() == {P[0]}  # nodes 0 and 1
    node = redis.Redis.from_url(rk_backend.redis_urls[2])
    session, entry = rk_settings.keys.session(rk_group, "A"), rk_settings.keys.lock(rk_group, *P[0])
    older = node.dump(session)
    assert wait_until(lambda: not node.exists(entry), timeout=5)
    assert a.renew_batch() == set()  # node 2 is claimed in full and grants the lock
    assert a.describe(P[0])["votes"] == 3
    node.restore(session, 0, older, replace=True)  # node 2 as a copy taken before that claim brings it back
    node.delete(entry)
    assert a.renew_batch() == set()
    assert a.describe(P[0])["votes"] == 3  # the renewal saw the older stamp and claimed the lock there again
