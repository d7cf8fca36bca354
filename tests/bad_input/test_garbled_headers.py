"""Foreign records whose ``rk.*`` headers cannot be read, tried as a new user would (issue 7): 25 garbled
system headers (``conftest.GARBAGE``) between good records, on a real broker.

The rule: such a record never reaches a listener, in any mode. The push consumer checks the system
headers before its listener would see the record and dead-letters it (broadcasting: logs it and drops
it, as RocketMQ drops a broadcast failure), once, with the header named in ``rk.DLQ_REASON``; the
partition moves on and every record behind it arrives in order. So no field of a message a listener
gets raises. A user property that is not UTF-8 is the user's business and is delivered. The drop-in
``Consumer`` hands back confluent-kafka records as confluent-kafka does (nothing is decoded, nothing
raises); under a tag expression a tag that is not UTF-8 matches nothing and the record is skipped with
a warning. Records passing the delay forwarder or the transaction checker meet the same rule where they
land. Before issue 7 the listener got all 25 and reading a field raised ``MalformedRecordError`` in it.
"""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import Consumer as RawConsumer
from confluent_kafka import KafkaException, TopicPartition

from rocketkafka import ConsumeStatus, Message, MessageModel, Producer, PushConsumer
from rocketkafka.delay.forwarder import DelayForwarder
from rocketkafka.errors import MalformedRecordError
from rocketkafka.headers import header_map
from rocketkafka.names import Header
from rocketkafka.ordering.engine.lifecycle import State
from rocketkafka.testing.history import History, check
from rocketkafka.testing.reading import read_all
from tests.bad_input.conftest import FAST, GARBAGE, READABLE, wait_until

pytestmark = pytest.mark.integration

#: The consumer modes a listener can be subscribed in: PushConsumer keyword arguments, batch listener or not.
MODES = {
    "concurrent": (dict(), False),
    "orderly": (dict(orderly=True), False),
    "key-ordered": (dict(orderly=True, order_key="key"), False),
    "batch": (dict(), True),
    "orderly-batch": (dict(orderly=True), True),
    "broadcasting": (dict(message_model=MessageModel.BROADCASTING), False),
}


def _bad(i: int) -> bytes:
    header, value, _ = GARBAGE[i]
    return f"bad-{i:02d} {header}={value!r}".encode()


def _write_mixed(raw_produce, topic: str) -> list[str]:
    """On partition 0, one key: good-i, then bad-i (one garbled header each), then the readable odd records
    and a good tail. Returns the message ids that must reach the listener, in order."""
    records, expected = [], []
    for i, (header, value, _) in enumerate(GARBAGE):
        records += [(f"good-{i}".encode(), [(Header.MSG_ID, f"good-{i}".encode()), (Header.TAGS, b"TagA")]),
                    (_bad(i), [(header, value)])]
        expected.append(f"good-{i}")
    for j, extra in enumerate(READABLE):
        records.append((f"odd-{j}".encode(), [(Header.MSG_ID, f"odd-{j}".encode()), extra]))
        expected.append(f"odd-{j}")
    records += [(f"tail-{k}".encode(), [(Header.MSG_ID, f"tail-{k}".encode())]) for k in range(3)]
    expected += [f"tail-{k}" for k in range(3)]
    raw_produce(topic, records, key=b"one-key")
    return expected


def _dead_letters(settings, group: str) -> list[tuple[bytes, str]]:
    return [(r.value(), header_map(r.headers())[Header.DLQ_REASON].decode())
            for r in read_all(settings.bootstrap_servers, settings.topics.dead_letter(group))]


@pytest.mark.parametrize("mode", list(MODES))
def test_garbled_records_never_reach_a_listener_and_all_25_are_accounted_for(
        rk_settings, rk_topic, rk_group, raw_produce, caplog, mode):
    kwargs, batch = MODES[mode]
    topic = rk_topic(partitions=1)
    expected = _write_mixed(raw_produce, topic)
    history, bodies, raised = History(), [], []

    def handle(msg) -> None:
        bodies.append(msg.body)  # first: a garbled record reaching the listener at all is the failure
        try:
            msg.tags, msg.keys, msg.reconsume_times, msg.born_timestamp, msg.properties, msg.get_property("TAGS")
        except MalformedRecordError as exc:  # what user code met before issue 7
            raised.append(exc)
            raise
        with history.handler_call("c", msg):
            pass

    consumer = PushConsumer(rk_group, settings=rk_settings, max_reconsume_times=1, retry_backoff=False,
                            **kwargs, **FAST)
    if batch:
        def handle_batch(messages) -> None:
            for msg in messages:
                handle(msg)

        consumer.subscribe_batch(topic, handle_batch, max_batch_size=8)
    else:
        consumer.subscribe(topic, lambda m: handle(m) or ConsumeStatus.CONSUME_SUCCESS)
    with caplog.at_level(logging.ERROR, logger="rocketkafka"):
        consumer.start()
        try:
            assert wait_until(lambda: b"tail-2" in bodies, 30), bodies
            broadcasting = mode == "broadcasting"
            assert broadcasting or wait_until(lambda: len(_dead_letters(rk_settings, rk_group)) >= len(GARBAGE), 30)
            assert consumer.health().error is None and consumer.state is State.RUNNING  # nothing crashed it
        finally:
            consumer.shutdown()
    assert raised == [] and not [b for b in bodies if b.startswith(b"bad-")], bodies
    report = check(history.calls, expected, order_by="partition", serial_by=None)
    assert report.lost_count == 0 and report.duplicate_count == 0 and report.reorders == [], report
    logged = [r for r in caplog.records if "malformed record" in r.getMessage()]
    assert sorted(r.offset for r in logged) == [2 * i + 1 for i in range(len(GARBAGE))]  # each once, with its place
    assert all(r.topic == topic and r.partition == 0 for r in logged)
    if broadcasting:  # no dead-letter topic: every member has its own copy, as RocketMQ drops a broadcast failure
        return
    dead = _dead_letters(rk_settings, rk_group)
    assert sorted(value for value, _ in dead) == [_bad(i) for i in range(len(GARBAGE))]
    for value, reason in dead:
        header, _, words = GARBAGE[int(value[4:6])]
        assert f"bad system header {header}: {words}" in reason, (value, reason)


