"""Settings that are right but unusual: Redis with a password or an ACL user (every internal client must
use it), and two deployments sharing Redis under different topic prefixes (they must not starve each other).
"""

from __future__ import annotations

import logging
import os

import pytest

from rocketkafka import ConsumeStatus, Message, Producer, PushConsumer
from rocketkafka.delay.forwarder import DelayForwarder
from rocketkafka.ordering.consumers.idempotent import IdempotentConsumer
from rocketkafka.schedule.levels import DelayConfig
from rocketkafka.testing.reading import read_all
from rocketkafka.ordering.engine.options import ConsumerOptions
from rocketkafka.txn import (CheckerOptions, TransactionChecker, TransactionMQProducer, TransactionOptions,
                             TransactionStatus)
from tests.bad_input.conftest import FAST, wait_until

pytestmark = pytest.mark.integration

LEVELS = DelayConfig(levels="100ms 200ms", partitions=1)


def _forwarder(settings) -> DelayForwarder:
    return DelayForwarder(settings, consumer_options=dict(FAST))


def _owns_everything(fwd: DelayForwarder) -> bool:
    return len(fwd.assignment()) == len(fwd.tiers.topics()) * fwd.config.partitions


def test_two_deployments_with_different_prefixes_and_the_default_group_both_forward(rk_settings, rk_topic):
    """Issue 14: membership keyed by group alone let forwarders of prefix A count as members of prefix B."""
    topic = rk_topic(partitions=1)
    blue = rk_settings.model_copy(update={"topic_prefix": rk_settings.topic_prefix + "blue", "delay": LEVELS})
    green = rk_settings.model_copy(update={"topic_prefix": rk_settings.topic_prefix + "green", "delay": LEVELS})
    forwarders = [_forwarder(blue).start(), _forwarder(green).start()]
    try:
        assert wait_until(lambda: all(_owns_everything(f) for f in forwarders), 20), \
            [sorted(f.assignment()) for f in forwarders]
        for settings in (blue, green):
            with Producer("pg", settings=settings) as producer:
                producer.send_sync(Message(topic, body=settings.topic_prefix.encode(), delay_time_level=1))
        assert wait_until(lambda: len(read_all(rk_settings.bootstrap_servers, topic)) == 2, 20)
    finally:
        for fwd in forwarders:
            fwd.close()
    assert sorted(r.value() for r in read_all(rk_settings.bootstrap_servers, topic)) == \
        sorted([blue.topic_prefix.encode(), green.topic_prefix.encode()])


@pytest.mark.parametrize("who", ["requirepass", "ACL user"])
def test_every_internal_client_uses_the_redis_credentials(rk_settings, rk_topic, rk_group, secured_redis, who, caplog):
    """Consumer (locks, membership), delay forwarder, transaction checker and idempotent helper all work against
    a Redis that needs credentials, and no log line shows them."""
    caplog.set_level(logging.DEBUG, logger="rocketkafka")
    with_password, with_acl = secured_redis
    url, secret = (with_password.url(password="req-Secret-1"), "req-Secret-1") if who == "requirepass" else \
        (with_acl.url("app", "app-Secret-1"), "app-Secret-1")
    _every_internal_client_works(rk_settings.model_copy(update={"redis_urls": [url], "delay": LEVELS}),
                                 rk_topic(partitions=2), rk_group)
    shown = "\n".join(r.getMessage() for r in caplog.records)
    assert secret not in shown


#: A ``rediss://`` URL (with its credentials and ``ssl_ca_certs=...``) of a Redis that speaks TLS only.
TLS_URL = os.environ.get("ROCKETKAFKA_TEST_REDIS_TLS_URL", "")


@pytest.mark.skipif(not TLS_URL, reason="the embedded redis-server is built without TLS: set "
                                        "ROCKETKAFKA_TEST_REDIS_TLS_URL=rediss://... to run this against a TLS Redis")
def test_every_internal_client_uses_a_tls_redis(rk_settings, rk_topic, rk_group):
    _every_internal_client_works(rk_settings.model_copy(update={"redis_urls": [TLS_URL], "delay": LEVELS}),
                                 rk_topic(partitions=2), rk_group)


def _every_internal_client_works(settings, topic: str, rk_group: str) -> None:
    got: list[bytes] = []

    def listener(msg):
        got.append(msg.body)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(rk_group, settings=settings, orderly=True, **FAST)
    consumer.subscribe(topic, IdempotentConsumer(consumer, listener))  # its marks live in the same Redis
    forwarder = _forwarder(settings)
    checker = TransactionChecker(settings, CheckerOptions(half_partitions=1, transaction_timeout_ms=200,
                                                          check_interval_ms=300, **{
                                                              k: v for k, v in FAST.items()
                                                              if k not in ("consume_from_where", "commit_interval_ms")}))
    # a transaction left undecided by its local execution, so the checker must ask back (its check consumer,
    # the checker's locks, membership and end markers all live in the secured Redis)
    txn_producer = TransactionMQProducer("pg", lambda m: TransactionStatus.COMMIT, settings=settings,
                                         options=TransactionOptions(half_partitions=1, check=ConsumerOptions(**FAST)))
    try:
        consumer.start()
        forwarder.start()
        txn_producer.start()
        checker.start()
        with Producer("pg", settings=settings) as producer:
            producer.send_sync(Message(topic, body=b"now", keys="k1"))
            producer.send_sync(Message(topic, body=b"later", keys="k2", delay_time_level=1))
        txn_producer.send_message_in_transaction(Message(topic, body=b"checked back", keys="k3"),
                                                 lambda m, arg: TransactionStatus.UNKNOWN)
        assert wait_until(lambda: sorted(got) == [b"checked back", b"later", b"now"], 40), got
        assert consumer.assignment() and _owns_everything(forwarder)
    finally:
        consumer.shutdown()
        forwarder.close()
        checker.stop()
        txn_producer.shutdown()
