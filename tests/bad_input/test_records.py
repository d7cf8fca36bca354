"""Foreign and malformed records on every topic we read: user topics (both consumer modes), the retry
topic, the delay levels, the half and op topics.

What a foreign writer can forge -- system headers that are not UTF-8, counts and times that are not
non-negative integers, a reconsume count of -7 that would grant extra tries, a real topic that can
never exist, a half naming a producer group no producer can have -- is answered by routing the
record to the dead-letter (or max-check) topic with a reason, once; the partition moves on, and
every good record behind the bad ones arrives. Never a crash, a hang or a lost record.
"""

from __future__ import annotations

import time

import pytest

from rocketkafka import ConsumeStatus, Message, Producer, PushConsumer
from rocketkafka.delay.forwarder import DelayForwarder
from rocketkafka.headers import header_map
from rocketkafka.names import Header
from rocketkafka.testing.history import History, check
from rocketkafka.testing.reading import read_all
from rocketkafka.ordering.engine.options import ConsumerOptions
from rocketkafka.txn import CheckerOptions, TransactionChecker, TransactionMQProducer, TransactionOptions, TransactionStatus
from tests.bad_input.conftest import FAST, wait_until

pytestmark = pytest.mark.integration

OLD_MS = str(int(time.time() * 1000) - 3_600_000).encode()

#: Records a foreign client may write to a topic a push consumer reads: name -> (headers, reason in the DLQ).
MALFORMED = {
    "TAGS not UTF-8": ([(Header.TAGS, b"\xff\xfe")], "bad system header"),
    "RECONSUME_TIME -7": ([(Header.RECONSUME_TIMES, b"-7")], "outside 0..1000000"),
    "RECONSUME_TIME huge": ([(Header.RECONSUME_TIMES, b"99999999999")], "outside 0..1000000"),
    "RECONSUME_TIME words": ([(Header.RECONSUME_TIMES, b"many")], "bad system header"),
    "BORN_TS not a number": ([(Header.BORN_TIMESTAMP, b"yesterday")], "bad system header"),
    "UNIQ_KEY not UTF-8": ([(Header.MSG_ID, b"\xc3\x28")], "bad system header"),
}
#: Records that look odd but are fine: they reach the listener.
ODD_BUT_FINE = {
    "no headers, no value": (None, []),
    "system header without a value": (b"v", [(Header.TAGS, None), (Header.KEYS, None)]),
    "unknown rk. header": (b"v", [("rk.SOMETHING_NEW", b"1")]),
    "user header not UTF-8": (b"v", [("region", b"\xff")]),
}


def _write_bad_then_good(raw_produce, topic: str) -> list[bytes]:
    """Malformed and odd records on partition 0, each name as the value; returns the odd ones' values."""
    raw_produce(topic, [(name.encode(), headers) for name, (headers, _) in MALFORMED.items()])
    raw_produce(topic, [(value, headers) for value, headers in ODD_BUT_FINE.values()])
    return [value or b"" for value, _ in ODD_BUT_FINE.values()]


def _dead_letters(settings, group: str) -> dict[bytes, str]:
    return {r.value(): header_map(r.headers())[Header.DLQ_REASON].decode()
            for r in read_all(settings.bootstrap_servers, settings.topics.dead_letter(group))}


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrent", "orderly"])
def test_malformed_records_on_a_user_topic_go_to_the_dlq_and_the_rest_arrives_in_order(
        rk_settings, rk_topic, rk_group, raw_produce, orderly):
    topic = rk_topic(partitions=1)
    odd = _write_bad_then_good(raw_produce, topic)
    with Producer("good", settings=rk_settings) as producer:
        good = [producer.send_sync(Message(topic, body=f"good-{i}".encode())).msg_id for i in range(5)]
    history, bodies = History(), []

    def listener(msg):
        msg.id  # never raises: a record with garbled system headers is dead-lettered before the listener
        with history.handler_call("c", msg):
            bodies.append(msg.body)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(rk_group, settings=rk_settings, orderly=orderly, max_reconsume_times=1,
                            retry_backoff=False, **FAST)
    consumer.subscribe(topic, listener)
    consumer.start()
    try:
        assert wait_until(lambda: set(good) <= {c.msg_id for c in history.calls}, 30), bodies
        assert wait_until(lambda: len(_dead_letters(rk_settings, rk_group)) >= len(MALFORMED), 30)
    finally:
        consumer.shutdown()
    dead = _dead_letters(rk_settings, rk_group)
    print("\n" + "\n".join(f"  {k.decode()}: {v}" for k, v in dead.items()))
    assert set(dead) == {name.encode() for name in MALFORMED}
    for name, (_, reason) in MALFORMED.items():
        assert reason in dead[name.encode()], (name, dead[name.encode()])
    assert sorted(bodies) == sorted(odd + [f"good-{i}".encode() for i in range(5)])
    report = check(history.calls, good, order_by="partition", serial_by="partition" if orderly else None)
    assert report.lost_count == 0 and report.duplicate_count == 0 and report.reorders == []


