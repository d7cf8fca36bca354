"""Bad input to the clients that talk to the broker: both producers, both consumers, delays.

Every row raises a named error saying what was wrong within a bounded time, and nothing is
half-written: after all of them the topic is still empty and no topic was created by mistake.
"""

from __future__ import annotations

import gc
from datetime import datetime, timedelta

import pytest
from confluent_kafka import KafkaException

from rocketkafka import Message, Producer, PushConsumer
from rocketkafka.admin import TopicAdmin
from rocketkafka.kafka import Consumer as DropInConsumer
from rocketkafka.kafka import Producer as DropInProducer
from rocketkafka.testing.reading import read_all
from tests.bad_input.conftest import FAST, Case, check_case, native_threads, wait_until

pytestmark = pytest.mark.integration

MISSING = "no-such-topic-bad-input"


def cases(producer: Producer, drop_in: DropInProducer, topic: str, settings) -> list[Case]:
    """The rows; ``topic`` exists with 2 partitions."""
    def msg(**kw) -> Message:
        return Message(**{"topic": topic, "body": b"x", **kw})

    return [
        # RocketMQ door
        Case("send: topic that does not exist", lambda: producer.send_sync(msg(topic=MISSING)),
             "TopicNotFoundError", f"'{MISSING}' does not exist; create it first"),
        Case("send: topic name Kafka refuses", lambda: producer.send_sync(msg(topic="orders!")),
             "InvalidTopicNameError", r"'!' at position 6 is none of them"),
        Case("send: message over message.max.bytes", lambda: producer.send_sync(msg(body=b"x" * 1_100_000)),
             "MessageTooLargeError", "over the limit of 1000000 bytes"),
        Case("send: selector returns a partition the topic lacks",
             lambda: producer.send_sync(msg(), selector=lambda n, m, a: 7), "SelectorError", "returned 7"),
        Case("send_orderly: sharding key None", lambda: producer.send_orderly(msg(), None),
             "SelectorError", "sharding key must be"),
        Case("send_async: delay level past the last", lambda: producer.send_async(msg(delay_time_level=99), print),
             "DelayError", "unknown delay level 99"),
        Case("send_oneway: NaN delay", lambda: producer.send_oneway(msg(delay=float("nan"))),
             "DelayError", "finite"),
        Case("send: delay given as True", lambda: producer.send_sync(msg(delay=True)),
             "DelayError", "got bool"),
        Case("send: deliver_at naive datetime", lambda: producer.send_sync(msg(deliver_at=datetime(2031, 1, 1))),
             "DelayError", "timezone-aware"),
        Case("send: deliver_at 100 years ahead",
             lambda: producer.send_sync(msg(deliver_at=datetime.now().astimezone() + timedelta(days=36500))),
             "DelayError", "over the maximum"),
        # Kafka drop-in door
        Case("produce: topic that does not exist", lambda: drop_in.produce(MISSING, b"x"),
             "TopicNotFoundError", "does not exist"),
        Case("produce: topic name Kafka refuses", lambda: drop_in.produce("a b", b"x"),
             "InvalidTopicNameError", r"' ' at position 1"),
        # a plain produce is confluent-kafka's own: librdkafka's error, as the client the user knows gives it
        Case("produce: partition the topic lacks", lambda: drop_in.produce(topic, b"x", partition=5),
             "KafkaException", "Unknown partition"),
        Case("produce with tags: partition the topic lacks",
             lambda: drop_in.produce(topic, b"x", partition=5, tags="t"), "MessageError", "partition 5 does not exist"),
        Case("produce: value an int", lambda: drop_in.produce(topic, 5, tags="t"), "TypeError",
             "value must be bytes, str or None, got int"),
        Case("produce: key an int", lambda: drop_in.produce(topic, b"x", key=5), "TypeError",  # confluent-kafka's own
             "a bytes-like object is required"),
        Case("produce: tags a list", lambda: drop_in.produce(topic, b"x", tags=["a"]), "MessageError", "one non-empty tag"),
        Case("produce: negative delay", lambda: drop_in.produce(topic, b"x", delay=-1), "DelayError", "negative"),
        # consumers: subscriptions checked against the broker
        Case("drop-in consumer: topic that does not exist",
             lambda: DropInConsumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": "bad-input-dropin",
                                     "rocketkafka.redis.urls": ",".join(settings.redis_urls),
                                     "rocketkafka.topic.prefix": settings.topic_prefix}).subscribe([MISSING]),
             "TopicNotFoundError", "does not exist"),
    ]


