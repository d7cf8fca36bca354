"""The checker as a sidecar: instances split the half partitions and hand them over on a graceful stop."""

from __future__ import annotations

from collections import Counter

import pytest

from facade import Message
from txn import TransactionStatus
from tests.txn.conftest import wait_until
from tests.txn.test_transactions import Store, tx_ids

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
