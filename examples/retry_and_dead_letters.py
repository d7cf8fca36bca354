"""Retries with back-off, the dead-letter topic, and sending a dead letter back once the bug is fixed.

Retries of a concurrent consumer wait in the delay levels (RocketMQ's back-off: retry n waits level
3 + n - 1), so they need a delay forwarder; this script runs one in-process, with short levels.

    python examples/retry_and_dead_letters.py
"""

import os
import threading
import time

from rocketkafka import DelayConfig, Message, Producer, PushConsumer, Settings, TopicAdmin
from rocketkafka.delay import DelayForwarder
from rocketkafka.operations import dead_letters, resend_dead_letters

settings = Settings.load({"bootstrap.servers": os.environ["ROCKETKAFKA_BOOTSTRAP_SERVERS"]},
                         os.environ["ROCKETKAFKA_REDIS_URLS"].split(","),
                         delay=DelayConfig(levels="100ms 200ms 500ms 1s 2s"))   # retry 1 waits 500 ms, retry 2 1 s
with TopicAdmin(settings) as admin:
    admin.create("invoices", partitions=2)

tries, fixed, handled = [], threading.Event(), threading.Event()


def handle(msg):
    tries.append((msg.reconsume_times, round(time.monotonic(), 1)))
    if not fixed.is_set():
        raise ValueError("cannot parse invoice")   # a failure: retried later, then dead-lettered
    handled.set()


with DelayForwarder(settings):
    consumer = PushConsumer("invoicing", settings=settings, max_reconsume_times=2,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe("invoices", handle)
    consumer.start()
    with Producer("billing", settings=settings) as producer:
        producer.send_sync(Message("invoices", body=b"invoice 17", keys=["invoice-17"]))

    deadline = time.monotonic() + 30
    while not dead_letters(settings, "invoicing") and time.monotonic() < deadline:
        time.sleep(0.2)
    letters = dead_letters(settings, "invoicing")
    assert len(letters) == 1, f"dead letters: {letters}"
    print("tries (reconsume times):", [times for times, _ in tries])
    print("dead letter:", letters[0].location, letters[0].msg_id, "-", letters[0].reason)

    fixed.set()                                    # the handler is mended: send the dead letter back
    for resent in resend_dead_letters(settings, "invoicing", everything=True):
        print("re-sent", resent.location, "to", f"{resent.topic}[{resent.partition}]@{resent.offset}")
    assert handled.wait(30), "the re-sent message was not handled"
    consumer.shutdown()
print("handled after the fix, at try", tries[-1][0] + 1)