def test_a_forged_reconsume_count_grants_no_extra_retries(rk_settings, rk_topic, rk_group, raw_produce):
    """A listener that would fail without reading the message never gets it: the forged count is found before
    the listener (it used to get the record once, and the retry decision noticed the forgery)."""
    topic = rk_topic(partitions=1)
    raw_produce(topic, [(b"forged", [(Header.RECONSUME_TIMES, b"-7")])])
    with Producer("good", settings=rk_settings) as producer:
        after = producer.send_sync(Message(topic, body=b"after")).msg_id
    calls: list[bytes] = []

    def listener(msg):
        calls.append(msg.body)
        return ConsumeStatus.RECONSUME_LATER if msg.body == b"forged" else ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(rk_group, settings=rk_settings, max_reconsume_times=2, retry_backoff=False, **FAST)
    consumer.subscribe(topic, listener)
    consumer.start()
    try:
        assert wait_until(lambda: b"after" in calls and _dead_letters(rk_settings, rk_group), 30), calls
        time.sleep(1.0)  # room for any further (wrong) retry
    finally:
        consumer.shutdown()
    assert calls == [b"after"], calls
    assert list(_dead_letters(rk_settings, rk_group)) == [b"forged"]
    assert read_all(rk_settings.bootstrap_servers, rk_settings.topics.retry(rk_group)) == []
    assert after


def test_malformed_retry_copies_go_to_the_dlq(rk_settings, rk_topic, rk_group, raw_produce):
    topic = rk_topic(partitions=1)
    seen: list[bytes] = []
    consumer = PushConsumer(rk_group, settings=rk_settings, retry_backoff=False, **FAST)
    consumer.subscribe(topic, lambda m: seen.append(m.body))
    consumer.start()
    try:
        retry = rk_settings.topics.retry(rk_group)
        raw_produce(retry, [
            (b"origin not a topic name", [(Header.ORIGIN_TOPIC, b"a b")]),
            (b"forged count", [(Header.ORIGIN_TOPIC, topic.encode()), (Header.RECONSUME_TIMES, b"-7")]),
            (b"origin not UTF-8", [(Header.ORIGIN_TOPIC, b"\xff")]),
        ])
        with Producer("good", settings=rk_settings) as producer:
            producer.send_sync(Message(topic, body=b"fine"))
        assert wait_until(lambda: len(_dead_letters(rk_settings, rk_group)) >= 3 and b"fine" in seen, 30), seen
    finally:
        consumer.shutdown()
    dead = _dead_letters(rk_settings, rk_group)
    assert "does not subscribe" in dead[b"origin not a topic name"]
    assert "outside 0..1000000" in dead[b"forged count"]
    assert "does not subscribe" in dead[b"origin not UTF-8"]


