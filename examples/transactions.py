"""Transactional messages: committed, rolled back, and one left UNKNOWN that the checker asks back.

A deployment runs the checker as a sidecar (`rocketkafka txn-checker`, see sidecars.py); here it
runs in this process, with short timings so the check-back comes within seconds.

    python examples/transactions.py
"""

import os
import threading
from collections import Counter

from rocketkafka import Message, PushConsumer, Settings, TopicAdmin, TransactionMQProducer, TransactionStatus
from rocketkafka.txn import CheckerOptions, TransactionChecker

settings = Settings.load({"bootstrap.servers": os.environ["ROCKETKAFKA_BOOTSTRAP_SERVERS"]},
                         os.environ["ROCKETKAFKA_REDIS_URLS"].split(","))
with TopicAdmin(settings) as admin:
    admin.create("payments", partitions=2)

store = {}                                        # the application's own record of each transaction


class PaymentListener:
    """RocketMQ's TransactionListener: the local transaction, and the answer to a check-back."""

    def execute_local_transaction(self, msg, order):      # msg.id is the transaction id
        if order == "order-2":
            store[msg.id] = TransactionStatus.ROLLBACK       # the payment was declined
            return TransactionStatus.ROLLBACK
        store[msg.id] = TransactionStatus.COMMIT             # the payment went through...
        return TransactionStatus.COMMIT if order == "order-1" else TransactionStatus.UNKNOWN  # ...order-3's answer is lost

    def check_local_transaction(self, msg):
        print("check-back for", msg.transaction_id)
        return store.get(msg.transaction_id, TransactionStatus.UNKNOWN)


seen, two = Counter(), threading.Event()


def arrive(msg):
    seen[msg.body] += 1
    if seen[b"order-1"] and seen[b"order-3"]:
        two.set()


checker = TransactionChecker(settings, CheckerOptions(transaction_timeout_ms=1000, check_interval_ms=300)).start()
consumer = PushConsumer("ledger", settings=settings, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
consumer.subscribe("payments", arrive)
consumer.start()
with TransactionMQProducer("payment-service", PaymentListener(), settings=settings) as producer:
    for order in ("order-1", "order-2", "order-3"):
        result = producer.send_message_in_transaction(Message("payments", body=order), user_args=order)
        print(order, "->", result.local_state.name, result.transaction_id)
    assert two.wait(30), f"seen {dict(seen)}"
consumer.shutdown()
checker.stop()
print("delivered:", dict(seen))
assert seen == Counter({b"order-1": 1, b"order-3": 1})   # the rolled-back order-2 never arrives
