"""Ordered consumption: each partition in order, then each key in order, with the idempotent consumer.

    python examples/orderly_consumer.py
"""

import json
import os
import threading
import time

from rocketkafka import IdempotentConsumer, Message, Producer, PushConsumer, Settings, TopicAdmin

settings = Settings.load({"bootstrap.servers": os.environ["ROCKETKAFKA_BOOTSTRAP_SERVERS"]},
                         os.environ["ROCKETKAFKA_REDIS_URLS"].split(","))
with TopicAdmin(settings) as admin:
    admin.create("account-events", partitions=4)

ACCOUNTS, STEPS = ["alice", "bob", "carol", "dave", "erin"], 20
with Producer("accounts", settings=settings) as producer:
    for step in range(STEPS):
        for account in ACCOUNTS:                 # a key's messages go to one partition, in order
            body = json.dumps({"account": {"id": account}, "step": step}).encode()
            producer.send_orderly(Message("account-events", body=body, keys=[account]), sharding_key=account)


def consume(group, **mode):
    """Run a consumer until it saw every message; returns each account's steps in the order handled."""
    steps, lock, done = {}, threading.Lock(), threading.Event()

    def handle(msg):
        event = json.loads(msg.body)
        with lock:
            steps.setdefault(event["account"]["id"], []).append(event["step"])
            if sum(map(len, steps.values())) == len(ACCOUNTS) * STEPS:
                done.set()
        time.sleep(0.002)                       # a little work: keys of one partition overlap in key mode

    consumer = PushConsumer(group, settings=settings, orderly=True, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                            **mode)
    consumer.subscribe("account-events", IdempotentConsumer(consumer, handle))   # at most once per message id
    consumer.start()
    assert done.wait(60), f"{group}: only {sum(map(len, steps.values()))} messages handled"
    consumer.shutdown()
    return steps


for group, mode in (("ledger-by-partition", {}), ("ledger-by-account", {"order_key": "$.account.id"})):
    began = time.monotonic()
    steps = consume(group, **mode)
    assert all(handled == list(range(STEPS)) for handled in steps.values()), steps
    print(f"{group}: every account's {STEPS} steps in order, {time.monotonic() - began:.1f} s")
