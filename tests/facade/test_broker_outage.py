"""Producers of both doors ride out a broker outage: every send call returns at once (a first send to a
topic not seen yet waits at most for one topic look-up), the records wait in librdkafka's queue, and every
one acknowledged after the broker is back is in the topic -- nothing acknowledged is lost.

Before issue 21 a first send to a topic during the outage blocked on the metadata look-up for as long as
the outage lasted (up to 10 s) and then raised.
"""

from __future__ import annotations

import time

import pytest

from rocketkafka import Message, Producer
from rocketkafka.kafka import Producer as DropInProducer
from rocketkafka.testing.reading import read_all

pytestmark = pytest.mark.integration

OUTAGE_S = 6.0
#: The longest a send call may take while the broker does not answer: one topic look-up (2 s) and slack.
FIRST_CALL_S = 3.5
#: Every later call: the time to build and queue a record, with room for a loaded machine.
LATER_CALL_S = 0.5


class _Outage:
    """Takes the broker away and brings it back, by SIGSTOP/SIGCONT or by SIGKILL and a restart from its log."""

    def __init__(self, backend, kind: str) -> None:
        self.backend, self.kind = backend, kind

    def start(self) -> None:
        self.backend.pause_broker() if self.kind == "pause" else self.backend.kill_broker(0)

    def end(self) -> None:
        self.backend.resume_broker() if self.kind == "pause" else self.backend.start_broker(0)


@pytest.mark.parametrize("kind", [pytest.param("pause", marks=pytest.mark.rk_needs("pause-broker")),
                                  pytest.param("kill", marks=pytest.mark.rk_needs("kill-broker"))])
def test_both_doors_keep_accepting_sends_through_an_outage_and_lose_nothing_acknowledged(
        rk_backend, rk_settings, rk_topic, kind):
    warm, fresh = rk_topic(partitions=3), rk_topic(partitions=3)  # fresh: first sent to during the outage
    acked: dict[str, set[bytes]] = {warm: set(), fresh: set()}
    failed: list[object] = []
    drop_in = DropInProducer({"bootstrap.servers": rk_settings.bootstrap_servers, "message.timeout.ms": 90_000})
    rocketmq = Producer("outage", settings=rk_settings, send_timeout=90)
    rocketmq.start()

    def on_delivery(err, msg) -> None:
        if err is None:
            acked[msg.topic()].add(msg.value())
        else:
            failed.append(err)

    def sent(topic: str, value: bytes):
        return lambda result: acked[topic].add(value)

    calls: dict[tuple[str, str], list[float]] = {}
    oneway_sent: set[bytes] = set()

    def timed(door: str, topic: str, send) -> None:
        started = time.monotonic()
        send()
        calls.setdefault((door, topic), []).append(time.monotonic() - started)

    def send_all(label: str, topics: list[str], n: int) -> None:
        for i in range(n):
            for topic in topics:
                v = f"{label}-{i}".encode()
                timed("drop-in", topic, lambda: drop_in.produce(topic, b"d" + v, key=v, on_delivery=on_delivery))
                timed("drop-in extras", topic, lambda: drop_in.produce(topic, b"x" + v, tags="t", on_delivery=on_delivery))
                timed("send_async", topic, lambda: rocketmq.send_async(Message(topic, body=b"a" + v), sent(topic, b"a" + v),
                                                                       failed.append))
                timed("send_oneway", topic, lambda: rocketmq.send_oneway(Message(topic, body=b"o" + v, tags="t")))
                oneway_sent.add(b"o" + v)
            drop_in.poll(0)
            rocketmq.poll(0)

    outage = _Outage(rk_backend, kind)
    try:
        send_all("before", [warm], 20)
        assert drop_in.flush(30) == 0 and rocketmq.flush(30) == 0
        calls.clear()
        outage.start()
        during_until = time.monotonic() + OUTAGE_S
        rounds = 0
        while time.monotonic() < during_until:
            send_all(f"during{rounds}", [warm, fresh], 5)
            rounds += 1
            time.sleep(0.1)
    finally:
        outage.end()
    send_all("after", [warm, fresh], 20)
    assert drop_in.flush(90) == 0 and rocketmq.flush(90) == 0
    rocketmq.shutdown()

    slow = {k: round(max(v[1:], default=0), 2) for k, v in calls.items() if max(v[1:], default=0) > LATER_CALL_S}
    first = {k: round(v[0], 2) for k, v in calls.items() if v[0] > FIRST_CALL_S}
    assert not first and not slow, f"send calls stalled during the outage: first {first}, later {slow}"
    assert failed == [], failed[:5]
    for topic in (warm, fresh):
        stored = {r.value() for r in read_all(rk_settings.bootstrap_servers, topic, timeout=30)}
        missing = acked[topic] - stored
        assert not missing, f"{len(missing)} acknowledged records of {topic} are not in it: {sorted(missing)[:5]}"
    oneway = {r.value() for t in (warm, fresh) for r in read_all(rk_settings.bootstrap_servers, t, timeout=30)
              if r.value().startswith(b"o")}
    assert oneway_sent <= oneway, "a one-way send made during the outage never arrived"
    assert rounds >= 3