def test_a_tag_subscription_dead_letters_a_tag_that_is_not_utf8(rk_settings, rk_topic, rk_group, raw_produce):
    topic = rk_topic(partitions=1)
    raw_produce(topic, [(b"bad", [(Header.TAGS, b"\xff\xfe")]),
                        (b"other tag, bad count", [(Header.TAGS, b"TagC"), (Header.RECONSUME_TIMES, b"-7")])])
    with Producer("good", settings=rk_settings) as producer:
        for i in range(2):
            producer.send_sync(Message(topic, body=f"good-{i}".encode(), tags="TagA"))
    seen: list[bytes] = []
    consumer = PushConsumer(rk_group, settings=rk_settings, **FAST)
    consumer.subscribe(topic, lambda m: seen.append(m.body), "TagA || TagB")
    consumer.start()
    try:
        assert wait_until(lambda: b"good-1" in seen and _dead_letters(rk_settings, rk_group), 30), seen
    finally:
        consumer.shutdown()
    dead = dict(_dead_letters(rk_settings, rk_group))
    # the tag decides first: a record of another tag is not this subscription's, whatever else it carries
    assert list(dead) == [b"bad"] and f"bad system header {Header.TAGS}: not UTF-8" in dead[b"bad"], dead
    assert seen == [b"good-0", b"good-1"]


def test_the_drop_in_hands_records_over_as_kafka_does_and_commits_any_kafka_message_of_its_partitions(
        rk_settings, rk_topic, rk_group, raw_produce, caplog):
    """The drop-in has no dead-letter topic: garbled headers are raw bytes the application reads itself, as with
    confluent-kafka; a tag expression skips a tag no expression can match, with a warning. ``commit(message=)``
    takes a confluent-kafka message consumed by another client (confluent-kafka reads only its position) for a
    partition this member owns, and refuses anything else with words that say what to pass."""
    from rocketkafka import MessageExt
    from rocketkafka.kafka import Consumer as DropInConsumer

    topic, elsewhere = rk_topic(partitions=1), rk_topic(partitions=1, suffix="-other")
    raw_produce(topic, [(_bad(i), [(h, v)]) for i, (h, v, _) in enumerate(GARBAGE)])
    raw_produce(topic, [(b"tagged A", [(Header.TAGS, b"A")]), (b"tagged A, bad count",
                                                               [(Header.TAGS, b"A"), (Header.RECONSUME_TIMES, b"-7")])])
    raw_produce(elsewhere, [(b"x", [])])
    config = {"bootstrap.servers": rk_settings.bootstrap_servers, "group.id": rk_group,
              "rocketkafka.redis.urls": ",".join(rk_settings.redis_urls), "enable.auto.commit": False,
              "rocketkafka.topic.prefix": rk_settings.topic_prefix, "auto.offset.reset": "earliest"}
    everything, only_a = DropInConsumer(config, **FAST), DropInConsumer({**config, "group.id": rk_group + "-a"}, **FAST)
    everything.subscribe([topic])
    only_a.subscribe([topic], tags="A")
    other = RawConsumer({"bootstrap.servers": rk_settings.bootstrap_servers, "group.id": rk_group + "-raw",
                         "auto.offset.reset": "earliest"})
    got: dict[str, list] = {"all": [], "A": []}
    try:
        with caplog.at_level(logging.DEBUG, logger="rocketkafka"):
            deadline = time.monotonic() + 30
            while (len(got["all"]) < len(GARBAGE) + 2 or len(got["A"]) < 2) and time.monotonic() < deadline:
                for name, consumer in (("all", everything), ("A", only_a)):
                    got[name] += [m for m in consumer.consume(50, 0.05) if m.error() is None]
        assert [m.value() for m in got["all"]] == [_bad(i) for i in range(len(GARBAGE))] + [b"tagged A",
                                                                                            b"tagged A, bad count"]
        assert [m.headers() for m in got["all"][:len(GARBAGE)]] == [[(h, v)] for h, v, _ in GARBAGE]  # raw, untouched
        assert [m.value() for m in got["A"]] == [b"tagged A", b"tagged A, bad count"]
        skipped = [r for r in caplog.records if "no expression can match" in r.getMessage()]
        assert sorted(r.offset for r in skipped) == [0, 1] and all(r.topic == topic for r in skipped), skipped
        assert [r.levelno for r in skipped].count(logging.WARNING) == 1, skipped  # a stream of them: one warning

        # commit(message=...) of a record another client consumed: taken, as confluent-kafka takes it
        other.assign([TopicPartition(topic, 0, 5), TopicPartition(elsewhere, 0, 0)])
        foreign: dict[str, object] = {}
        deadline = time.monotonic() + 20
        while len(foreign) < 2 and time.monotonic() < deadline:
            record = other.poll(0.2)
            if record is not None and record.error() is None:
                foreign.setdefault(record.topic(), record)
        committed = everything.commit(message=foreign[topic], asynchronous=False)
        assert [(tp.topic, tp.partition, tp.offset, tp.error) for tp in committed] == [(topic, 0, 6, None)]
        assert everything.committed([TopicPartition(topic, 0)], 10)[0].offset == 6
        # ... but never for a partition this member does not own: the lock table's rule, whichever argument
        with pytest.raises(KafkaException, match=f"commit: {elsewhere}\\[0\\] is not owned by this member"):
            everything.commit(message=foreign[elsewhere], asynchronous=False)
        # a push consumer's message is not a Kafka record: the error says how to commit its position
        with pytest.raises(TypeError, match=r"commit\(message=\.\.\.\) expected confluent_kafka\.cimpl\.Message, got "
                                            r"rocketkafka\.message\.MessageExt .*offsets=\[TopicPartition\(msg\.topic, "
                                            r"msg\.queue_id, msg\.queue_offset \+ 1\)\]"):
            everything.commit(message=MessageExt.of(got["all"][4]))
    finally:
        other.close()
        everything.close()
        only_a.close()


