"""Every role runs its part of a deployment with exactly the ACLs and the Redis rule ``rocketkafka acls`` prints for it.

One deployment, each part as its own least-privilege user: an admin provisions the internal topics, a producer sends
plain and delayed messages, the delay forwarder delivers the delayed ones, a transaction producer sends a committed, a
rolled-back and an undecided transaction that the checker resolves by check-back, an orderly push consumer handles
them all in order with one retry and one dead letter, and a drop-in consumer of another group reads them too. The
history checker judges what the handlers saw.
"""

from __future__ import annotations

import threading

import pytest

from rocketkafka import ConsumeOrderlyStatus, Message, Producer, PushConsumer, TransactionMQProducer, TransactionStatus
from rocketkafka.delay import DelayForwarder
from rocketkafka.kafka import Consumer
from rocketkafka.operations import Role, provision_topics
from rocketkafka.testing.history import History, check
from rocketkafka.testing.reading import read_all
from rocketkafka.testing.waiting import wait_for
from rocketkafka.ordering import ConsumerOptions
from rocketkafka.txn import CheckerOptions, TransactionChecker, TransactionOptions
from tests.security.conftest import deployment_of

pytestmark = [pytest.mark.integration, pytest.mark.rk_needs("secure")]

FAST_ENGINE = dict(heartbeat_interval_ms=200, member_timeout_ms=2000, lock_lease_ms=3000, lock_renew_interval_ms=1000,
                   lock_client_expiry_ms=2000, rebalance_interval_ms=2000, commit_interval_ms=200)
FAST_CHECKER = dict(transaction_timeout_ms=1000, check_interval_ms=500, max_check_times=3,
                    **FAST_ENGINE)
SENT, DELAYED = 40, 5


def test_each_role_with_exactly_its_printed_acls_runs_its_part(rk_role, rk_settings, rk_topic, rk_group, tmp_path):
    orders = rk_topic(partitions=4)
    group, reader_group, payments = rk_group, f"{rk_group}-dropin", f"{rk_group}-pay"
    deployment = deployment_of(rk_settings, topics=(orders,), consumer_groups=(group,), producer_groups=(payments,),
                               orderly=True)
    reader_deployment = deployment_of(rk_settings, topics=(orders,), consumer_groups=(reader_group,))

    admin = rk_role(Role.ADMIN, deployment)
    provision_topics(admin.settings, deployment)
    producer_user, txn_user = rk_role(Role.PRODUCER, deployment), rk_role(Role.TRANSACTIONAL_PRODUCER, deployment)
    forwarder_user, checker_user = rk_role(Role.DELAY_FORWARDER, deployment), rk_role(Role.TRANSACTION_CHECKER, deployment)
    consumer_user, reader_user = rk_role(Role.PUSH_CONSUMER, deployment), rk_role(Role.DROP_IN_CONSUMER, reader_deployment)

    history, failed_once, lock = History(tmp_path / "orderly.jsonl"), set(), threading.Lock()

    def listen(msg):
        body = msg.body.decode()
        if body == "poison":
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        with lock:
            if body == "flaky" and msg.id not in failed_once:
                failed_once.add(msg.id)
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        with history.handler_call("orderly", msg):
            return ConsumeOrderlyStatus.SUCCESS

    forwarder = DelayForwarder(forwarder_user.settings, consumer_options=FAST_ENGINE).start()
    checker = TransactionChecker(checker_user.settings, CheckerOptions(**FAST_CHECKER))
    checker.start()
    consumer = PushConsumer(group, settings=consumer_user.settings, orderly=True, max_reconsume_times=2,
                            suspend_current_queue_time_ms=100, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                            **FAST_ENGINE)
    consumer.subscribe(orders, listen)
    consumer.start()
    transactions = TransactionMQProducer(payments, lambda msg: TransactionStatus.COMMIT, settings=txn_user.settings,
                                         options=TransactionOptions(check=ConsumerOptions(**FAST_ENGINE)))
    acknowledged: list[str] = []
    try:
        with Producer("app", settings=producer_user.settings) as producer:
            for i in range(SENT):
                body = "poison" if i == 7 else "flaky" if i == 11 else f"order {i}"
                acknowledged.append(producer.send_sync(Message(orders, body=body.encode(), keys=[f"k{i % 5}"])).msg_id)
            for i in range(DELAYED):
                acknowledged.append(producer.send_sync(Message(orders, body=f"later {i}".encode(),
                                                               delay_time_level=1)).msg_id)
        decided = {"commit": TransactionStatus.COMMIT, "rollback": TransactionStatus.ROLLBACK,
                   "undecided": TransactionStatus.UNKNOWN}
        transactions.start()  # it stays up: the checker asks it back about the undecided one
        sent = {name: transactions.send_message_in_transaction(Message(orders, body=f"pay {name}".encode()),
                                                               lambda msg, arg: decided[arg], name)
                for name in decided}
        acknowledged += [sent["commit"].msg_id, sent["undecided"].msg_id]
        poison = acknowledged[7]
        wanted = set(acknowledged) - {poison}
        assert wait_for(lambda: wanted <= {c.msg_id for c in history.calls}, 120), \
            f"{check(history.calls, wanted).summary()}: not handled {_named(wanted - {c.msg_id for c in history.calls}, acknowledged)}"
        dead = read_all(rk_settings.bootstrap_servers, rk_settings.topics.dead_letter(group), timeout=30,
                        config=rk_settings.kafka)
        assert [r.value() for r in dead] == [b"poison"], "the poison message is the one dead letter"
    finally:
        transactions.shutdown()
        consumer.shutdown()
        checker.stop()
        forwarder.close()
    report = check(history.calls, wanted)
    assert report.lost_count == 0 and report.duplicate_count == 0 and not report.reorders and not report.overlaps, \
        report.summary()
    assert sent["rollback"].msg_id not in {c.msg_id for c in history.calls}, "a rolled-back transaction was delivered"

    reader = Consumer({"group.id": reader_group, "auto.offset.reset": "earliest", **reader_user.settings.kafka,
                       "bootstrap.servers": rk_settings.bootstrap_servers,
                       "rocketkafka.redis.urls": ",".join(reader_user.settings.redis_urls),
                       "rocketkafka.topic.prefix": rk_settings.topic_prefix,
                       "rocketkafka.redis.prefix": rk_settings.redis_prefix})
    read: set[str] = set()
    try:
        reader.subscribe([orders])
        assert wait_for(lambda: _drain(reader, read) >= len(set(acknowledged)), 60), f"read {len(read)}"
        reader.commit(asynchronous=False)
    finally:
        reader.close()


