"""What listeners answer: every failure spelling is retried and finally dead-lettered; nothing is
committed unhandled, nothing blocks a queue for ever.

- an orderly poison message (raising, ``RECONSUME_LATER``, ``SUSPEND_CURRENT_QUEUE_A_MOMENT``) is
  retried in place ``max_reconsume_times`` times, then goes to the DLQ and its queue moves on, in
  order (RocketMQ's known failure is a queue blocked for ever);
- answers that are not consume statuses (``"garbage"``, ``True``, an orderly status from a
  concurrent listener, a coroutine object) count as failures, logged once per kind.
"""

from __future__ import annotations

import logging

import pytest

from rocketkafka import ConsumeOrderlyStatus, ConsumeStatus, Message, Producer, PushConsumer
from rocketkafka.headers import header_map
from rocketkafka.names import Header
from rocketkafka.testing.history import History, check
from rocketkafka.testing.reading import committed_to_end, read_all
from tests.bad_input.conftest import FAST, wait_until

pytestmark = pytest.mark.integration

#: How the three poison messages of the orderly test fail, every time they run.
POISON = {
    "raises": lambda: (_ for _ in ()).throw(ValueError("cannot parse")),
    "RECONSUME_LATER": lambda: ConsumeStatus.RECONSUME_LATER,
    "SUSPEND": lambda: ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT,
}


def _dead(settings, group: str) -> dict[bytes, dict[str, bytes | None]]:
    return {r.value(): header_map(r.headers()) for r in read_all(settings.bootstrap_servers,
                                                                  settings.topics.dead_letter(group))}


def test_orderly_poison_messages_go_to_the_dlq_after_max_reconsume_times_and_the_queue_moves_on(
        rk_settings, rk_topic, rk_group):
    topic = rk_topic(partitions=2)
    ids, bodies = [], {}
    with Producer("orderly-poison", settings=rk_settings) as producer:
        for i in range(60):
            kind = list(POISON)[i // 20] if i % 20 == 7 else None  # one poison of each kind, early in the stream
            body = (f"poison-{kind}" if kind else f"ok-{i}").encode()
            msg = Message(topic, body=body)
            producer.send_orderly(msg, sharding_key=f"k{i % 2}")
            ids.append(msg.id)
            bodies[msg.id] = body
    history, tries = History(), {}

    def listener(msg):
        with history.handler_call("c", msg):
            body = msg.body
            if body.startswith(b"poison-"):
                tries[body] = tries.get(body, 0) + 1
                return POISON[body[7:].decode()]()
            return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer(rk_group, settings=rk_settings, orderly=True, max_reconsume_times=2,
                            suspend_current_queue_time_ms=50, **FAST)
    consumer.subscribe(topic, listener)
    consumer.start()
    good = [i for i in ids if not bodies[i].startswith(b"poison-")]
    try:
        assert wait_until(lambda: set(good) <= {c.msg_id for c in history.calls}, 60), "a queue stayed blocked"
        assert wait_until(lambda: committed_to_end(rk_settings.bootstrap_servers, rk_group, topic), 30)
    finally:
        consumer.shutdown()
    # each poison ran 1 + max_reconsume_times times, in place, then went to the DLQ once, with why
    assert tries == {f"poison-{kind}".encode(): 3 for kind in POISON}
    dead = _dead(rk_settings, rk_group)
    assert set(dead) == set(tries)
    for body, headers in dead.items():
        assert b"max reconsume times 2 reached" in headers[Header.DLQ_REASON], headers
    # every other message once, in partition order, never two handlers of a partition at once
    report = check([c for c in history.calls if not bodies[c.msg_id].startswith(b"poison-")], good)
    print(report.summary())
    assert report.lost_count == 0 and report.duplicate_count == 0
    assert report.reorders == [] and report.overlaps == []
    # in place means in place: nothing after a poison ran before the poison was done with
    order = check(history.calls, ids, order_by="partition", serial_by="partition")
    assert order.reorders == [] and order.overlaps == []


async def _never_awaited(msg):
    return ConsumeStatus.CONSUME_SUCCESS


ANSWERS = {
    "garbage": lambda msg: "garbage",
    "True": lambda msg: True,
    "orderly SUSPEND from a concurrent listener": lambda msg: ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT,
    "a coroutine object": lambda msg: _never_awaited(msg),
}


@pytest.mark.parametrize("answer", list(ANSWERS), ids=list(ANSWERS))
def test_an_answer_that_is_no_consume_status_is_a_failure_never_a_silent_success(
        rk_settings, rk_topic, rk_group, caplog, answer):
    topic = rk_topic(partitions=1)
    calls: list[bytes] = []

    def listener(msg):
        calls.append(msg.body)
        return ANSWERS[answer](msg) if msg.body == b"bad" else None

    with Producer("answers", settings=rk_settings) as producer:
        producer.send_sync(Message(topic, body=b"bad"))
        producer.send_sync(Message(topic, body=b"good"))
    consumer = PushConsumer(rk_group, settings=rk_settings, max_reconsume_times=1, retry_backoff=False, **FAST)
    consumer.subscribe(topic, listener)
    with caplog.at_level(logging.ERROR, logger="rocketkafka"):
        consumer.start()
        try:
            assert wait_until(lambda: _dead(rk_settings, rk_group) and b"good" in calls, 30), calls
        finally:
            consumer.shutdown()
    assert calls.count(b"bad") == 2, calls  # the first try and one retry, then the DLQ
    assert list(_dead(rk_settings, rk_group)) == [b"bad"]
    complaints = [r.getMessage() for r in caplog.records if r.getMessage().startswith("a listener")]
    assert len(complaints) == 1, complaints  # said once, not per message


def test_orderly_reconsume_later_is_retried_in_place_not_committed(rk_settings, rk_topic, rk_group):
    topic = rk_topic(partitions=1)
    with Producer("later", settings=rk_settings) as producer:
        for body in (b"first", b"second"):
            producer.send_sync(Message(topic, body=body))
    calls: list[bytes] = []

    def listener(msg):
        calls.append(msg.body)
        if msg.body == b"first" and calls.count(b"first") < 3:
            return ConsumeStatus.RECONSUME_LATER  # a concurrent status from an orderly listener: "not yet"
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer(rk_group, settings=rk_settings, orderly=True, suspend_current_queue_time_ms=50, **FAST)
    consumer.subscribe(topic, listener)
    consumer.start()
    try:
        assert wait_until(lambda: b"second" in calls, 30), calls
    finally:
        consumer.shutdown()
    assert calls == [b"first", b"first", b"first", b"second"]
    assert read_all(rk_settings.bootstrap_servers, rk_settings.topics.dead_letter(rk_group)) == []

