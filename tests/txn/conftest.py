"""Shared helpers for transaction tests: scaled-down timings, producers and checkers that clean up."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest

from rocketkafka.testing.waiting import wait_for

from rocketkafka.testing.reading import read_all
from rocketkafka.ordering.engine.options import ConsumerOptions
from rocketkafka.headers import header_map
from rocketkafka.names import Header
from rocketkafka.txn import CheckerOptions, TransactionChecker, TransactionMQProducer, TransactionOptions
from rocketkafka.txn.status import TransactionStatus

#: Membership and lock timings short enough for a dead member's share to move within seconds.
FAST_MEMBERSHIP = dict(heartbeat_interval_ms=200, member_timeout_ms=2000, lock_lease_ms=3000,
                       lock_renew_interval_ms=1000, lock_client_expiry_ms=2000, rebalance_interval_ms=2000)
#: RocketMQ's 6 s timeout / 60 s interval / 15 checks, scaled down.
FAST_CHECKER = dict(transaction_timeout_ms=1000, check_interval_ms=500, max_check_times=3, half_partitions=4,
                    **FAST_MEMBERSHIP)


COMMIT, ROLLBACK, UNKNOWN = TransactionStatus.COMMIT, TransactionStatus.ROLLBACK, TransactionStatus.UNKNOWN


class Store:
    """The user's local transaction store: what check_local_transaction consults, and how often it was asked."""

    def __init__(self, default=UNKNOWN) -> None:
        self.state: dict[str, TransactionStatus] = {}
        self.checks: Counter[str] = Counter()
        self.default = default
        self.lock = threading.Lock()

    def check(self, msg) -> TransactionStatus:
        with self.lock:
            self.checks[msg.transaction_id] += 1
        return self.state.get(msg.transaction_id, self.default)


def tx_ids(records) -> list[str]:
    return [header_map(r.headers())[Header.TRANSACTION_ID].decode() for r in records]


def fast_producer_options(**overrides) -> TransactionOptions:
    check = ConsumerOptions(commit_interval_ms=200, **FAST_MEMBERSHIP)
    return TransactionOptions(**{"half_partitions": 4, "check": check, **overrides})


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0, interval: float = 0.1) -> bool:
    return wait_for(predicate, timeout, interval) or bool(predicate())


@pytest.fixture
def make_producer(rk_settings):
    """``make_producer(group, check_or_listener, **options)``: a started TransactionMQProducer, shut down after the test."""
    made: list[TransactionMQProducer] = []

    def make(group: str, check, **overrides) -> TransactionMQProducer:
        producer = TransactionMQProducer(group, check, settings=rk_settings, options=fast_producer_options(**overrides))
        producer.start()
        made.append(producer)
        return producer

    yield make
    for producer in made:
        producer.shutdown()


@pytest.fixture
def make_checker(rk_settings):
    """``make_checker(**options)``: a started in-process TransactionChecker with scaled-down timings."""
    made: list[TransactionChecker] = []

    def make(**overrides) -> TransactionChecker:
        checker = TransactionChecker(rk_settings, CheckerOptions(**{**FAST_CHECKER, **overrides}))
        checker.start()
        made.append(checker)
        return checker

    yield make
    for checker in made:
        checker.stop()


@pytest.fixture
def read_topic(rk_settings):
    """``read_topic(name)``: every record of a topic, read with a plain consumer."""
    return lambda topic, timeout=20.0: read_all(rk_settings.bootstrap_servers, topic, timeout)