def test_bad_sends_and_subscriptions_raise_and_write_nothing(rk_settings, rk_topic):
    topic = rk_topic(partitions=2)
    drop_in = DropInProducer({"bootstrap.servers": rk_settings.bootstrap_servers,
                              "rocketkafka.topic.prefix": rk_settings.topic_prefix})
    # librdkafka refuses a partition the topic lacks at the call only once it knows the topic's partitions
    # (before that, in the delivery report), with confluent-kafka as with the drop-in: let it know them
    drop_in.list_topics(topic, timeout=10)
    with Producer("bad-input", settings=rk_settings) as producer:
        table = cases(producer, drop_in, topic, rk_settings)
        for case in table:
            check_case(case)
    assert drop_in.flush(10) == 0
    assert read_all(rk_settings.bootstrap_servers, topic) == [], "a bad call wrote something"
    listed = TopicAdmin(rk_settings).list()
    assert MISSING not in listed, "a bad call auto-created a topic"
    assert not [t for t in listed if t.startswith(rk_settings.topic_prefix + ".")], "internal topics were created"


def test_producer_used_outside_its_life_says_so(rk_settings, rk_topic):
    topic = rk_topic(partitions=1)
    producer = Producer("bad-input", settings=rk_settings)
    check_case(Case("send before start", lambda: producer.send_sync(Message(topic, body=b"x")),
                    "StateError", "not started"))
    producer.start()
    sender = producer.sender
    producer.shutdown()
    check_case(Case("send after shutdown", lambda: sender.prepare(Message(topic, body=b"x")),
                    "StateError", "shut down"))


def test_a_subscription_to_a_missing_topic_fails_start_and_leaves_nothing(rk_settings, rk_group):
    before = native_threads()
    consumer = PushConsumer(rk_group, settings=rk_settings, **FAST)
    consumer.subscribe(MISSING, lambda m: None)
    check_case(Case("start: subscribed topic does not exist", consumer.start, "TopicNotFoundError",
                    f"'{MISSING}' does not exist"))
    assert consumer.state.value == "closed"
    # pytest's ExceptionInfo and the error's traceback form a cycle holding the frames (and so the clients) of
    # start(); a plain ``except`` frees them at once, here the cycle collector must run first
    assert wait_until(lambda: gc.collect() >= 0 and sum((native_threads() - before).values()) == 0, 10), \
        native_threads() - before
    listed = TopicAdmin(rk_settings).list()
    assert MISSING not in listed
    assert rk_settings.topics.retry(rk_group) not in listed and rk_settings.topics.dead_letter(rk_group) not in listed


def test_kafka_settings_the_client_refuses_fail_every_start_cleanly(rk_settings, rk_topic, rk_group, rk_redis):
    """A setting librdkafka refuses (a misspelt ``security.protocol``) is a ConfigError naming it at every RocketMQ
    door's and sidecar's start -- never a raw KafkaException -- and the failed start leaves no member entry and a
    CLOSED client; the drop-in raises librdkafka's own KafkaException at construction, as confluent-kafka does."""
    from rocketkafka.delay.forwarder import DelayForwarder
    from rocketkafka.txn import CheckerOptions, TransactionChecker, TransactionMQProducer, TransactionStatus

    topic = rk_topic(partitions=1)
    bad = rk_settings.model_copy(update={"kafka": {"security.protocol": "BOGUS", "sasl.password": "s3cr3t"}})
    # the consumer's own Kafka settings are used by its fetching client only: made after Redis answered
    consumer = PushConsumer(rk_group, {"security.protocol": "BOGUS"}, settings=rk_settings, **FAST)
    consumer.subscribe(topic, lambda m: None)
    # the drop-in consumer is a confluent_kafka.Consumer: it refuses at construction, as confluent-kafka does
    with pytest.raises(KafkaException, match='"BOGUS" for configuration property "security.protocol"'):
        DropInConsumer({"bootstrap.servers": rk_settings.bootstrap_servers, "group.id": rk_group + "-d",
                        "rocketkafka.redis.urls": ",".join(rk_settings.redis_urls),
                        "rocketkafka.topic.prefix": rk_settings.topic_prefix, "security.protocol": "BOGUS"})
    starts = {
        "push consumer": consumer.start,
        "forwarder": (forwarder := DelayForwarder(bad, metrics_port=0)).start,
        "checker": TransactionChecker(bad, CheckerOptions(half_partitions=1)).start,
        "transaction producer": TransactionMQProducer("pg", lambda m: TransactionStatus.COMMIT, settings=bad).start,
    }
    for name, start in starts.items():
        error = check_case(Case(f"{name}: security.protocol BOGUS", start, "ConfigError",
                                'refused the settings: Invalid value "BOGUS" for configuration property "security.protocol"'))
        assert "s3cr3t" not in str(error)
    assert consumer.state.value == "closed" and forwarder.state.value == "closed"
    assert forwarder.metrics._server is None  # the metrics port it served first is closed again
    members = [key for node in rk_redis for key in node.keys(f"{rk_settings.redis_prefix}*")]
    assert all(node.zcard(key) == 0 for node in rk_redis for key in members if node.type(key) == b"zset"), members
