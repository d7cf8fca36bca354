"""`admin consumer-progress`, `consumer-status` and `locks` against what a running group did."""

from __future__ import annotations

import pytest

from rocketkafka import ConsumeOrderlyStatus, PushConsumer
from rocketkafka.testing.reading import committed_offsets
from tests.admin.conftest import FAST, wait_until

pytestmark = pytest.mark.integration


def test_progress_after_consuming_70_of_100_shows_lag_30_and_the_owner(rk_settings, rk_topic, rk_group, send,
                                                                       admin, admin_json):
    topic = rk_topic(partitions=1)
    send(topic, 100)
    handled = []

    def listener(msg):  # orderly: offsets from 70 on are suspended in place, so the commit stays at 70
        if msg.queue_offset >= 70:
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        handled.append(msg.queue_offset)
        return None

    consumer = PushConsumer(rk_group, settings=rk_settings, orderly=True, max_reconsume_times=1000,
                            suspend_current_queue_time_ms=200, **FAST)
    consumer.subscribe(topic, listener)
    consumer.start()
    try:
        assert wait_until(lambda: committed_offsets(rk_settings.bootstrap_servers, rk_group, topic, 1)[0] == 70)
        [row] = admin_json("consumer-progress", rk_group)
        assert (row["topic"], row["partition"], row["committed"], row["end"], row["lag"]) == (topic, 0, 70, 100, 30)
        assert row["owner"] == consumer.instance_name
        assert row["fencing_token"] == consumer.engine.fencing_token((topic, 0)) > 0
        assert 0 < row["lease_left_ms"] <= FAST["lock_lease_ms"]
        code, text = admin("consumer-progress", rk_group)
        assert code == 0 and consumer.instance_name in text
        assert [line.split("|")[4].strip() for line in text.splitlines()[2:]] == ["30", "30"]  # the row, the total
    finally:
        consumer.shutdown()
    assert handled == list(range(70))
    [row] = admin_json("consumer-progress", rk_group)  # after a graceful leave: committed stays, nobody owns it
    assert (row["committed"], row["lag"], row["owner"]) == (70, 30, None)


def test_status_lists_members_their_allocation_and_what_each_owns(rk_settings, rk_topic, rk_group, send, admin_json,
                                                                  admin):
    topic = rk_topic(partitions=4)
    consumers = []
    for _ in range(2):
        c = PushConsumer(rk_group, settings=rk_settings, **FAST)
        c.subscribe(topic, lambda m: None)
        c.start()
        consumers.append(c)
    try:
        assert wait_until(lambda: all(len([tp for tp in c.assignment() if tp[0] == topic]) == 2 for c in consumers)
                          and sorted(tp for c in consumers for tp in c.assignment() if tp[0] == topic)
                          == [(topic, p) for p in range(4)])
        status = admin_json("consumer-status", rk_group)
        members = {m["id"]: m for m in status["members"]}
        assert set(members) == {c.instance_name for c in consumers}
        assert status["allocation"] == ["averagely"]
        for c in consumers:
            assert members[c.instance_name]["info"]["topics"][0] == topic
            assert members[c.instance_name]["info"]["client"] == f"consumer {c.instance_name} of group {rk_group}"
            owned = sorted(tuple(tp) for tp in status["assignment"][c.instance_name] if tp[0] == topic)
            assert owned == sorted(tp for tp in c.assignment() if tp[0] == topic) and len(owned) == 2
        assert status["unowned"] == [] or all(tp[0] != topic for tp in status["unowned"])

        locks = admin_json("locks", rk_group)
        by_tp = {(v["topic"], v["partition"]): v for v in locks}
        for c in consumers:
            for tp in c.assignment():
                assert by_tp[tp]["owner"] == c.instance_name
                assert by_tp[tp]["fencing_token"] == c.engine.fencing_token(tp)
        code, text = admin("consumer-status", rk_group)
        assert code == 0 and all(c.instance_name in text for c in consumers) and "averagely" in text
    finally:
        for c in consumers:
            c.shutdown()


def test_an_unknown_group_is_one_error_line(admin):
    code, text = admin("consumer-progress", "no-such-group-anywhere")
    assert code == 1
    assert text.strip().splitlines() == [
        "Error: group 'no-such-group-anywhere' has no live member and no committed offset; name its topics with --topic"]
