"""`admin reset-offset` under a running group re-delivers exactly from the requested point (history checker)."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from rocketkafka import PushConsumer
from rocketkafka.testing.capabilities import Capability
from rocketkafka.testing.history import History, check
from rocketkafka.testing.reading import committed_offsets
from tests.admin.conftest import FAST, wait_until

pytestmark = pytest.mark.integration


#: Long lock leases and member timeout: the tests judge who applied a reset. With FAST's 2 s client expiry a
#: loaded machine (four JVM brokers beside four workers in CI) let the owner's lock lapse once, and with its 2 s
#: member timeout a late heartbeat made the owner drop out of its own group and let the partitions go for a
#: moment: either way the admin found the partition unowned and applied the reset itself.
STEADY_LOCKS = dict(FAST, lock_lease_ms=15000, lock_client_expiry_ms=12000, heartbeat_interval_ms=1000,
                    member_timeout_ms=15000)


def _running(settings, group, topic, history, name="c1"):
    consumer = PushConsumer(group, settings=settings, orderly=True, **STEADY_LOCKS)

    def handle(msg):
        with history.handler_call(name, msg):
            pass

    consumer.subscribe(topic, handle)
    consumer.start()
    return consumer


def test_reset_to_an_offset_while_running_redelivers_exactly_from_there(rk_settings, rk_topic, rk_group, send,
                                                                        admin_json):
    topic = rk_topic(partitions=2)
    ids = {p: send(topic, 50, partition=p) for p in (0, 1)}
    history = History()
    consumer = _running(rk_settings, rk_group, topic, history)
    try:
        assert wait_until(lambda: committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 2) == {0: 50, 1: 50})
        assert len(history.calls) == 100
        outcomes = admin_json("reset-offset", rk_group, topic, "--to", "20", "--partition", "1")
        assert [(o["partition"], o["before"], o["after"], o["applied_by"]) for o in outcomes] == \
            [(1, 50, 20, consumer.instance_name)]
        assert wait_until(lambda: len(history.calls) >= 130)
        time.sleep(1.0)  # nothing more may come
        again = history.calls[100:]
        assert [(c.partition, c.offset) for c in again] == [(1, o) for o in range(20, 50)]
        report = check(again, ids[1][20:])
        assert (report.lost_count, report.duplicate_count, report.reorders, report.overlaps) == (0, 0, [], [])
        assert wait_until(lambda: committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 2) == {0: 50, 1: 50})
    finally:
        consumer.shutdown()


def _sent_around_a_moment(topic, send):
    """30 records, a moment, 20 more: the ids of the 20."""
    send(topic, 30)
    time.sleep(1.0)
    moment = datetime.now().astimezone()
    time.sleep(0.3)
    return moment, send(topic, 20)


def _redelivered_exactly(history: History, later: list[str]) -> None:
    """After a reset from 50 to 30: the 20 records from the moment on come again, once each, in order."""
    assert wait_until(lambda: len(history.calls) >= 70)
    time.sleep(1.0)  # nothing more may come
    report = check(history.calls[50:], later)
    assert (report.calls, report.lost_count, report.duplicate_count, report.reorders) == (20, 0, 0, [])


def test_reset_by_time_is_refused_where_the_broker_answers_by_write_time_unless_forced(rk_backend, rk_settings,
                                                                                      rk_topic, rk_group, send, admin,
                                                                                      admin_json):
    """Tansu answers offsets_for_times by batch write time: a reset by time is refused unless forced."""
    if rk_backend.missing(Capability.OFFSETS_BY_TIME) is None:
        pytest.skip("this broker answers offsets_for_times by record timestamps: nothing to refuse "
                    "(test_reset_by_time_redelivers_from_that_time runs instead)")
    topic = rk_topic(partitions=1)
    moment, later = _sent_around_a_moment(topic, send)
    history = History()
    consumer = _running(rk_settings, rk_group, topic, history)
    try:
        assert wait_until(lambda: committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 1)[0] == 50)
        code, text = admin("reset-offset", rk_group, topic, "--to", moment.isoformat())
        assert code == 1 and "offsets_for_times" in text and "--force" in text
        assert committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 1)[0] == 50  # nothing moved
        [outcome] = admin_json("reset-offset", rk_group, topic, "--to", moment.isoformat(), "--force")
        assert (outcome["before"], outcome["after"]) == (50, 30)
        _redelivered_exactly(history, later)
    finally:
        consumer.shutdown()


@pytest.mark.rk_needs("offsets-by-time")
def test_reset_by_time_redelivers_from_that_time(rk_settings, rk_topic, rk_group, send, admin_json):
    """Apache Kafka answers offsets_for_times by record timestamps: ``--to TIME`` works without ``--force``."""
    topic = rk_topic(partitions=1)
    moment, later = _sent_around_a_moment(topic, send)
    history = History()
    consumer = _running(rk_settings, rk_group, topic, history)
    try:
        assert wait_until(lambda: committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 1)[0] == 50)
        [outcome] = admin_json("reset-offset", rk_group, topic, "--to", moment.isoformat())
        assert (outcome["before"], outcome["after"]) == (50, 30)
        _redelivered_exactly(history, later)
    finally:
        consumer.shutdown()


def test_reset_of_a_stopped_group_is_applied_by_the_admin(rk_settings, rk_topic, rk_group, send, admin_json, admin):
    topic = rk_topic(partitions=2)
    send(topic, 10, partition=0)
    history = History()
    consumer = _running(rk_settings, rk_group, topic, history)
    assert wait_until(lambda: committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 2)[0] == 10)
    consumer.shutdown()
    outcomes = admin_json("reset-offset", rk_group, topic, "--to", "earliest")
    assert [(o["partition"], o["after"], o["applied_by"]) for o in outcomes] == [(0, 0, "admin"), (1, 0, "admin")]
    assert committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 2) == {0: 0, 1: 0}
    code, text = admin("reset-offset", rk_group, topic, "--to", "11")
    assert code == 1 and "Error: offset 11 is outside" in text
    code, text = admin("reset-offset", rk_group, topic, "--to", "yesterday")
    assert code == 1 and "expected earliest, latest, an offset or an ISO 8601 time" in text
