"""A service that loses a permission while it runs waits where it is, says so once (not a storm), shows it in its
health, goes on by itself once the grant is back -- and loses nothing: the delay forwarder commits no delay
offset past a record it could not forward; the transaction checker decides no half while it cannot write its
probe to the op topic; a push consumer commits nothing past a message whose retry copy it could not write, and
one that loses READ on its topic reads nothing until it is back, then goes on where it stopped.

A permission is taken away with a DENY ACL (it wins over every ALLOW) and given back by deleting it.
"""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from rocketkafka import ConsumeOrderlyStatus, ConsumeStatus, Message, Producer, PushConsumer
from rocketkafka.admin import TopicAdmin
from rocketkafka.delay.forwarder import DEFAULT_GROUP, DelayForwarder
from rocketkafka.headers import header_map
from rocketkafka.names import Header
from rocketkafka.ordering.engine.options import ConsumerOptions
from rocketkafka.refusals import REFUSALS
from rocketkafka.schedule.levels import DelayConfig
from rocketkafka.testing.history import History, check
from rocketkafka.testing.reading import read_all
from rocketkafka.testing.waiting import wait_for
from rocketkafka.txn import CheckerOptions, TransactionChecker, TransactionMQProducer, TransactionOptions
from rocketkafka.txn.status import TransactionStatus
from tests.security.helpers import deny, judged, msg_id_of, undeny

pytestmark = [pytest.mark.integration, pytest.mark.rk_needs("secure")]

#: Lock and membership timings of the services here (ms).
FAST = dict(heartbeat_interval_ms=200, member_timeout_ms=2000, lock_lease_ms=3000, lock_renew_interval_ms=1000,
            lock_client_expiry_ms=2000, rebalance_interval_ms=2000, commit_interval_ms=200)
#: Seconds a service has to go on once the grant is back: its retry pause grows to 5 s while refused.
RESUMES_S = 60.0


@pytest.fixture(autouse=True)
def _fresh_refusals():
    REFUSALS.clear()
    yield
    REFUSALS.clear()


def _redis_rule(settings) -> list[str]:
    return [f"~{settings.redis_prefix}:*", f"&{settings.redis_prefix}:*", "+@all"]


def _refused(caplog, *words: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "rocketkafka.refusals"
            and all(w in r.getMessage() for w in words)]


def _committed(settings, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer(settings.kafka_config(**{"group.id": group, "enable.auto.commit": False}))
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def _ends(settings, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer(settings.kafka_config(**{"group.id": "ends", "enable.auto.commit": False}))
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20, cached=False)[1]
                for p in range(partitions)}
    finally:
        consumer.close()


@pytest.mark.parametrize("exactly_once", [False, True],
                         ids=["at-least-once", "exactly-once"])
