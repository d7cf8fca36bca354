"""What confluent-kafka's own unit tests expect of a client with no cluster to talk to.

Building, subscribing and calling must not fail because nothing answers (librdkafka reports
through ``error_cb`` and the log); an exception raised in a callback leaves the call that ran
it; argument errors and the closed state raise confluent-kafka's exceptions with its words.
Each test runs once per module and compares with fixed expectations.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, TopicPartition


def closed_port() -> int:
    """A local port nothing listens on (connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def consumer_conf(**extra: Any) -> dict[str, Any]:
    return {"group.id": "conformance-offline", "socket.timeout.ms": 100, "session.timeout.ms": 1000, **extra}


def raiser(words: str):
    """A callback that raises the first time only (later reports, e.g. during close(), pass quietly)."""
    calls = []

    def callback(*args: Any) -> None:
        calls.append(args)
        if len(calls) == 1:
            raise RuntimeError(words)
    return callback


def test_a_config_dict_is_required(kafka_module):
    for make in (kafka_module.Producer, kafka_module.Consumer):
        for args in ((), (None,), ("bootstrap.servers=x",)):
            with pytest.raises(TypeError, match="expected configuration dict"):
                make(*args)
    kafka_module.Producer(**{"socket.timeout.ms": 10})  # keyword config alone is a config
    with pytest.raises(ValueError, match="group.id must be set"):
        kafka_module.Consumer({})


def test_clients_build_and_subscribe_without_a_broker(kafka_module):
    producer = kafka_module.Producer({"message.timeout.ms": 10})
    producer.produce("anywhere", b"queued")  # waits in the queue; no broker, so it times out
    failed = []
    producer.produce("anywhere", b"x", on_delivery=lambda err, msg: failed.append(err.code()))
    assert producer.flush(5) == 0 and failed == [KafkaError._MSG_TIMED_OUT]

    consumer = kafka_module.Consumer(consumer_conf())
    started = time.monotonic()
    consumer.subscribe(["anything"])
    consumer.unsubscribe()
    consumer.subscribe(["anything"], on_assign=lambda c, p: None, on_revoke=lambda c, p: None)
    assert consumer.poll(0.01) is None and consumer.consume(1, 0.01) == []
    consumer.close()
    assert time.monotonic() - started < 5


def test_exceptions_raised_in_callbacks_leave_the_call_that_ran_them(kafka_module):
    broker = f"127.0.0.1:{closed_port()}"
    consumer = kafka_module.Consumer(consumer_conf(**{"bootstrap.servers": broker,
                                                      "error_cb": raiser("from error_cb")}))
    consumer.subscribe(["t"])
    with pytest.raises(RuntimeError, match="from error_cb"):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            consumer.poll(0.1)
    consumer.close()

    consumer = kafka_module.Consumer(consumer_conf(**{"bootstrap.servers": broker, "statistics.interval.ms": 100,
                                                      "stats_cb": raiser("from stats_cb")}))
    with pytest.raises(RuntimeError, match="from stats_cb"):
        consumer.consume(1, 2.0)
    consumer.close()

    producer = kafka_module.Producer({"bootstrap.servers": broker, "message.timeout.ms": 10})
    producer.produce("t", b"x", on_delivery=raiser("from on_delivery"))
    with pytest.raises(RuntimeError, match="from on_delivery"):
        producer.flush(5)


@pytest.mark.parametrize(("call", "error", "words"), [
    (lambda c, m, tp: c.commit(message=m, offsets=[tp]), ValueError, "mutually exclusive"),
    (lambda c, m, tp: c.commit(message="not a message"), TypeError, "expected confluent_kafka.cimpl.Message"),
    (lambda c, m, tp: c.commit(offsets=tp), TypeError, "requires list of TopicPartition"),
    (lambda c, m, tp: c.commit(offsets=[1]), TypeError, "expected cimpl.TopicPartition"),
    (lambda c, m, tp: c.store_offsets(), ValueError, "expected either message or offsets"),
    (lambda c, m, tp: c.store_offsets(message=None, offsets=None), ValueError, "expected either message or offsets"),
    (lambda c, m, tp: c.store_offsets(message=m, offsets=[tp]), ValueError, "mutually exclusive"),
    (lambda c, m, tp: c.store_offsets(message="not a message"), TypeError, "expected confluent_kafka.cimpl.Message"),
], ids=["commit-both", "commit-message-type", "commit-offsets-type", "commit-offsets-item", "store-neither",
        "store-none-none", "store-both", "store-message-type"])
def test_commit_and_store_offsets_argument_errors_are_confluents(kafka_module, call, error, words):
    consumer = kafka_module.Consumer(consumer_conf(**{"enable.auto.offset.store": False}))
    tp = TopicPartition("t", 0, 5)
    consumer.assign([tp])
    try:
        with pytest.raises(error, match=words):
            call(consumer, Message(topic="t", partition=0, offset=4), tp)
        consumer.store_offsets(message=Message(topic="t", partition=0, offset=-1))  # a logical offset is taken
    finally:
        consumer.close()


def test_closed_and_never_initialised_clients_raise_runtime_error(kafka_module):
    consumer = kafka_module.Consumer(consumer_conf())
    consumer.close()
    consumer.close()  # a second close is fine
    calls = ["poll", "consume", "subscribe", "unsubscribe", "commit", "assignment", "memberid", "store_offsets"]
    for name in calls:
        args = (["t"],) if name == "subscribe" else ()
        kwargs = {"offsets": [TopicPartition("t", 0, 1)]} if name == "store_offsets" else {}
        with pytest.raises(RuntimeError, match="Consumer closed"):
            getattr(consumer, name)(*args, **kwargs)

    class NeverInitialisedConsumer(kafka_module.Consumer):
        def __init__(self, config: dict) -> None:
            pass

    lazy = NeverInitialisedConsumer({})
    for name in calls:
        args = (["t"],) if name == "subscribe" else ()
        with pytest.raises(RuntimeError, match="Consumer closed"):
            getattr(lazy, name)(*args)
    lazy.close()

    class NeverInitialisedProducer(kafka_module.Producer):
        def __init__(self, config: dict) -> None:
            pass

    never = NeverInitialisedProducer({})
    for call in (lambda: never.produce("t", b"x"), never.poll, never.flush, never.purge,
                 lambda: never.produce_batch("t", [{"value": b"x"}])):
        with pytest.raises(RuntimeError, match="Producer has been closed"):
            call()


def test_a_context_manager_closes_and_lets_the_exception_through(kafka_module):
    with pytest.raises(ValueError, match="inside the block"):
        with kafka_module.Consumer(consumer_conf()) as consumer:
            raise ValueError("inside the block")
    with pytest.raises(RuntimeError, match="Consumer closed"):
        consumer.poll(0)


@pytest.mark.integration  # a real broker; its Redis URL points nowhere
def test_subscribe_while_redis_is_unreachable_reports_through_error_cb(rk_settings):
    """Ours only (confluent-kafka has no Redis): the join goes on in the background, as librdkafka's
    group join does while the coordinator is away; ``subscribe`` neither fails nor stalls."""
    from rocketkafka.kafka import Consumer
    from rocketkafka.ordering.consumers.drop_in_consumer import SUBSCRIBE_WAIT_S

    seen: list[KafkaError] = []
    consumer = Consumer(consumer_conf(**{"bootstrap.servers": rk_settings.bootstrap_servers,
                                         "rocketkafka.redis.urls": f"redis://127.0.0.1:{closed_port()}",
                                         "error_cb": seen.append}))
    started = time.monotonic()
    consumer.subscribe(["conformance-never-read"])
    assert time.monotonic() - started < SUBSCRIBE_WAIT_S + 1
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        assert consumer.poll(0.1) is None
    consumer.close()
    assert seen and seen[0].code() == KafkaError._TRANSPORT and "Redis" in seen[0].str()
