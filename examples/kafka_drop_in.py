"""The confluent-kafka drop-in: the same config dict and calls, plus tags, keys and the lock table.

    python examples/kafka_drop_in.py
"""

import os

from rocketkafka import Settings, TopicAdmin
from rocketkafka.kafka import Consumer, Producer      # instead of: from confluent_kafka import Consumer, Producer

config = {"bootstrap.servers": os.environ["ROCKETKAFKA_BOOTSTRAP_SERVERS"]}
with TopicAdmin(Settings.load(config)) as admin:
    admin.create("page-views", partitions=4)

delivered = []
producer = Producer(config)
for n in range(10):
    tag = "mobile" if n % 2 else "desktop"
    producer.produce("page-views", f"view {n}".encode(), key=f"user-{n % 3}".encode(), tags=tag, keys=f"user-{n % 3}",
                     on_delivery=lambda err, msg: delivered.append(err is None))
producer.flush()
assert delivered == [True] * 10

consumer = Consumer({**config, "group.id": "mobile-stats", "auto.offset.reset": "earliest",
                     "rocketkafka.redis.urls": os.environ["ROCKETKAFKA_REDIS_URLS"]})  # the lock table
consumer.subscribe(["page-views"], tags="mobile")     # desktop views are consumed but never returned
views = []
while len(views) < 5:
    msg = consumer.poll(15.0)
    assert msg is not None, f"only {len(views)} views arrived"
    if msg.error():
        print("error event:", msg.error())
        continue
    views.append(msg.value().decode())
consumer.commit(asynchronous=False)
print("this member owns", sorted(p.partition for p in consumer.assignment()), "and read", sorted(views))
consumer.close()