def test_a_forwarder_that_loses_write_on_a_real_topic_waits_there_and_loses_nothing(
        rk_user, rk_admin, rk_settings, rk_topic, caplog, exactly_once):
    """Exactly once, a write refused at once never enters the transaction: the transaction aborts rather than
    commit the delay offset past a record written nowhere."""
    settings = rk_settings.model_copy(update={"delay": DelayConfig(levels="100ms 200ms 500ms 1s 2s", partitions=2)})
    topic = rk_topic(partitions=2)
    transactions = [("TRANSACTIONAL_ID", "*", "LITERAL", "ALL")] if exactly_once else []
    user = rk_user(acls=[("TOPIC", f"{settings.topic_prefix}.", "PREFIXED", "ALL"), ("GROUP", "*", "LITERAL", "ALL"),
                         ("TOPIC", topic, "LITERAL", "WRITE"), *transactions], redis_rule=_redis_rule(settings))
    mine = user.settings.model_copy(update={"delay": settings.delay})
    write = ("TOPIC", topic, "LITERAL", "WRITE")
    forwarder = DelayForwarder(mine, consumer_options={**FAST, "consume_from_where": "CONSUME_FROM_FIRST_OFFSET"},
                               exactly_once=exactly_once)
    forwarder.start()
    producer = Producer("pg-delayed", settings=settings)  # the super user sends: only the forwarder loses a grant
    producer.start()
    level_topic = settings.topics.delay_level(1)
    committed_only = {**settings.client_properties(), "isolation.level": "read_committed"}
    read = lambda: read_all(settings.bootstrap_servers, topic, 20, committed_only)  # noqa: E731
    try:
        assert wait_for(lambda: len(forwarder.assignment()) == 2 * len(forwarder.tiers.topics()), 30)
        before = [producer.send_sync(Message(topic, body=b"a%d" % i, delay_time_level=1)).msg_id for i in range(20)]
        assert wait_for(lambda: len(judged(read(), before).lost) == 0, 30), "the first wave never arrived"
        caplog.set_level(logging.INFO)
        deny(rk_admin, user.principal, write)
        during = [producer.send_sync(Message(topic, body=b"b%d" % i, delay_time_level=1)).msg_id for i in range(20)]
        assert wait_for(lambda: _refused(caplog, f"Kafka refused WRITE on topic {topic!r} to {user.principal}"), 30)
        assert wait_for(lambda: any(topic in text for text in forwarder.health().refused), 10)
        time.sleep(3)  # retries go on meanwhile: each is said once a minute, not at every try
        lines = _refused(caplog, f"topic {topic!r}")
        assert len(lines) <= 2, lines  # once per delay partition at most
        assert judged(read(), during).seen_unique == 0  # nothing forwarded ...
        committed, ends = _committed(mine, DEFAULT_GROUP, level_topic, 2), _ends(settings, level_topic, 2)
        assert any(committed[p] < ends[p] for p in ends), (committed, ends)  # ... and no delay offset passed them
        undeny(rk_admin, user.principal, write)
        _each_read_once(read, before + during)
    finally:
        producer.shutdown()
        forwarder.close()


def test_a_checker_that_loses_write_on_the_op_topic_decides_nothing_and_loses_nothing(
        rk_user, rk_admin, rk_settings, rk_topic, rk_group, caplog):
    topic = rk_topic(partitions=1)
    checker_user = rk_user(acls=[("TOPIC", f"{rk_settings.topic_prefix}.", "PREFIXED", "ALL"),
                                 ("GROUP", "*", "LITERAL", "ALL")], redis_rule=_redis_rule(rk_settings))
    op_write = ("TOPIC", rk_settings.topics.op(), "LITERAL", "WRITE")
    asked: list[str] = []

    def check(msg) -> TransactionStatus:
        asked.append(msg.transaction_id)
        return TransactionStatus.COMMIT

    producer = TransactionMQProducer(rk_group, check, settings=rk_settings,
                                     options=TransactionOptions(half_partitions=1, check=ConsumerOptions(**FAST)))
    producer.start()  # creates the half, op and check topics as the super user
    checker = TransactionChecker(checker_user.settings, CheckerOptions(
        transaction_timeout_ms=1000, check_interval_ms=500, half_partitions=1, **FAST))
    tx_id = lambda r: (header_map(r.headers()).get(Header.TRANSACTION_ID) or b"").decode() or None  # noqa: E731
    read = lambda: read_all(rk_settings.bootstrap_servers, topic, 20, rk_settings.client_properties())  # noqa: E731
    try:
        caplog.set_level(logging.INFO)
        deny(rk_admin, checker_user.principal, op_write)
        checker.start()
        assert wait_for(lambda: checker.assignment() == {0}, 30)
        ids = [producer.send_message_in_transaction(Message(topic, body=b"t%d" % i), lambda m, a: None).transaction_id
               for i in range(10)]  # the local transactions say nothing (UNKNOWN): each needs a check-back
        assert wait_for(lambda: _refused(caplog, "probe of op partition 0",
                                         f"Kafka refused WRITE on topic {rk_settings.topics.op()!r}"), 30)
        time.sleep(3)  # the halves are past their timeout: a checker that could write would check them back now
        assert asked == [] and checker.stats().checks_sent == 0  # nothing decided without its probe
        assert len(_refused(caplog, "probe of op partition")) == 1  # said once, not every 0.5 s
        assert any("probe of op partition 0" in text for text in checker.health().refused)
        undeny(rk_admin, checker_user.principal, op_write)
        _each_read_once(read, ids, tx_id)
    finally:
        checker.stop()
        producer.shutdown()


