"""Arbitrary delays and deliver-at times: routed through the largest level not after the due time, then
shorter tiers, ending on the due time itself (never early, p99 under 50 ms); 30 days is accepted and routed."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from rocketkafka.schedule.levels import DelayConfig
from rocketkafka.schedule.routing import now_ms
from rocketkafka.schedule.tiers import DELIVER, Hop, Tiers, Wait
from rocketkafka import Message, Producer
from rocketkafka.names import Header
from rocketkafka.testing.reading import read_all
from tests.delay.conftest import delay_records, due_of, lateness

pytestmark = pytest.mark.integration

DELAYS_S = (0.35, 1.7, 7.3)


@pytest.mark.timing
def test_arbitrary_delays_end_exactly_on_time(rk_settings, rk_topic, delay_config, forwarder_process, receiver,
                                              stall_probe):
    topic = rk_topic(partitions=4)
    forwarder_process("arbitrary")  # runs until the fixture stops it
    seen = receiver({topic: 4})
    producer = Producer("delay-arbitrary", settings=rk_settings)
    producer.start()
    probe = Message(topic, body=b"probe", delay=0.05)
    producer.send_sync(probe)
    assert seen.wait_for({probe.id}, 30)
    stall_probe.reset()  # the window: from the first send to the last arrival

    wanted: dict[str, float] = {}
    asked_due: dict[str, int] = {}  # deliver_at messages: the absolute due time asked for (epoch ms)
    for i in range(600):  # 200 of each delay over ~3 s, interleaved, half as `delay`, half as an absolute `deliver_at`
        seconds = DELAYS_S[i % 3]
        at = None
        if i % 2:
            msg = Message(topic, body=str(i).encode(), keys=[f"k{i}"], delay=timedelta(seconds=seconds))
        else:
            at = datetime.now(timezone.utc) + timedelta(seconds=seconds)
            msg = Message(topic, body=str(i).encode(), keys=[f"k{i}"], deliver_at=at)
        producer.send_async(msg, lambda r: None)
        assert msg.id is not None  # given at send
        wanted[msg.id] = seconds
        if at is not None:
            asked_due[msg.id] = round(at.timestamp() * 1000)
        if i % 10 == 9:
            producer.poll(0)
            time.sleep(0.05)
    assert producer.flush(30) == 0
    producer.shutdown()
    assert seen.wait_for(set(wanted), timeout=30)
    stall_probe.stop()

    originals = delay_records(rk_settings, delay_config)
    due = {m: due_of(originals[m]) for m in wanted}
    assert len(asked_due) == len(wanted) // 2
    for m, seconds in wanted.items():
        if m in asked_due:  # the time asked for (the test's clock reading before the send is not the library's)
            assert abs(due[m] - asked_due[m]) <= 1, (due[m], asked_due[m])
        else:  # the send time plus the delay
            sent_at = int(dict(originals[m].headers())[Header.ORIGIN_TIMESTAMP])
            assert abs(due[m] - sent_at - seconds * 1000) <= 1, (due[m], sent_at, seconds)
    report = lateness(seen.arrivals, due, stall_probe)
    print(f"\ndelays {DELAYS_S} s over levels {delay_config.describe()}: {report.summary()}")
    for seconds in DELAYS_S:
        part = lateness(seen.arrivals, {m: d for m, d in due.items() if wanted[m] == seconds}, stall_probe)
        print(f"  {seconds} s: {part.summary()}")
    assert report.count == len(wanted) and report.early == []
    assert report.within_bound(), report.summary()


def test_thirty_days_is_accepted_and_routed_through_the_longest_level(rk_settings, rk_topic, forwarder):
    """Default levels (1s .. 2h): the message waits on level 18; the plan from there is 2h hops, then shorter ones."""
    topic = rk_topic(partitions=2)
    config = DelayConfig()  # RocketMQ's default levels, max delay 90 days
    with Producer("delay-30d", settings=rk_settings.model_copy(update={"delay": config})) as producer:
        msg = Message(topic, body=b"see you next month", keys=["k"], delay=timedelta(days=30))
        before = now_ms()
        result = producer.send_sync(msg)
    tiers = Tiers(rk_settings.topics, config)
    assert result.topic == tiers.level(18).topic == rk_settings.topics.delay_level(18)
    [record] = read_all(rk_settings.bootstrap_servers, result.topic)
    headers = {k: v.decode() for k, v in record.headers()}
    due = int(headers[Header.DELIVER_AT])
    assert before + 30 * 86_400_000 <= due <= now_ms() + 30 * 86_400_000
    assert (headers[Header.REAL_TOPIC], headers[Header.MSG_ID]) == (topic, msg.id)

    # the hops from here, decided by the forwarder's own rule at each hop's end
    path = tiers.path(due - record.timestamp()[1])
    assert path[:359] == [tiers.level(18)] * 359 and all(t.ms < 7_200_000 for t in path[359:])
    print(f"\n30 days: {len(path)} hops: 2h x {path.count(tiers.level(18))}, then {[t.ms for t in path[359:]]} ms")
    appended = record.timestamp()[1]
    now = appended + 2 * 3_600_000  # the moment its first hop ends
    action = tiers.decide(tiers.level(18), appended, due, now)
    assert isinstance(action, Hop) and action.tier == tiers.level(18)
    assert tiers.decide(tiers.level(18), appended, due, now - 1) == Wait(1)
    assert tiers.decide(tiers.level(18), appended, due, due) is DELIVER

    # a real forwarder (with the default levels) leaves it waiting: not delivered, not dead-lettered
    fwd = forwarder(config=config)
    time.sleep(3)
    assert read_all(rk_settings.bootstrap_servers, topic) == []
    assert read_all(rk_settings.bootstrap_servers, fwd.dead_letter_topic) == []
    assert fwd.metrics.summary()["forwarded"] == 0
