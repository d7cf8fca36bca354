"""Transactional messages against a real broker: end states, check-back, max checks, races, bad input.

Timings are RocketMQ's scaled down: timeout 1 s, scan interval 0.5 s, 3 checks.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from rocketkafka import Message, MessageError, PushConsumer, TopicNotFoundError
from rocketkafka.headers import header_map
from rocketkafka.names import Header
from rocketkafka.errors import ConfigError
from rocketkafka.testing.capabilities import Capability
from rocketkafka.txn import TransactionListenerError, TransactionMessageError, TransactionMQProducer
from tests.txn.conftest import COMMIT, FAST_MEMBERSHIP, ROLLBACK, UNKNOWN, Store, fast_producer_options, tx_ids, \
    wait_until

pytestmark = pytest.mark.integration

def test_commit_reaches_a_consumer_once_with_the_transaction_id(rk_settings, rk_topic, rk_group, make_producer,
                                                                 make_checker, read_topic):
    topic = rk_topic(partitions=2)
    producer = make_producer("pg", Store().check)
    make_checker(transaction_timeout_ms=3000)  # ample time for the end to land before any check is due
    msg = Message(topic, b"paid", tags="TagA", keys="order-1", properties={"region": "eu"})
    result = producer.send_message_in_transaction(msg, lambda m, arg: COMMIT if arg == "ok" else ROLLBACK, "ok")
    assert result.local_state is COMMIT and result.transaction_id == result.msg_id == msg.id
    assert result.topic == rk_settings.topics.half()
    seen = []
    consumer = PushConsumer(rk_group, settings=rk_settings, commit_interval_ms=200, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                            **FAST_MEMBERSHIP)
    consumer.subscribe(topic, seen.append)
    consumer.start()
    try:
        assert wait_until(lambda: seen, 20)
        time.sleep(2.0)  # four scan intervals: a check-back would have written it again
    finally:
        consumer.shutdown()
    [got] = seen
    assert (got.id, got.body, got.tags, got.keys, got.properties) == (msg.id, b"paid", "TagA", "order-1", {"region": "eu"})
    assert got.get_property(Header.TRANSACTION_ID) == result.transaction_id
    assert got.get_property(Header.TRANSACTION) is None and got.get_property(Header.REAL_TOPIC) is None
    assert len(read_topic(rk_settings.topics.check_request("pg"))) == 0


def test_kafka_transactions_are_refused_where_aborted_records_show(rk_backend, rk_settings):
    if rk_backend.missing(Capability.HIDE_ABORTED) is None:
        pytest.skip(f"the broker at {rk_settings.bootstrap_servers} hides aborted records")
    producer = TransactionMQProducer("pg", Store().check, settings=rk_settings,
                                     options=fast_producer_options(kafka_transactions=True))
    with pytest.raises(ConfigError, match="kafka_transactions=True needs a broker whose read_committed"):
        producer.start()


def test_rollback_is_never_visible(rk_settings, rk_topic, make_producer, make_checker, read_topic):
    topic = rk_topic(partitions=2)
    producer = make_producer("pg", Store(default=COMMIT).check)  # a check-back would commit: there must be none
    checker = make_checker(transaction_timeout_ms=3000)
    results = [producer.send_message_in_transaction(Message(topic, b"x"), lambda m, a: ROLLBACK) for _ in range(10)]
    assert {r.local_state for r in results} == {ROLLBACK}
    assert wait_until(lambda: checker.stats().done_by_op >= 10, 20)
    time.sleep(1.5)
    assert read_topic(topic) == []
    ops = read_topic(rk_settings.topics.op())
    assert sorted(h for h in tx_ids([r for r in ops if Header.TRANSACTION_ID in header_map(r.headers())])) == \
        sorted(r.transaction_id for r in results)


@pytest.mark.parametrize("answer", [COMMIT, ROLLBACK])
def test_unknown_is_resolved_by_check_back(answer, rk_settings, rk_topic, make_producer, make_checker, read_topic):
    topic = rk_topic(partitions=2)
    store = Store()
    producer = make_producer("pg", store.check)
    make_checker()
    raising = producer.send_message_in_transaction(Message(topic, b"a"), lambda m, a: 1 / 0)  # raising: UNKNOWN
    silent = producer.send_message_in_transaction(Message(topic, b"b"), lambda m, a: None)  # None: UNKNOWN
    explicit = producer.send_message_in_transaction(Message(topic, b"c"), lambda m, a: UNKNOWN)
    ids = [r.transaction_id for r in (raising, silent, explicit)]
    assert {r.local_state for r in (raising, silent, explicit)} == {UNKNOWN}
    assert wait_until(lambda: all(store.checks[t] >= 1 for t in ids), 20)  # asked while still undecided
    for t in ids:
        store.state[t] = answer
    if answer is COMMIT:
        assert wait_until(lambda: len(read_topic(topic)) >= 3, 20)
    assert wait_until(lambda: len([r for r in read_topic(rk_settings.topics.op()) if header_map(r.headers()).get(
        Header.TRANSACTION_STATE) == answer.name.encode()]) >= 3, 20)
    time.sleep(1.5)
    assert sorted(tx_ids(read_topic(topic))) == (sorted(ids) if answer is COMMIT else [])
    assert read_topic(rk_settings.topics.max_check()) == []


def test_check_that_stays_unknown_moves_the_half_to_max_check_after_max_checks(rk_settings, rk_topic, make_producer,
                                                                               make_checker, read_topic):
    topic = rk_topic(partitions=1)
    store = Store(default=UNKNOWN)
    producer = make_producer("pg", store.check)
    checker = make_checker(max_check_times=3)
    result = producer.send_message_in_transaction(Message(topic, b"never", keys="k1"), lambda m, a: UNKNOWN)
    assert wait_until(lambda: read_topic(rk_settings.topics.max_check()), 30)
    time.sleep(2.0)  # four more scans: nothing happens to it any more
    [parked] = read_topic(rk_settings.topics.max_check())
    h = header_map(parked.headers())
    assert (h[Header.TRANSACTION_ID].decode(), h[Header.CHECK_TIMES], h[Header.REAL_TOPIC].decode()) == (
        result.transaction_id, b"3", topic)
    assert parked.value() == b"never"
    assert store.checks[result.transaction_id] == 3
    assert len(read_topic(rk_settings.topics.check_request("pg"))) == 3
    assert read_topic(topic) == []
    assert checker.stats().max_checked == 1


def test_no_check_back_for_ends_before_the_timeout_and_none_after_the_op(rk_settings, rk_topic, make_producer,
                                                                         make_checker, read_topic):
    topic = rk_topic(partitions=2)
    store = Store()
    producer = make_producer("pg", store.check)
    make_checker(transaction_timeout_ms=3000, check_interval_ms=2000)  # both far longer than an end or answer takes
    ended = [producer.send_message_in_transaction(Message(topic, b"e"), lambda m, a: s).transaction_id
             for s in (COMMIT, ROLLBACK) * 10]
    open_ = [producer.send_message_in_transaction(Message(topic, b"o"), lambda m, a: UNKNOWN).transaction_id for _ in range(5)]
    for t in open_:
        store.state[t] = COMMIT
    assert wait_until(lambda: len(read_topic(topic)) == 15, 30)
    time.sleep(5.0)  # two more scans after the answers' ops arrived
    requests = Counter(tx_ids(read_topic(rk_settings.topics.check_request("pg"))))
    assert requests == {t: 1 for t in open_}
    assert set(store.checks) == set(open_)
    assert Counter(tx_ids(read_topic(topic))) == {t: 1 for t in ended[::2] + open_}


@pytest.mark.parametrize("slow", ["local transaction", "check answer"])
def test_end_transaction_racing_a_check_back_writes_one_real_message(slow, rk_settings, rk_topic, make_producer,
                                                                     make_checker, read_topic):
    topic = rk_topic(partitions=4)
    store = Store(default=COMMIT)
    pause = {"local transaction": 3.5, "check answer": 0.0}[slow]

    def check(msg):
        if slow == "check answer":
            time.sleep(1.5)  # three scan intervals: the checker checks the next copy meanwhile
        return store.check(msg)

    def execute(msg, arg):
        time.sleep(pause)  # the checker re-writes the half and asks the group meanwhile
        return COMMIT if slow == "local transaction" else UNKNOWN

    producer = make_producer("pg", check)
    make_checker()
    results = []
    threads = [threading.Thread(target=lambda: results.append(producer.send_message_in_transaction(
        Message(topic, b"r", keys=f"k{i}"), execute))) for i in range(3)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    ids = sorted(r.transaction_id for r in results)
    assert wait_until(lambda: sorted(tx_ids(read_topic(topic))) == ids, 20)
    time.sleep(3.0)
    requests = Counter(tx_ids(read_topic(rk_settings.topics.check_request("pg"))))
    assert all(requests[t] >= (2 if slow == "check answer" else 1) for t in ids), requests  # the race did happen
    assert Counter(tx_ids(read_topic(topic))) == {t: 1 for t in ids}  # raw records, before any dedup


def test_restarted_producer_answers_checks_for_halves_sent_before(rk_settings, rk_topic, make_producer, make_checker,
                                                                  read_topic):
    topic = rk_topic(partitions=2)
    store = Store()
    first = make_producer("pg", store.check)
    ids = [first.send_message_in_transaction(Message(topic, b"x"), lambda m, a: UNKNOWN).transaction_id for _ in range(4)]
    first.shutdown()
    store.state.update({ids[0]: COMMIT, ids[1]: COMMIT, ids[2]: ROLLBACK, ids[3]: ROLLBACK})
    make_checker()
    make_producer("pg", store.check)  # a new instance, nothing in memory
    assert wait_until(lambda: sorted(tx_ids(read_topic(topic))) == sorted(ids[:2]), 30)
    assert wait_until(lambda: all(store.checks[t] for t in ids), 10)


def test_listener_object_drives_both_phases(rk_settings, rk_topic, make_producer, make_checker, read_topic):
    topic = rk_topic(partitions=1)

    class Listener:
        def __init__(self):
            self.args = []

        def execute_local_transaction(self, msg, arg):
            self.args.append((msg.id, arg))
            return UNKNOWN

        def check_local_transaction(self, msg):
            return COMMIT if msg.body == b"yes" else ROLLBACK

    listener = Listener()
    producer = make_producer("pg", listener)
    make_checker()
    yes = producer.send_message_in_transaction(Message(topic, b"yes"), user_args=42)
    producer.send_message_in_transaction(Message(topic, b"no"), user_args=43)
    assert listener.args == [(yes.transaction_id, 42), (listener.args[1][0], 43)]
    assert wait_until(lambda: tx_ids(read_topic(topic)) == [yes.transaction_id], 20)


def test_bad_input_raises_and_writes_nothing(rk_settings, rk_topic, make_producer, make_checker, read_topic):
    topic = rk_topic(partitions=1)
    store = Store(default=ROLLBACK)
    producer = make_producer("pg", store.check)
    ran = []
    with pytest.raises(TransactionMessageError, match="cannot be delayed"):
        producer.send_message_in_transaction(Message(topic, b"d", delay_time_level=3), lambda m, a: ran.append(1))
    with pytest.raises(TopicNotFoundError):
        producer.send_message_in_transaction(Message(topic + "-missing", b"m"), lambda m, a: ran.append(1))
    with pytest.raises(MessageError):
        producer.send_message_in_transaction(Message(topic, 12345), lambda m, a: ran.append(1))
    assert ran == [] and read_topic(rk_settings.topics.half()) == []
    with pytest.raises(TypeError):
        producer.send_message_in_transaction(Message(topic, b"x"), "not callable")
    with pytest.raises(TransactionListenerError):
        make_producer("pg2", object())
    # a wrong return type: clear error; the half stays open (no real message, no op) and check-back decides
    with pytest.raises(TransactionListenerError, match="returned True") as err:
        producer.send_message_in_transaction(Message(topic, b"w"), lambda m, a: True)
    [half] = read_topic(rk_settings.topics.half())
    assert header_map(half.headers())[Header.TRANSACTION_ID].decode() == err.value.transaction_id
    time.sleep(0.5)
    assert read_topic(topic) == [] and read_topic(rk_settings.topics.op()) == []
    make_checker()
    assert wait_until(lambda: store.checks[err.value.transaction_id] >= 1, 20)
    assert wait_until(lambda: any(header_map(r.headers()).get(Header.TRANSACTION_STATE) == b"ROLLBACK"
                                  for r in read_topic(rk_settings.topics.op())), 10)
    assert read_topic(topic) == []


@pytest.mark.rk_needs("hide-aborted")
def test_kafka_transactions_mode_writes_real_and_op_together(rk_settings, rk_topic, make_producer, make_checker,
                                                             read_topic):
    topic = rk_topic(partitions=2)
    producer = make_producer("pg", Store(default=COMMIT).check, kafka_transactions=True)
    checker = make_checker()
    ids = [producer.send_message_in_transaction(Message(topic, b"k"), lambda m, a: s).transaction_id
           for s in (COMMIT, ROLLBACK, COMMIT)]
    assert wait_until(lambda: sorted(tx_ids(read_topic(topic))) == sorted([ids[0], ids[2]]), 20)
    assert wait_until(lambda: checker.stats().done_by_op >= 3, 20)
    assert len(read_topic(rk_settings.topics.check_request("pg"))) == 0
