"""The demo's transaction step: one transaction committed, one rolled back, one left UNKNOWN.

The UNKNOWN one stays a half message until the transaction checker the demo started finds it
older than the transaction timeout and asks the producer group back; the check callback answers
COMMIT (the local transaction had finished after all). A consumer of the real topic must then see
the committed and the checked-back message once each, and the rolled-back one never.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

from rocketkafka.message import Message
from rocketkafka.ordering.engine.options import ConsumerOptions
from rocketkafka.ordering.consumers.push_consumer import PushConsumer
from rocketkafka.testing.waiting import wait_for
from rocketkafka.tools.demo_stage import FAST, Stage
from rocketkafka.txn import TransactionMQProducer, TransactionOptions, TransactionStatus

#: Each payment's local transaction: what it returns at once, and what the local store says when asked back
#: (the third one finished after the producer had to answer: UNKNOWN then, committed by the check-back).
PAYMENTS = {b"pay order 1": (TransactionStatus.COMMIT, TransactionStatus.COMMIT),
            b"pay order 2": (TransactionStatus.ROLLBACK, TransactionStatus.ROLLBACK),
            b"pay order 3": (TransactionStatus.UNKNOWN, TransactionStatus.COMMIT)}


def transactions(stage: Stage, checker_timeout_ms: int) -> None:
    report = stage.report
    topic = stage.topic("demo-payments", 2)
    seen: Counter[bytes] = Counter()
    store: dict[str, TransactionStatus] = {}  # the local store: transaction id -> its outcome by now
    asked: dict[str, float] = {}  # transaction id -> when the first check-back came
    lock = threading.Lock()

    def check_back(msg) -> TransactionStatus:
        with lock:
            asked.setdefault(msg.transaction_id, time.monotonic())
            return store.get(msg.transaction_id, TransactionStatus.UNKNOWN)  # not yet recorded: ask again later

    def arrive(msg) -> None:
        with lock:
            seen[msg.body] += 1

    consumer = PushConsumer(stage.name("demo-payments"), settings=stage.settings, **FAST)
    consumer.subscribe(topic, arrive)
    consumer.start()
    options = TransactionOptions(check=ConsumerOptions(**FAST), half_partitions=4)
    producer = TransactionMQProducer(stage.name("demo-tx"), check_back, settings=stage.settings, options=options)
    producer.start()
    try:
        sent_at = time.monotonic()
        names: dict[str, str] = {}
        for body, (now, later) in PAYMENTS.items():
            result = producer.send_message_in_transaction(Message(topic, body=body), lambda m, state: state, now)
            with lock:
                store[result.transaction_id] = later
            names[result.transaction_id] = body.decode()
            report.note(f"{body.decode()!r}: local transaction {result.local_state.name} "
                        f"(transaction {result.transaction_id})")
        wait_for(lambda: seen[b"pay order 1"] and seen[b"pay order 3"], 20, 0.01)
        time.sleep(0.3)  # a second copy, or the rolled-back message, would show up here
    finally:
        producer.shutdown()
        consumer.shutdown()
    report.check("commit and rollback", seen[b"pay order 1"] == 1 and seen[b"pay order 2"] == 0,
                 f"the committed payment arrived {seen[b'pay order 1']} time(s), "
                 f"the rolled-back one {seen[b'pay order 2']} times")
    unknown = next(t for t, name in names.items() if name == "pay order 3")
    others = [names[t] for t in asked if t != unknown]  # ended at once, but their end not yet read: asked too
    when = f"{asked[unknown] - sent_at:.1f} s after it was sent" if unknown in asked else "never"
    report.check("check-back", unknown in asked and seen[b"pay order 3"] == 1,
                 f"the checker asked back the UNKNOWN transaction {when} (timeout {checker_timeout_ms / 1000:g} s), "
                 f"the store answered COMMIT, it arrived {seen[b'pay order 3']} time(s)"
                 + (f"; also asked, and answered from the store: {others}" if others else ""))
