"""The RocketMQ-style door: a producer's four ways to send, and a consumer with a tag filter.

    rocketkafka dev up     # and export the addresses it prints
    python examples/rocketmq_door.py
"""

import os
import threading

from rocketkafka import Message, Producer, PushConsumer, SendResult, Settings, TopicAdmin

config = {"bootstrap.servers": os.environ["ROCKETKAFKA_BOOTSTRAP_SERVERS"]}
redis_urls = os.environ["ROCKETKAFKA_REDIS_URLS"].split(",")

with TopicAdmin(Settings.load(config)) as admin:
    admin.create("orders", partitions=4)          # topics are never auto-created

wanted = 4                                        # the "created" and "paid" messages below
received = []
done = threading.Event()


def handle(msg):
    """Called once per message on the consumer's threads; returning is success, raising asks for a retry."""
    received.append((msg.tags, msg.keys, msg.body.decode()))
    if len(received) == wanted:
        done.set()


consumer = PushConsumer("billing", config, redis_urls=redis_urls, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
consumer.subscribe("orders", handle, expression="created || paid")
consumer.start()

acked = threading.Event()


def on_ack(result: SendResult) -> None:
    print("async send acknowledged:", result.msg_id, "partition", result.queue_id, "offset", result.offset)
    acked.set()


with Producer("order-service", config) as producer:
    result = producer.send_sync(Message("orders", body="order 1 created", tags="created", keys=["order-1"]))
    print("sync send:", result.status.name, result.msg_id, "partition", result.queue_id, "offset", result.offset)
    producer.send_async(Message("orders", body="order 2 created", tags="created", keys=["order-2"]), on_ack)
    producer.send_oneway(Message("orders", body="order 2 shipped", tags="shipped", keys=["order-2"]))
    for step in ("paid", "paid"):
        producer.send_orderly(Message("orders", body=f"order 1 {step}", tags=step, keys=["order-1"]), "order-1")
    producer.flush()
    assert acked.wait(30), "the async send was not acknowledged"

assert done.wait(30), f"received only {received}"
consumer.shutdown()
for tags, keys, body in sorted(received):
    print(f"received {body!r} (tags {tags}, keys {keys})")
assert all(tags in ("created", "paid") for tags, _, _ in received)
