"""Delayed messages: a delay level, any delay, and a time, delivered by a delay forwarder when due.

A deployment runs the forwarder as a sidecar (`rocketkafka delay-forwarder`, see sidecars.py);
here it runs in this process.

    python examples/delayed_messages.py
"""

import os
import threading
import time
from datetime import datetime, timedelta, timezone

from rocketkafka import Message, Producer, PushConsumer, Settings, TopicAdmin
from rocketkafka.delay import DelayForwarder

settings = Settings.load({"bootstrap.servers": os.environ["ROCKETKAFKA_BOOTSTRAP_SERVERS"]},
                         os.environ["ROCKETKAFKA_REDIS_URLS"].split(","))
with TopicAdmin(settings) as admin:
    admin.create("reminders", partitions=2)

sent, arrived = {}, {}
all_arrived = threading.Event()


def arrive(msg):
    arrived[msg.id] = time.time() * 1000 - int(msg.get_property("DELIVER_AT"))  # ms after it was due
    if len(arrived) == 3:
        all_arrived.set()


with DelayForwarder(settings) as forwarder:       # started; closed (finish, commit, release) at the end
    consumer = PushConsumer("reminder-service", settings=settings, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe("reminders", arrive)
    consumer.start()
    with Producer("scheduler", settings=settings) as producer:
        due = datetime.now(timezone.utc) + timedelta(seconds=2)
        for label, msg in [("delay level 1 (1 s)", Message("reminders", body=b"a", delay_time_level=1)),
                           ("delay=1.5 s", Message("reminders", body=b"b", delay=timedelta(seconds=1.5))),
                           (f"deliver_at={due:%H:%M:%S}", Message("reminders", body=b"c", deliver_at=due))]:
            sent[producer.send_sync(msg).msg_id] = label
    assert all_arrived.wait(30), f"{len(arrived)} of 3 arrived"
    consumer.shutdown()

for msg_id, label in sent.items():
    late = arrived[msg_id]
    print(f"{label}: arrived {late:.0f} ms after it was due")
    assert late >= 0, "delivered early"
