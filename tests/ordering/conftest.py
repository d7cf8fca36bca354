"""Shared helpers for consumer tests: fast timings and a producer of numbered messages."""

from __future__ import annotations


import pytest

from rocketkafka import Message, Producer
from rocketkafka.testing.waiting import wait_for

#: Short timings so membership and lock changes happen within a test's patience.
FAST = dict(heartbeat_interval_ms=200, member_timeout_ms=2000, lock_lease_ms=3000, lock_renew_interval_ms=1000,
            lock_client_expiry_ms=2000, rebalance_interval_ms=2000, commit_interval_ms=200,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # the tests send first, then consume

#: FAST with a lease that outlasts a loaded machine's stalls, for tests that claim "no duplicates" with no
#: fault injected. Under FAST a lock is lost when its renewals fail for 2 s, and CI's Apache Kafka run (four
#: JVM brokers, Redis and Spark on two cores) once lost one that way: the lost lock re-delivered the 34 messages
#: handled and not yet committed, as it must (only a graceful change re-delivers nothing, DESIGN §3). A graceful
#: handover unlocks at once, so the longer lease does not slow these tests.
STEADY = {**FAST, "lock_lease_ms": 30_000, "lock_client_expiry_ms": 20_000}


def shut_down(consumers) -> int:
    """Shut ``consumers`` down gracefully; returns how many locks they lost while running (a run that lost
    one was not a graceful change, and its duplicates are a lost lease's, not a handover's)."""
    lost = sum(c.engine.locks_lost for c in consumers)
    for c in consumers:
        c.shutdown()
    return lost


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


def wait_until(predicate, timeout: float = 30.0, interval: float = 0.05) -> bool:
    return wait_for(predicate, timeout, interval)


@pytest.fixture
def produce(rk_settings):
    """``produce(topic, n, tags=None, key_of=None, keys_of=None) -> [msg ids]`` with acks.

    ``key_of(i)`` picks the partition (hash selector), ``keys_of(i)`` sets the message keys.
    """
    producer = Producer("test-producer", settings=rk_settings)
    producer.start()

    def send(topic: str, n: int, tags=None, key_of=None, body=b"x" * 100, keys_of=None) -> list[str]:
        ids, results = [], []
        for i in range(n):
            msg = Message(topic, body=body, tags=tags(i) if callable(tags) else tags, keys=keys_of(i) if keys_of else None)
            if key_of:
                producer.send_async(msg, results.append, selector=_hash, arg=key_of(i))
            else:
                producer.send_async(msg, results.append)
            ids.append(msg.id)
        assert producer.flush(30) == 0
        assert len(results) == n
        return ids

    yield send
    producer.shutdown()


def _hash(n, msg, arg):
    from rocketkafka.queue_selectors import hash_selector

    return hash_selector(n, msg, arg)


def overlapping_keys(calls) -> int:
    """Pairs of calls of one partition but different keys that ran at the same time."""
    found = 0
    by_partition: dict[tuple[str, int], list] = {}
    for c in calls:
        by_partition.setdefault((c.topic, c.partition), []).append(c)
    for items in by_partition.values():
        items.sort(key=lambda c: c.enter)
        for a, b in zip(items, items[1:]):
            if b.enter < a.exit and a.key != b.key:
                found += 1
    return found
