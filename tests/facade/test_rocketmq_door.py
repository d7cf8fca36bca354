"""The RocketMQ door is rocketmq-client-python, observably: code written against its documented
API runs with only the import changed (the broker named by ``set_name_server_address``, Redis
and prefixes from the ``ROCKETKAFKA_*`` environment)."""

from __future__ import annotations

import textwrap
import time

import pytest

from rocketkafka import Producer, SendResult, TransactionMQProducer, TransactionStatus
from rocketkafka.message import MessageExt
from rocketkafka.testing.reading import read_all

pytestmark = pytest.mark.integration

# Written against rocketmq-client-python's README and samples (consumer.py, producer.py,
# transaction producer); only this import line is changed by the test.
UPSTREAM_IMPORT = "from rocketmq.client import Producer, PushConsumer, Message, ConsumeStatus, " \
                  "TransactionMQProducer, TransactionStatus, SendStatus"

CONSUMER_EXAMPLE = textwrap.dedent('''
    {import_line}

    received = []

    def callback(msg):
        received.append((msg.id, msg.topic, msg.tags, msg.keys, msg.body, msg['region'],
                         msg.get_property('region'), msg.queue_id, msg.queue_offset))
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(GROUP)
    consumer.set_name_server_address(NAMESRV)
    consumer.set_thread_count(2)
    consumer.set_message_batch_max_size(16)
    consumer.subscribe(TOPIC, callback)
    consumer.start()
''')

PRODUCER_EXAMPLE = textwrap.dedent('''
    {import_line}

    producer = Producer(PRODUCER_GROUP)
    producer.set_name_server_address(NAMESRV)
    producer.start()

    msg = Message(TOPIC)
    msg.set_keys('XXX')
    msg.set_tags('TagA')
    msg.set_property('region', 'eu')
    msg.set_body('XXXX')
    ret = producer.send_sync(msg)
    assert ret.status == SendStatus.OK
    status, msg_id, offset = ret
    sync_result = (status, msg_id, offset)

    msg = Message(TOPIC)
    msg.set_keys('order-1')
    msg.set_body('orderly')
    orderly_result = producer.send_orderly_with_sharding_key(msg, 'order-1')

    producer.shutdown()

    def check_callback(msg):
        return TransactionStatus.COMMIT

    def local_execute(msg, user_args):
        return TransactionStatus.COMMIT

    tx_producer = TransactionMQProducer(TX_GROUP, check_callback)
    tx_producer.set_name_server_address(NAMESRV)
    tx_producer.start()
    msg = Message(TOPIC)
    msg.set_body('in transaction')
    tx_result = tx_producer.send_message_in_transaction(msg, local_execute, None)
    msg = Message(TOPIC)
    msg.set_body('plain, from the transaction producer')
    tx_plain = tx_producer.send_sync(msg)
    tx_producer.shutdown()
''')


def _run(example: str, scope: dict) -> dict:
    code = example.format(import_line=UPSTREAM_IMPORT)
    assert code.count("from rocketmq.client import") == 1
    exec(compile(code.replace("from rocketmq.client import", "from rocketkafka import"), "<example>", "exec"), scope)
    return scope


def test_upstream_example_runs_with_only_the_import_changed(rk_settings, rk_topic, rk_group, monkeypatch):
    for name, value in rk_settings.environment().items():
        if name != "ROCKETKAFKA_BOOTSTRAP_SERVERS":
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("ROCKETKAFKA_BOOTSTRAP_SERVERS", raising=False)
    topic = rk_topic(partitions=2)
    scope = {"NAMESRV": rk_settings.bootstrap_servers, "TOPIC": topic, "GROUP": rk_group,
             "PRODUCER_GROUP": "PID-" + rk_group, "TX_GROUP": "TX-" + rk_group}
    _run(CONSUMER_EXAMPLE, scope)
    consumer = scope["consumer"]
    try:
        deadline = time.monotonic() + 30
        while len([tp for tp in consumer._engine.owned() if tp[0] == topic]) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # the example consumer starts at the end of the topic (RocketMQ's default)
        _run(PRODUCER_EXAMPLE, scope)
        deadline = time.monotonic() + 30
        while len(scope["received"]) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        consumer.shutdown()
    received = sorted(scope["received"], key=lambda r: r[4])
    bodies = [r[4] for r in received]
    assert bodies == [b"XXXX", b"in transaction", b"orderly", b"plain, from the transaction producer"]
    sync = received[0]
    assert sync[0] == scope["sync_result"][1]
    assert sync[1:7] == (topic, "TagA", "XXX", b"XXXX", "eu", "eu")
    assert sync[8] == scope["sync_result"][2]
    assert scope["orderly_result"].status.name == "OK"
    assert scope["tx_result"].msg_id == received[1][0]
    assert scope["tx_plain"].msg_id == received[3][0]


def test_sharding_key_is_the_orderly_send(rk_settings, rk_topic):
    topic = rk_topic(partitions=8)
    with Producer("pg", settings=rk_settings) as producer:
        for i in range(20):
            a = producer.send_orderly_with_sharding_key(__import__("rocketkafka").Message(topic, body=b"a"), f"k{i}")
            b = producer.send_orderly(__import__("rocketkafka").Message(topic, body=b"b"), f"k{i}")
            assert a.queue_id == b.queue_id


def test_transaction_producer_is_a_producer_and_sends_plain_messages(rk_settings, rk_topic, rk_group):
    topic = rk_topic(partitions=2)
    from rocketkafka import Message
    producer = TransactionMQProducer(rk_group, lambda msg: TransactionStatus.COMMIT, settings=rk_settings)
    assert isinstance(producer, Producer)
    with producer:
        result = producer.send_sync(Message(topic, body=b"plain", tags="T"))
        producer.send_oneway(Message(topic, body=b"oneway"))
        producer.flush()
    assert isinstance(result, SendResult)
    status, msg_id, offset = result
    records = {r.value(): r for r in read_all(rk_settings.bootstrap_servers, topic)}
    assert set(records) == {b"plain", b"oneway"}
    got = MessageExt.of(records[b"plain"]).decode()
    assert (got.id, got.tags, records[b"plain"].offset()) == (msg_id, "T", offset)
    assert got["TAGS"] == "T" and got["no-such"] is None