def test_garbled_headers_that_pass_the_forwarder_are_dead_lettered_where_they_land_never_handed_over(
        rk_settings, rk_topic, rk_group, raw_produce):
    """The forwarder reads only the delay headers: garbled ones send the record to its dead-letter topic; other
    garbled system headers travel with the record (headers kept), and the consumer of the real topic
    dead-letters it before its listener. Every record is in exactly one of the two, or delivered."""
    topic = rk_topic(partitions=1)
    settings = rk_settings.model_copy(update={"delay": rk_settings.delay.load(levels="100ms 200ms", partitions=1)})
    past = str(int(time.time() * 1000) - 10).encode()

    def delayed(*extra):
        return [*extra, (Header.DELIVER_AT, past), (Header.REAL_TOPIC, topic.encode()), (Header.REAL_QUEUE_ID, b"0")]

    real = [(Header.REAL_TOPIC, topic.encode())]
    records = {
        b"tag not UTF-8": delayed((Header.TAGS, b"\xff")),
        b"reconsume -7": delayed((Header.RECONSUME_TIMES, b"-7")),
        b"born x": delayed((Header.BORN_TIMESTAMP, b"x")),
        b"DELIVER_AT -7": [(Header.DELIVER_AT, b"-7"), *real, (Header.REAL_QUEUE_ID, b"0")],
        b"REAL_QID abc": [(Header.DELIVER_AT, past), *real, (Header.REAL_QUEUE_ID, b"abc")],
        b"fine": delayed((Header.MSG_ID, b"fine")),
    }
    seen: list[bytes] = []
    fwd = DelayForwarder(settings, consumer_options=FAST).start()
    consumer = PushConsumer(rk_group, settings=settings, **FAST)
    assert wait_until(lambda: len(fwd.assignment()) == len(fwd.tiers.topics()), 30)
    consumer.subscribe(topic, lambda m: seen.append(m.body) and None)
    consumer.start()
    try:
        raw_produce(settings.topics.delay_level(1), list(records.items()))
        dead = lambda: [*read_all(settings.bootstrap_servers, fwd.dead_letter_topic),  # noqa: E731
                        *read_all(settings.bootstrap_servers, settings.topics.dead_letter(rk_group))]
        assert wait_until(lambda: b"fine" in seen and len(dead()) >= len(records) - 1, 30), seen
    finally:
        consumer.shutdown()
        fwd.close()
    reasons = {r.value(): header_map(r.headers())[Header.DLQ_REASON].decode() for r in dead()}
    assert seen == [b"fine"] and sorted(reasons) == sorted(set(records) - {b"fine"}), (seen, reasons)
    assert "bad system header rk.TAGS: not UTF-8" in reasons[b"tag not UTF-8"]
    assert "bad system header rk.RECONSUME_TIME: -7 is outside" in reasons[b"reconsume -7"]
    assert "bad system header rk.BORN_TS" in reasons[b"born x"]
    assert "due time -7 is outside" in reasons[b"DELIVER_AT -7"] and "garbled" in reasons[b"REAL_QID abc"]