def test_a_delayed_record_for_a_topic_that_can_never_exist_is_dead_lettered_with_the_rule(
        rk_settings, rk_topic, raw_produce):
    topic = rk_topic(partitions=1)
    settings = rk_settings.model_copy(update={"delay": rk_settings.delay.load(levels="100ms 200ms", partitions=1)})
    fwd = DelayForwarder(settings, consumer_options=FAST).start()
    try:
        level1 = settings.topics.delay_level(1)
        assert wait_until(lambda: len(fwd.assignment()) == len(fwd.tiers.topics()), 30)
        past = str(int(time.time() * 1000) - 10).encode()
        raw_produce(level1, [
            (b"real topic 'bad topic!'", [(Header.DELIVER_AT, past), (Header.REAL_TOPIC, b"bad topic!"),
                                          (Header.REAL_QUEUE_ID, b"0")]),
            (b"real partition -1", [(Header.DELIVER_AT, past), (Header.REAL_TOPIC, topic.encode()),
                                    (Header.REAL_QUEUE_ID, b"-1")]),
            (b"due in the year 3000", [(Header.DELIVER_AT, b"32503680000000"), (Header.REAL_TOPIC, topic.encode()),
                                       (Header.REAL_QUEUE_ID, b"0")]),
            (b"fine", [(Header.DELIVER_AT, past), (Header.REAL_TOPIC, topic.encode()), (Header.REAL_QUEUE_ID, b"0")]),
        ])
        assert wait_until(lambda: len(read_all(settings.bootstrap_servers, fwd.dead_letter_topic)) >= 3
                          and read_all(settings.bootstrap_servers, topic), 30)
    finally:
        fwd.close()
    dead = {r.value(): header_map(r.headers())[Header.DLQ_REASON].decode()
            for r in read_all(settings.bootstrap_servers, fwd.dead_letter_topic)}
    reason = dead[b"real topic 'bad topic!'"]
    assert "can never exist" in reason and "' ' at position 3" in reason, reason
    assert "negative" in dead[b"real partition -1"]
    assert "outside" in dead[b"due in the year 3000"]
    assert [r.value() for r in read_all(settings.bootstrap_servers, topic)] == [b"fine"]


def test_unanswerable_and_malformed_halves_are_parked_once_with_a_reason(rk_settings, rk_topic, raw_produce):
    """A half naming a 300-character producer group can never be checked back: parked at once, not every scan."""
    topic = rk_topic(partitions=1)
    # max_check_times high: at 3 (0.9 s of checks) a loaded run parked a fifth record once, most likely the
    # answerable half before its answer's op record was read; what is parked here must be the unanswerable ones
    options = CheckerOptions(transaction_timeout_ms=200, check_interval_ms=300, max_check_times=100, half_partitions=1,
                             **{k: v for k, v in FAST.items() if k not in ("consume_from_where", "commit_interval_ms")})
    committed: list[str] = []
    producer = TransactionMQProducer("pg", lambda m: committed.append(m.transaction_id) or TransactionStatus.COMMIT,
                                     settings=rk_settings,
                                     options=TransactionOptions(half_partitions=1, check=ConsumerOptions(**FAST)))
    producer.start()  # creates the half and op topics, and answers check-backs for group "pg"
    checker = TransactionChecker(rk_settings, options)
    try:
        half, op = rk_settings.topics.half(), rk_settings.topics.op()

        def half_headers(group: bytes, txid: bytes, real: bytes = topic.encode()) -> list:
            return [(Header.TRANSACTION, b"true"), (Header.TRANSACTION_ID, txid), (Header.MSG_ID, txid),
                    (Header.REAL_TOPIC, real), (Header.REAL_QUEUE_ID, b"0"), (Header.PRODUCER_GROUP, group),
                    (Header.BORN_TIMESTAMP, OLD_MS)]

        raw_produce(half, [
            (b"group of 300 characters", half_headers(b"p" * 300, b"T-LONG")),
            (b"empty group", half_headers(b"", b"T-EMPTY")),
            (b"check times garbled", [*half_headers(b"pg", b"T-GARBLED"), (Header.CHECK_TIMES, b"lots")]),
            (b"no headers", []),
            (b"answerable", half_headers(b"pg", b"T-GOOD")),
        ])
        raw_produce(op, [(b"not avro", []), (b"\x00\x01\x02", [(Header.HALF_OFFSET, b"x")])])
        checker.start()
        assert wait_until(lambda: "T-GOOD" in committed, 30), committed
        assert wait_until(lambda: len(read_all(rk_settings.bootstrap_servers, rk_settings.topics.max_check())) >= 4, 30)
        time.sleep(1.5)  # several more scans: nothing is parked twice
        scans = checker.stats().scans
    finally:
        checker.stop()
        producer.shutdown()
    records = read_all(rk_settings.bootstrap_servers, rk_settings.topics.max_check())
    parked = {r.value(): header_map(r.headers()).get(Header.DLQ_REASON, b"").decode() for r in records}
    assert sorted(r.value() for r in records) == [b"check times garbled", b"empty group", b"group of 300 characters",
                                                  b"no headers"], parked
    assert "300 characters, over the limit of 255" in parked[b"group of 300 characters"]
    assert "it is empty" in parked[b"empty group"]
    assert "malformed" in parked[b"check times garbled"] and "malformed" in parked[b"no headers"]
    # check-backs are at least once, as in RocketMQ: under load a scan may ask again before it has read the
    # op record of the first answer; what must hold is that only the answerable half was ever asked about
    assert set(committed) == {"T-GOOD"} and scans >= 2, committed