def _named(ids: set[str], acknowledged: list[str]) -> list[str]:
    """Which sends the ``ids`` were (0..39 plain, 40..44 delayed, 45 committed, 46 undecided)."""
    return [f"#{acknowledged.index(i)}" for i in ids]


def _drain(reader, read: set[str]) -> int:
    for record in reader.consume(500, 0.5):
        if record.error() is None:
            read.add(dict(record.headers() or []).get("rk.UNIQ_KEY", b"").decode())
    return len(read)


def test_an_exactly_once_forwarder_with_exactly_its_printed_acls_forwards_each_message_once(rk_role, rk_settings,
                                                                                           rk_topic):
    orders = rk_topic(partitions=4)
    deployment = deployment_of(rk_settings, topics=(orders,), exactly_once=True)
    provision_topics(rk_role(Role.ADMIN, deployment).settings, deployment)
    producer_user, forwarder_user = rk_role(Role.PRODUCER, deployment), rk_role(Role.DELAY_FORWARDER, deployment)
    forwarder = DelayForwarder(forwarder_user.settings, consumer_options=FAST_ENGINE, exactly_once=True).start()
    try:
        with Producer("app", settings=producer_user.settings) as producer:
            ids = [producer.send_sync(Message(orders, body=f"d{i}".encode(), delay_time_level=1)).msg_id
                   for i in range(20)]
        committed = {"isolation.level": "read_committed", **rk_settings.kafka}

        def arrived() -> list[str]:
            return [dict(r.headers() or []).get("rk.UNIQ_KEY", b"").decode()
                    for r in read_all(rk_settings.bootstrap_servers, orders, 20, config=committed)]

        assert wait_for(lambda: set(ids) <= set(arrived()), 120), f"{len(set(arrived()) & set(ids))} of 20 arrived"
    finally:
        forwarder.close()
    assert sorted(arrived()) == sorted(ids), "a delayed message arrived twice, or a stranger did"
