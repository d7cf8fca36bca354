"""A test of your own application's consumer, against a real broker and real Redis nodes.

Run it with the plugin of rocketkafka[testing]:

    pytest -p rocketkafka.testing.plugin examples/testing/test_orders.py

The plugin starts an embedded broker and 3 Redis nodes for the session (or uses the cluster that
ROCKETKAFKA_BOOTSTRAP_SERVERS and ROCKETKAFKA_REDIS_URLS name), and gives each test fresh names.
"""

import threading

from rocketkafka import Message, Producer, PushConsumer
from rocketkafka.testing import History
from rocketkafka.testing.history import check


def test_each_order_is_billed_once_and_in_order(rk_settings, rk_topic, rk_group):
    topic = rk_topic(partitions=4)                     # a fresh topic, deleted after the test where it can be
    with Producer("shop", settings=rk_settings) as producer:
        sent = [producer.send_orderly(Message(topic, body=f"step {n}".encode()), sharding_key=f"order-{n % 5}").msg_id
                for n in range(50)]

    history = History()                                # what each handler call saw, and when
    all_seen = threading.Event()

    def bill(msg):
        with history.handler_call("billing", msg):
            pass                                       # the application's handler runs here
        if len({call.msg_id for call in history.calls}) == len(sent):
            all_seen.set()

    consumer = PushConsumer(rk_group, settings=rk_settings, orderly=True,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic, bill)
    consumer.start()
    try:
        assert all_seen.wait(30)
    finally:
        consumer.shutdown()

    report = check(history.calls, sent, order_by="partition", serial_by="partition")
    assert report.lost_count == 0 and report.duplicate_count == 0, report.summary()
    assert not report.reorders and not report.overlaps, report.summary()