def test_the_drop_in_consumer_hands_foreign_records_over_as_kafka_does_and_filters_garbled_tags(
        rk_settings, rk_topic, rk_group, raw_produce):
    """The drop-in door gives confluent messages: a garbled header is the application's to read, never a crash
    of ``poll``; a tag filter reads a non-UTF-8 TAGS header as no match, and the partition moves on."""
    from rocketkafka.kafka import Consumer as DropInConsumer

    topic = rk_topic(partitions=1)
    raw_produce(topic, [(name.encode(), headers) for name, (headers, _) in MALFORMED.items()])
    raw_produce(topic, [(b"tagged A", [(Header.TAGS, b"A")]), (b"tagged A, bad count", [(Header.TAGS, b"A"),
                                                                                        (Header.RECONSUME_TIMES, b"-7")])])
    config = {"bootstrap.servers": rk_settings.bootstrap_servers, "group.id": rk_group,
              "rocketkafka.redis.urls": ",".join(rk_settings.redis_urls),
              "rocketkafka.topic.prefix": rk_settings.topic_prefix, "auto.offset.reset": "earliest"}
    everything, only_a = DropInConsumer(config, **FAST), DropInConsumer({**config, "group.id": rk_group + "-a"}, **FAST)
    everything.subscribe([topic])
    only_a.subscribe([topic], tags="A")
    got: dict[str, list[bytes]] = {"all": [], "A": []}
    try:
        deadline = time.monotonic() + 30
        while (len(got["all"]) < len(MALFORMED) + 2 or len(got["A"]) < 2) and time.monotonic() < deadline:
            for name, consumer in (("all", everything), ("A", only_a)):
                got[name] += [m.value() for m in consumer.consume(50, 0.05) if m.error() is None]
    finally:
        everything.close()
        only_a.close()
    assert got["all"] == [name.encode() for name in MALFORMED] + [b"tagged A", b"tagged A, bad count"]
    assert got["A"] == [b"tagged A", b"tagged A, bad count"]


def test_a_dead_letter_topic_read_back_by_another_group_is_a_user_topic_like_any_other(
        rk_settings, rk_group, raw_produce):
    """RocketMQ users subscribe to ``%DLQ%group`` to inspect or replay dead letters. Foreign records written
    there (or a record carrying every header a dead-lettering adds, forged) neither crash nor stop that consumer."""
    from rocketkafka.admin import TopicAdmin

    dlq = rk_settings.topics.dead_letter(rk_group + "-origin")
    TopicAdmin(rk_settings).create_many({dlq: 1})
    raw_produce(dlq, [(name.encode(), headers) for name, (headers, _) in MALFORMED.items()])
    raw_produce(dlq, [(b"dead letter", [(Header.DLQ_REASON, b"listener said no"), (Header.RECONSUME_TIMES, b"16"),
                                         (Header.ORIGIN_TOPIC, b"orders"), (Header.ORIGIN_OFFSET, b"7")])])
    bodies: list[bytes] = []

    def listener(msg):
        msg.id  # never raises: garbled records are dead-lettered before the listener
        bodies.append(msg.body)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(rk_group, settings=rk_settings, max_reconsume_times=1, retry_backoff=False, **FAST)
    consumer.subscribe(dlq, listener)
    consumer.start()
    try:
        assert wait_until(lambda: b"dead letter" in bodies and len(_dead_letters(rk_settings, rk_group)) >= len(MALFORMED),
                          30), bodies
    finally:
        consumer.shutdown()
    assert bodies == [b"dead letter"]
    assert set(_dead_letters(rk_settings, rk_group)) == {name.encode() for name in MALFORMED}