def test_a_push_consumer_that_cannot_write_a_retry_copy_commits_nothing_past_it(
        rk_user, rk_admin, rk_settings, rk_topic, rk_group, caplog):
    topic = rk_topic(partitions=1)
    retry, dlq = rk_settings.topics.retry(rk_group), rk_settings.topics.dead_letter(rk_group)
    with TopicAdmin(rk_settings) as admin:
        admin.create_internal({retry: 1, dlq: 1})
    user = rk_user(acls=[("TOPIC", topic, "LITERAL", "READ"), ("TOPIC", retry, "LITERAL", "READ"),
                         ("TOPIC", retry, "LITERAL", "WRITE"), ("TOPIC", dlq, "LITERAL", "WRITE"),
                         ("GROUP", rk_group, "LITERAL", "READ")], redis_rule=_redis_rule(rk_settings))
    retry_write = ("TOPIC", retry, "LITERAL", "WRITE")
    seen: list[tuple[str, int]] = []

    def listener(msg) -> ConsumeStatus:
        seen.append((msg.id, msg.reconsume_times))
        return ConsumeStatus.RECONSUME_LATER if msg.reconsume_times == 0 else ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(rk_group, settings=user.settings, **FAST, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                            retry_backoff=False)
    consumer.subscribe(topic, listener)
    caplog.set_level(logging.INFO)
    deny(rk_admin, user.principal, retry_write)
    with Producer("pg-retry", settings=rk_settings) as producer:
        ids = [producer.send_sync(Message(topic, body=b"r%d" % i)).msg_id for i in range(5)]
    consumer.start()
    try:
        assert wait_for(lambda: _refused(caplog, "writing a retry/dead-letter copy",
                                         f"Kafka refused WRITE on topic {retry!r} to {user.principal}"), 30)
        time.sleep(2)
        assert _committed(rk_settings, rk_group, topic, 1)[0] < 1  # nothing committed past the failed message
        assert len(_refused(caplog, "writing a retry/dead-letter copy")) == 1
        undeny(rk_admin, user.principal, retry_write)
        retried = lambda: {m for m, times in seen if times >= 1}  # noqa: E731
        assert wait_for(lambda: retried() >= set(ids), RESUMES_S), (sorted(retried()), ids)
        assert wait_for(lambda: _committed(rk_settings, rk_group, topic, 1)[0] == len(ids), 30)
    finally:
        consumer.shutdown()


def test_a_push_consumer_that_loses_read_on_its_topic_says_so_once_and_goes_on_where_it_stopped(
        rk_user, rk_admin, rk_settings, rk_topic, rk_group, caplog):
    topic, user = _orderly_reader(rk_user, rk_settings, rk_topic, rk_group)
    read = ("TOPIC", topic, "LITERAL", "READ")
    history, consumer = _started_orderly(user.settings, rk_group, topic)
    seen = lambda ids: {c.msg_id for c in history.calls} >= set(ids)  # noqa: E731
    try:
        with Producer("pg-read-lost", settings=rk_settings) as producer:
            before = [producer.send_sync(Message(topic, body=b"a%d" % i, keys=f"k{i}")).msg_id for i in range(20)]
            assert wait_for(lambda: seen(before), 30)
            caplog.set_level(logging.INFO)
            deny(rk_admin, user.principal, read)
            # a fetch the broker authorized before the deny may still return what arrives while it waits (up to the
            # engine's fetch wait, 100 ms on Apache Kafka): the records "during" go out once a fetch was refused
            assert wait_for(lambda: _refused(caplog, "fetching", f"Kafka refused READ on topic {topic!r} to "
                                                                 f"{user.principal}"), 30)
            during = [producer.send_sync(Message(topic, body=b"b%d" % i, keys=f"k{i}")).msg_id for i in range(20)]
        time.sleep(3)
        assert not {c.msg_id for c in history.calls} & set(during)  # nothing read ...
        assert len(_refused(caplog, "fetching")) <= 2, _refused(caplog, "fetching")  # ... said once per partition
        assert any(topic in text for text in consumer.health().refused)
        undeny(rk_admin, user.principal, read)
        _each_handled_once_in_order(history, before, during)
    finally:
        consumer.shutdown()


