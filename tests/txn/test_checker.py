"""The checker as a sidecar: instances split the half partitions and hand them over on a graceful stop."""

from __future__ import annotations

from collections import Counter

import pytest

from rocketkafka import Message
from rocketkafka.txn import TransactionStatus
from tests.txn.conftest import FAST_MEMBERSHIP, Store, tx_ids, wait_until

pytestmark = pytest.mark.integration


def test_two_checkers_split_the_partitions_and_the_survivor_takes_over_on_stop(rk_settings, rk_topic, make_producer,
                                                                              make_checker, read_topic):
    topic = rk_topic(partitions=4)
    store = Store(default=TransactionStatus.COMMIT)
    producer = make_producer("pg", store.check)
    a, b = make_checker(), make_checker()
    assert wait_until(lambda: len(a.assignment()) == len(b.assignment()) == 2, 20)
    assert a.assignment() | b.assignment() == {0, 1, 2, 3}
    first = [producer.send_message_in_transaction(Message(topic, b"1"), lambda m, arg: None).transaction_id
             for _ in range(20)]
    assert wait_until(lambda: sorted(tx_ids(read_topic(topic))) == sorted(first), 20)
    a.stop()  # graceful: commits, unlocks, leaves; b takes everything without waiting for a lease
    assert wait_until(lambda: b.assignment() == {0, 1, 2, 3}, 10)
    second = [producer.send_message_in_transaction(Message(topic, b"2"), lambda m, arg: None).transaction_id
              for _ in range(20)]
    assert wait_until(lambda: set(tx_ids(read_topic(topic))) == set(first + second), 20)
    assert Counter(tx_ids(read_topic(topic))) == {t: 1 for t in first + second}
    assert a.stats().checks_sent + b.stats().checks_sent >= 40


def test_foreign_records_in_half_and_op_topics_never_block_a_partition(rk_settings, rk_topic, make_producer,
                                                                      make_checker, read_topic):
    from confluent_kafka import Producer as RawProducer

    from rocketkafka.headers import header_map
    from rocketkafka.names import Header

    topic = rk_topic(partitions=1)
    store = Store(default=TransactionStatus.COMMIT)
    producer = make_producer("pg", store.check)  # creates the half and op topics (4 partitions each)
    raw = RawProducer({"bootstrap.servers": rk_settings.bootstrap_servers})
    for p in range(4):  # garbage ahead of real halves in every partition
        raw.produce(rk_settings.topics.half(), b"junk", partition=p, headers=[(Header.REAL_TOPIC, b"\xff\xfe")])
        raw.produce(rk_settings.topics.op(), b"junk", partition=p, headers=[(Header.HALF_OFFSET, b"not-a-number")])
    assert raw.flush(10) == 0
    checker = make_checker()
    ids = [producer.send_message_in_transaction(Message(topic, b"ok"), lambda m, arg: None).transaction_id
           for _ in range(8)]
    assert wait_until(lambda: sorted(tx_ids(read_topic(topic))) == sorted(ids), 20)
    parked = read_topic(rk_settings.topics.max_check())
    assert len(parked) == 4 and all(header_map(r.headers())[Header.DLQ_REASON] for r in parked)
    assert checker.stats().malformed == 4


@pytest.mark.rk_needs("pause-redis")
def test_halves_paused_at_the_buffer_limit_are_fetched_again_after_the_lock_was_lost(rk_backend, rk_settings, rk_topic,
                                                                                     make_producer, make_checker,
                                                                                     read_topic):
    """The checker loses its lock (a Redis majority stops answering) while fetching of its half partition is paused
    at the buffer limit. librdkafka keeps a pause through unassign and assign, so unless the engine resumes the
    partition as it lets it go, the retaken claim never fetches a half again and nothing is ever checked (seen
    under load: 10,000 pending halves stalled after one lock round timed out)."""
    topic = rk_topic(partitions=1)
    producer = make_producer("pg", lambda m: TransactionStatus.COMMIT, half_partitions=1)
    # halves younger than the timeout wait in the buffer: it fills past its limit and the partition is paused
    checker = make_checker(half_partitions=1, max_buffered_halves=10, transaction_timeout_ms=20_000)
    ids = [producer.send_message_in_transaction(Message(topic, b"%d" % i), lambda m, arg: TransactionStatus.UNKNOWN)
           .transaction_id for i in range(100)]
    assert wait_until(lambda: checker.stats().buffered_halves > 10, 10), checker.stats()
    assert checker.stats().checks_sent == 0, "a half was checked: the buffer drains and the partition resumes"
    expiry_s = (FAST_MEMBERSHIP["lock_client_expiry_ms"] + FAST_MEMBERSHIP["lock_renew_interval_ms"]) / 1000
    stopped: list[int] = []
    try:
        for index in (0, 1):
            rk_backend.pause_redis(index)
            stopped.append(index)
        assert wait_until(lambda: checker.stats().locks_lost >= 1, expiry_s + 5), "the lock was never lost"
    finally:
        for index in stopped:
            rk_backend.resume_redis(index)
    assert wait_until(lambda: sorted(tx_ids(read_topic(topic))) == sorted(ids), 60), \
        f"{len(tx_ids(read_topic(topic)))} of {len(ids)} committed; checker {checker.stats()}"
