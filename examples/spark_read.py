"""Spark over rocketkafka topics: RocketMQ columns and a tag filter (the audits: `rocketkafka spark audit-order`).

Needs rocketkafka[spark] (PySpark 4.2 and Java 17); Spark's own Kafka source is used where its
connector loads (`rocketkafka spark connector` fetches it once), else the project's Python source.

    python examples/spark_read.py
"""

import os

from rocketkafka import Message, Producer, Settings, TopicAdmin
from rocketkafka.spark import dedup_by_msg_id, filter_tags, read_messages, rocketmq_view, spark_session

bootstrap = os.environ["ROCKETKAFKA_BOOTSTRAP_SERVERS"]
settings = Settings.load({"bootstrap.servers": bootstrap})
with TopicAdmin(settings) as admin:
    admin.create("order-steps", partitions=4)
with Producer("shop", settings=settings) as producer:
    for step in ("created", "paid", "shipped"):
        for order in range(10):
            producer.send_orderly(Message("order-steps", body=f"order {order} {step}", tags=step,
                                          keys=[f"order-{order}"]), sharding_key=f"order-{order}")

spark = spark_session(app_name="rocketkafka-example")
view = rocketmq_view(read_messages(spark, {"kafka.bootstrap.servers": bootstrap, "subscribe": "order-steps"},
                                   includeHeaders=True))
counts = {row["tags"]: row["count"] for row in
          dedup_by_msg_id(filter_tags(view, "paid || shipped")).groupBy("tags").count().collect()}
print(counts)
assert counts == {"paid": 10, "shipped": 10}
spark.stop()
