"""The checker's Prometheus series after a commit, a rollback and a transaction that stays unknown."""

from __future__ import annotations

import pytest

from rocketkafka import Message
from tests.conftest import scrape
from tests.txn.conftest import COMMIT, FAST_CHECKER, ROLLBACK, Store, wait_until

pytestmark = pytest.mark.integration


def test_half_counts_by_state_checks_and_max_checked(rk_settings, rk_topic, make_producer, make_checker):
    topic = rk_topic(partitions=1)
    producer = make_producer("pg", Store().check)  # check-backs answer UNKNOWN
    checker = make_checker()
    port = checker.metrics.serve(0)
    for state in (COMMIT, ROLLBACK, None):  # None: UNKNOWN
        producer.send_message_in_transaction(Message(topic, b"x"), lambda m, arg, s=state: s)

    def value(name: str, **labels: str) -> float | None:
        return scrape(port).get((name, frozenset(labels.items())))

    max_checks = FAST_CHECKER["max_check_times"]
    assert wait_until(lambda: value("rocketkafka_txn_halves_decided_total", decision="max_checked") == 1, 30)
    assert value("rocketkafka_txn_halves_ended_total", state="committed") == 1
    assert value("rocketkafka_txn_halves_ended_total", state="rolled_back") == 1
    assert value("rocketkafka_txn_halves_decided_total", decision="checked") == max_checks
    assert value("rocketkafka_txn_checks_sent_total") == max_checks
    assert value("rocketkafka_txn_halves_decided_total", decision="done") == 2  # the commit and the rollback
    assert value("rocketkafka_txn_halves_decided_total", decision="malformed") == 0
    assert wait_until(lambda: value("rocketkafka_txn_halves_open") == 0, 10)
    owned = {p: value("rocketkafka_txn_lock_owned", partition=str(p)) for p in range(FAST_CHECKER["half_partitions"])}
    assert owned == {p: 1 for p in range(FAST_CHECKER["half_partitions"])}
    assert value("rocketkafka_txn_lock_renew_failures_total") == 0
