"""Garbled ``rk.*`` headers, judged without a broker: the check the push consumer runs before a listener, the
listener loop's answer in every mode, and the drop-in's commit arguments.

The rule (issue 7): a record whose system headers cannot be read never reaches a listener -- it is
dead-lettered (broadcasting: logged and dropped) before it, naming the header -- so no field of a message
a listener gets raises. A user property is the user's business whatever its bytes.
"""

from __future__ import annotations

import itertools
import logging
import math
from types import SimpleNamespace

import pytest
from confluent_kafka import Message as KafkaMessage
from confluent_kafka import TopicPartition

from rocketkafka import Message, MessageExt, MessageSelector
from rocketkafka.codec import encode_headers
from rocketkafka.errors import MalformedRecordError
from rocketkafka.headers import read_headers, unreadable_header
from rocketkafka.ordering.consumers.commit_args import check_message_or_offsets, position_of
from rocketkafka.ordering.work.failures import Drop
from rocketkafka.ordering.work.lanes import Run
from rocketkafka.ordering.consumers.listening import ListenerHandler
from rocketkafka.ordering.consumers.message_batch import BatchFailure
from rocketkafka.ordering.consumers.selecting import record_filter
from rocketkafka.ordering.consumers.subscriptions import Subscription, Subscriptions
from tests.bad_input.conftest import GARBAGE, READABLE

TOPIC = "orders"


class FakeRecord:
    """A stand-in for a consumed ``confluent_kafka.Message`` (its ``headers()`` makes a new list each call)."""

    def __init__(self, offset: int, headers: list | None, value: bytes = b"v", topic: str = TOPIC) -> None:
        self._offset, self._headers, self._value, self._topic = offset, headers, value, topic

    def headers(self): return list(self._headers) if self._headers is not None else None
    def topic(self): return self._topic
    def partition(self): return 0
    def offset(self): return self._offset
    def value(self): return self._value
    def key(self): return None
    def timestamp(self): return (1, 1_700_000_000_000)


def _ours(n: int) -> list[tuple[str, bytes]]:
    """The headers our producer writes for a tagged, keyed message with a property."""
    return encode_headers(Message(TOPIC, b"x", tags="TagA", keys="k-1", properties={"region": "eu"}), f"id-{n}",
                          1_700_000_000_000)


# -- the check ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("header", "value", "words"), GARBAGE, ids=[f"{h}={v!r}" for h, v, _ in GARBAGE])
def test_a_garbled_system_header_is_unreadable_and_the_error_names_it_and_the_record(header, value, words):
    record = FakeRecord(7, [*_ours(1), (header, value)])
    error = unreadable_header(record)
    assert isinstance(error, MalformedRecordError)
    assert f"bad system header {header}: {words}" in str(error) and f"{TOPIC}[0]@7" in str(error), str(error)
    with pytest.raises(MalformedRecordError) as raised:  # what a lazy read of the message would raise
        read_headers(record)
    assert str(raised.value) == str(error)


@pytest.mark.parametrize(("header", "value"), READABLE, ids=[f"{h}={v!r}" for h, v in READABLE])
def test_readable_headers_pass_and_every_field_reads(header, value):
    record = FakeRecord(3, [*_ours(1), (header, value)])
    assert unreadable_header(record) is None
    msg = MessageExt.of(record)
    assert (msg.id, msg.keys, msg.reconsume_times, msg.born_timestamp) == ("id-1", "k-1", 0, 1_700_000_000_000)
    # a user property that is not UTF-8 is delivered, decoded with replacement characters (the last one wins)
    assert msg.properties["region"] == ("\ufffd\ufffd" if (header, value) == ("region", b"\xff\xfe") else "eu")
    assert (header, value) in msg.headers  # and raw, as it came


def test_records_without_headers_or_with_ours_only_pass():
    assert unreadable_header(FakeRecord(0, None)) is None
    assert unreadable_header(FakeRecord(0, [])) is None
    assert unreadable_header(FakeRecord(0, _ours(1))) is None


def test_the_check_agrees_with_the_full_decode_on_every_pair_of_headers():
    """The check must say exactly what :func:`read_headers` would raise: anything it lets through must never
    raise in a listener, and anything it stops must be one that would have."""
    headers: list[tuple[str, bytes | None]] = [(h, v) for h, v, _ in GARBAGE]
    headers += READABLE
    for first, second in itertools.product(headers, repeat=2):
        record = FakeRecord(1, [first, second])
        error = unreadable_header(record)
        try:
            read_headers(record)
        except MalformedRecordError as exc:
            assert error is not None and str(error) == str(exc), (first, second)
        else:
            assert error is None, (first, second, error)


