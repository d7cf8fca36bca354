"""Exactly once, consume -> produce: what the listener sends and the consumed offset commit in one Kafka transaction.

Needs a broker whose read_committed readers skip aborted records (Apache Kafka:
`rocketkafka dev up --broker kafka`); on Tansu `start()` refuses with one line, and this script
prints it and exits with status 1.

    python examples/exactly_once.py
"""

import os
import sys
import threading

from rocketkafka import ConfigError, Message, Producer, PushConsumer, Settings, TopicAdmin

settings = Settings.load({"bootstrap.servers": os.environ["ROCKETKAFKA_BOOTSTRAP_SERVERS"]},
                         os.environ["ROCKETKAFKA_REDIS_URLS"].split(","))
with TopicAdmin(settings) as admin:
    admin.create_many({"charges": 4, "invoices": 4})

consumer = PushConsumer("invoicer", settings=settings, orderly=True, exactly_once=True,
                        consume_from_where="CONSUME_FROM_FIRST_OFFSET")


def invoice(msg):
    """Sent in the transaction of the charge it answers: both commit, or neither (returns None: success)."""
    consumer.producer.send(Message("invoices", body=b"invoice for " + msg.body, keys=msg.keys), sharding_key=msg.keys)


consumer.subscribe("charges", invoice)
try:
    consumer.start()
except ConfigError as refused:
    sys.exit(f"refused: {refused}")

invoices, all_in = [], threading.Event()


def read(msg):
    invoices.append(msg.body)
    if len(invoices) == 100:
        all_in.set()


reader = PushConsumer("invoice-reader", {"isolation.level": "read_committed"}, settings=settings,
                      consume_from_where="CONSUME_FROM_FIRST_OFFSET")
reader.subscribe("invoices", read)
reader.start()
with Producer("checkout", settings=settings) as producer:
    for n in range(100):
        producer.send_orderly(Message("charges", body=f"charge {n}".encode(), keys=[f"customer-{n % 7}"]),
                              sharding_key=f"customer-{n % 7}")
assert all_in.wait(60), f"{len(invoices)} of 100 invoices"
consumer.shutdown()
reader.shutdown()
assert len(set(invoices)) == len(invoices) == 100, "an invoice is missing or was written twice"
print("100 charges, 100 invoices, each once")
