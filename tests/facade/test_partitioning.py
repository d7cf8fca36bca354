"""One partitioning rule for every keyed send of both doors, pinned against librdkafka's own partitioners:
murmur2_random by default (the Java client's), or the configured ``partitioner``."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer as RawProducer

from rocketkafka import Message, Producer
from rocketkafka.kafka import Producer as DropInProducer
from rocketkafka.partitioning import DEFAULT_PARTITIONER, key_partition

pytestmark = pytest.mark.integration

KEYS = [f"order-{i}" for i in range(60)]
PARTITIONS = 8


def _placed(producer, topic, produce_kwargs) -> dict[str, int]:
    placed: dict[str, int] = {}
    for key in KEYS:
        producer.produce(topic, b"x", on_delivery=lambda e, m, k=key: placed.__setitem__(k, m.partition()),
                         **produce_kwargs(key))
    assert producer.flush(10) == 0
    return placed


@pytest.mark.parametrize("partitioner", [None, "consistent_random", "fnv1a_random"])
def test_every_keyed_path_follows_librdkafkas_partitioner(rk_settings, rk_topic, partitioner):
    topic = rk_topic(partitions=PARTITIONS)
    chosen = partitioner or DEFAULT_PARTITIONER
    extra = {"partitioner": partitioner} if partitioner else {}
    # the oracle: librdkafka itself, configured with the rule
    raw = RawProducer({"bootstrap.servers": rk_settings.bootstrap_servers, "partitioner": chosen})
    oracle = _placed(raw, topic, lambda k: {"key": k.encode()})
    assert len(set(oracle.values())) > 4
    assert {k: key_partition(k.encode(), PARTITIONS, chosen) for k in KEYS} == oracle

    drop_in = DropInProducer({"bootstrap.servers": rk_settings.bootstrap_servers, **extra})
    assert _placed(drop_in, topic, lambda k: {"key": k.encode()}) == oracle
    assert _placed(drop_in, topic, lambda k: {"keys": [k], "tags": "T"}) == oracle  # the extras path

    with Producer("pg", {"bootstrap.servers": rk_settings.bootstrap_servers, **extra},
                  redis_urls=rk_settings.redis_urls) as producer:
        by_keys = {k: producer.send_sync(Message(topic, body=b"s", keys=[k, "other"])).queue_id for k in KEYS}
        orderly = {k: producer.send_orderly(Message(topic, body=b"o"), k).queue_id for k in KEYS}
    assert by_keys == oracle
    assert orderly == oracle


def test_the_rocketmq_door_refuses_a_partitioner_that_cannot_keep_keys_in_place(rk_settings):
    from rocketkafka import ConfigError

    with pytest.raises(ConfigError, match="partitioner"):
        Producer("pg", {"bootstrap.servers": rk_settings.bootstrap_servers, "partitioner": "random"}).start()