def test_an_orderly_consumer_whose_redis_user_loses_the_lock_table_waits_and_locks_again(
        rk_user, rk_backend, rk_settings, rk_topic, rk_group, caplog):
    """The Redis user loses the lock table's keys (keeps its membership): the consumer's locks run out, it says
    NOPERM in its health and log -- not a dead poll thread -- and, given the keys back, locks again and handles what
    came meanwhile, each message once and in order."""
    topic, user = _orderly_reader(rk_user, rk_settings, rk_topic, rk_group)
    membership_only = [f"~{rk_settings.redis_prefix}:{{{rk_group}}}:member*", "&*", "+@all"]
    history, consumer = _started_orderly(user.settings, rk_group, topic)
    seen = lambda ids: {c.msg_id for c in history.calls} >= set(ids)  # noqa: E731
    try:
        with Producer("pg-redis-lost", settings=rk_settings) as producer:
            before = [producer.send_sync(Message(topic, body=b"a%d" % i, keys=f"k{i}")).msg_id for i in range(20)]
            assert wait_for(lambda: seen(before), 30)
            rk_backend.add_redis_user(user.name, user.password, membership_only)
            assert wait_for(lambda: any("NOPERM" in text for text in consumer.health().refused), 30), \
                consumer.health()
            assert consumer.state.value == "running", consumer.state  # waiting, not dead
            assert _refused(caplog, "locking", "NOPERM")
            during = [producer.send_sync(Message(topic, body=b"b%d" % i, keys=f"k{i}")).msg_id for i in range(20)]
        rk_backend.add_redis_user(user.name, user.password, _redis_rule(rk_settings))
        _each_handled_once_in_order(history, before, during)
    finally:
        consumer.shutdown()


def _orderly_reader(rk_user, rk_settings, rk_topic, rk_group):
    """A two-partition topic, its group's DLQ, and a user with exactly what an orderly reader of it needs."""
    topic = rk_topic(partitions=2)
    dlq = rk_settings.topics.dead_letter(rk_group)
    with TopicAdmin(rk_settings) as admin:
        admin.create_internal({dlq: 1})
    user = rk_user(acls=[("TOPIC", topic, "LITERAL", "READ"), ("TOPIC", topic, "LITERAL", "DESCRIBE"),
                         ("TOPIC", dlq, "LITERAL", "WRITE"), ("GROUP", rk_group, "LITERAL", "READ")],
                   redis_rule=_redis_rule(rk_settings))
    return topic, user


def _started_orderly(settings, group: str, topic: str) -> tuple[History, PushConsumer]:
    """An orderly consumer of ``topic`` from its start, recording every message it handles."""
    history = History()

    def listener(msg) -> ConsumeOrderlyStatus:
        with history.handler_call("consumer", msg):
            return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer(group, settings=settings, orderly=True, **FAST,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic, listener)
    consumer.start()
    return history, consumer


def _each_read_once(read, ids: list[str], id_of=msg_id_of) -> None:
    """Every one of ``ids`` arrives in what ``read()`` returns (given the time a service takes to go on), once."""
    assert wait_for(lambda: judged(read(), ids, id_of).lost_count == 0, RESUMES_S), judged(read(), ids, id_of).summary()
    report = judged(read(), ids, id_of)
    assert report.lost_count == 0 and report.duplicate_count == 0, report.summary()


def _each_handled_once_in_order(history: History, before: list[str], during: list[str]) -> None:
    """What was sent while a grant was gone is handled once it is back; all of it once, in order, never overlapping."""
    assert wait_for(lambda: {c.msg_id for c in history.calls} >= set(during), RESUMES_S), len(history.calls)
    report = check(history.calls, before + during)
    assert report.lost_count == 0 and report.duplicate_count == 0 and not report.reorders \
        and not report.overlaps, report.summary()