def test_a_tag_filter_matches_a_utf8_tag_and_hands_one_that_is_not_to_its_caller():
    """Both doors filter tags with one test: the push consumer dead-letters what it is handed, the drop-in
    logs it; neither lets it match."""
    unreadable: list[tuple[int, str]] = []
    selects = record_filter(MessageSelector.by_tag("标签 || TagA"),
                            lambda record, error: unreadable.append((record.offset(), str(error))))
    assert selects(FakeRecord(0, [("rk.TAGS", "标签".encode())])) is True
    assert selects(FakeRecord(1, [("rk.TAGS", b"TagB")])) is False and unreadable == []
    assert selects(FakeRecord(2, [("rk.TAGS", b"\xff")])) is False
    assert unreadable == [(2, f"malformed record {TOPIC}[0]@2: bad system header rk.TAGS: not UTF-8")]


# -- the listener loop, every mode ---------------------------------------------------------------------
class RecordingPolicy:
    """A failure policy that remembers: ``in_place`` as the orderly policy, else as the concurrent one."""

    def __init__(self, in_place: bool) -> None:
        self.in_place = in_place
        self.dead: list[tuple[int, str]] = []
        self.retried: list[int] = []

    def failed(self, msg, reason):
        self.retried.append(msg.queue_offset)

    def dead_letter(self, msg, reason):
        self.dead.append((msg.queue_offset, reason))

    def dead_letter_raw(self, record, error):
        self.dead.append((record.offset(), str(error)))


def _mixed() -> tuple[list[FakeRecord], set[int]]:
    """Good records with the 25 garbled ones and the readable odd ones between them; the garbled offsets."""
    records, garbled = [], set()
    odd = iter(READABLE)
    for i, (header, value, _) in enumerate(GARBAGE):
        records.append(FakeRecord(len(records), _ours(i)))
        garbled.add(len(records))
        records.append(FakeRecord(len(records), [(header, value)]))
        extra = next(odd, None)
        if extra is not None:
            records.append(FakeRecord(len(records), [extra]))
    return records, garbled


def _run(records, start: int = 0, tries=None) -> Run:
    work = SimpleNamespace(topic=TOPIC, valid_until=lambda: math.inf, revoked=False)
    return Run(SimpleNamespace(work=work, records=records, index=start, done=0), len(records), tries or {})


def _handler(listener, policy, *, orderly: bool, batch_size: int = 0) -> ListenerHandler:
    subscriptions = Subscriptions(None)
    subscriptions.add(Subscription(TOPIC, MessageSelector.by_tag("*"), listener, batch_size))
    return ListenerHandler(subscriptions, policy, orderly=orderly, max_reconsume_times=3, suspend_ms=10)


def _reading_everything(seen: list[int]):
    """``read(msg)``: notes the message's offset, then reads what a listener may read (none of it may raise)."""
    def read(msg) -> None:
        seen.append(msg.queue_offset)
        msg.id, msg.tags, msg.keys, msg.key_list, msg.reconsume_times, msg.born_timestamp, msg.properties
        msg.headers, msg.get_property("region"), msg.get_property("TAGS"), repr(msg)
    return read


@pytest.mark.parametrize(("orderly", "batch_size"), [(False, 0), (True, 0), (False, 8), (True, 8)],
                         ids=["concurrent", "orderly", "batch", "orderly-batch"])
def test_no_listener_ever_gets_a_garbled_record_each_is_dead_lettered_once_and_the_rest_arrive_in_order(
        orderly, batch_size):
    records, garbled = _mixed()
    seen: list[int] = []
    read = _reading_everything(seen)
    if batch_size:
        def listener(batch):
            for msg in batch:
                read(msg)
    else:
        listener = read
    policy = RecordingPolicy(in_place=orderly)
    outcome = _handler(listener, policy, orderly=orderly, batch_size=batch_size).handle(_run(records))
    assert outcome.handled == len(records) and outcome.pause_ms is None
    assert seen == [r.offset() for r in records if r.offset() not in garbled]  # every readable one, in order
    assert [offset for offset, _ in policy.dead] == sorted(garbled)  # each garbled one once, none retried
    for (offset, reason), (header, _, words) in zip(policy.dead, GARBAGE):
        assert f"@{offset}: bad system header {header}: {words}" in reason, reason
    assert policy.retried == []


def test_broadcasting_logs_each_garbled_record_once_with_its_place_and_hands_it_to_no_listener(caplog):
    records, garbled = _mixed()
    seen: list[int] = []
    with caplog.at_level(logging.ERROR, logger="rocketkafka.ordering.work.failures"):
        _handler(_reading_everything(seen), Drop(), orderly=False).handle(_run(records))
    assert seen == [r.offset() for r in records if r.offset() not in garbled]
    logged = [r for r in caplog.records if "dropping malformed broadcast record" in r.getMessage()]
    assert sorted(r.offset for r in logged) == sorted(garbled)
    assert all(r.topic == TOPIC and r.partition == 0 and "bad system header" in r.getMessage() for r in logged)


def test_an_orderly_batch_retried_in_place_before_a_garbled_record_dead_letters_it_once():
    """The batch ends before a garbled record, which is dead-lettered once it leads: a batch failing in front
    of it and retried in place must not write it to the dead-letter topic at every try."""
    records = [FakeRecord(0, _ours(0)), FakeRecord(1, _ours(1)), FakeRecord(2, [("rk.TAGS", b"\xff")]),
               FakeRecord(3, _ours(3))]
    calls: list[list[int]] = []

    def listener(batch):
        calls.append([m.queue_offset for m in batch])
        if len(calls) == 1:
            return BatchFailure(1, "not yet")
        return None

    policy = RecordingPolicy(in_place=True)
    handler = _handler(listener, policy, orderly=True, batch_size=8)
    first = handler.handle(_run(records))
    assert first.handled == 1 and first.pause_ms is not None and policy.dead == []
    second = handler.handle(_run(records, start=1, tries={1: (1, "not yet")}))
    assert second.handled == 3 and second.pause_ms is None
    assert calls == [[0, 1], [1], [3]] and [offset for offset, _ in policy.dead] == [2]


# -- the drop-in's commit arguments --------------------------------------------------------------------
def _garbled_message_ext() -> MessageExt:
    return MessageExt.of(FakeRecord(5, [("rk.UNIQ_KEY", b"\xff")]))


@pytest.mark.parametrize(("message", "words"), [
    (_garbled_message_ext(), r"got rocketkafka\.message\.MessageExt of orders\[0\]@5: a PushConsumer's MessageExt is "
                             r"not this Consumer's record: pass its position as offsets=\[TopicPartition\("
                             r"msg\.topic, msg\.queue_id, msg\.queue_offset \+ 1\)\]"),
    (object(), r"got object <object object at .*>: pass a message this Consumer's poll\(\)/consume\(\) returned, or "
               r"a position read elsewhere as offsets=\[TopicPartition\(topic, partition, offset \+ 1\)\]"),
    ("hello", r"got str 'hello': pass a message"),
], ids=["push-consumer-message", "object", "str"])
@pytest.mark.parametrize("call", ["commit", "store_offsets"])
def test_a_message_that_is_not_a_kafka_record_is_refused_naming_the_argument_and_what_to_pass(call, message, words):
    with pytest.raises(TypeError, match=rf"^{call}\(message=\.\.\.\) expected confluent_kafka\.cimpl\.Message, "
                                        rf"{words}"):
        check_message_or_offsets(message, None, call)


@pytest.mark.parametrize(("offsets", "words"), [
    (TopicPartition("t", 0, 1), r"commit\(offsets=\.\.\.\) requires list of TopicPartition, got cimpl\.TopicPartition"),
    ([TopicPartition("t", 0, 1), ("t", 1, 5)], r"commit\(offsets=\.\.\.\) expected cimpl\.TopicPartition, got tuple "
                                               r"\('t', 1, 5\) at index 1: pass offsets=\[TopicPartition\("),
], ids=["not-a-list", "a-tuple-inside"])
def test_offsets_that_are_not_topic_partitions_are_refused_naming_the_item(offsets, words):
    with pytest.raises(TypeError, match=words):
        check_message_or_offsets(None, offsets, "commit")


def test_a_kafka_message_of_any_client_is_taken_and_one_without_a_position_is_refused_clearly():
    check_message_or_offsets(KafkaMessage(topic="t", partition=2, offset=9), None, "commit")  # as confluent-kafka
    assert position_of(KafkaMessage(topic="t", partition=2, offset=9)) == ("t", 2, 9)
    with pytest.raises(TypeError, match=r"commit\(message=\.\.\.\) expected a consumed record \(with topic, partition "
                                        r"and offset\), got a Message with topic='t', partition=None"):
        position_of(KafkaMessage(topic="t"))
    with pytest.raises(ValueError, match=r"commit\(\): message and offsets are mutually exclusive"):
        check_message_or_offsets(KafkaMessage(topic="t"), [], "commit")
