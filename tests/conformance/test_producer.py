"""confluent_kafka.Producer and rocketkafka.kafka.Producer, side by side: same records, returns, callbacks, errors."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

# containers: CI runs the differential suite again on the testcontainers backend (issue 13)
pytestmark = [pytest.mark.integration, pytest.mark.containers]

TS = 1_700_000_000_123


def test_plain_produce_writes_byte_identical_records(kafka_module, conf, rk_topic, records_of):
    topic = rk_topic(partitions=3)
    p = kafka_module.Producer(conf(**{"linger.ms": 0, "partitioner": "murmur2_random"}))
    p.produce(topic, b"v0", b"k0", partition=1, timestamp=TS)
    p.produce(topic, None, b"tomb", partition=2, timestamp=TS)  # a tombstone stays a tombstone
    p.produce(topic, b"\x00\xff", None, partition=0, timestamp=TS,
              headers=[("dup", b"1"), ("dup", b"2"), ("none", None), ("text", "caf\u00e9"), ("bin", b"\xff\xfe")])
    p.produce(topic, "text value", "text key", partition=0, timestamp=TS, headers={"h": b"x"})
    p.produce(topic, value=b"keyed", key=b"order-7", timestamp=TS)  # the partitioner places it
    assert p.flush(10) == 0
    assert records_of(topic) == [
        (0, 0, None, b"\x00\xff",
         [("dup", b"1"), ("dup", b"2"), ("none", None), ("text", "caf\u00e9".encode()), ("bin", b"\xff\xfe")], (1, TS)),
        (0, 1, b"text key", b"text value", [("h", b"x")], (1, TS)),
        (1, 0, b"k0", b"v0", None, (1, TS)),
        (1, 1, b"order-7", b"keyed", None, (1, TS)),  # murmur2("order-7") % 3 == 1
        (2, 0, b"tomb", None, None, (1, TS)),
    ]


def test_delivery_callbacks_get_the_same_reports(kafka_module, conf, rk_topic):
    topic = rk_topic(partitions=2)
    reports = []
    p = kafka_module.Producer(conf(**{"linger.ms": 0}))
    p.produce(topic, b"a", b"k", 1, lambda err, msg: reports.append(("pos", err, msg.partition(), msg.offset(), msg.value())))
    p.produce(topic, b"b", partition=0, on_delivery=lambda err, msg: reports.append(("kw", err, msg.partition(), msg.offset(),
                                                                                       msg.value())))
    p.produce(topic, b"c", partition=0, callback=lambda err, msg: reports.append(("alias", err, msg.partition(),
                                                                                    msg.offset(), msg.value())))
    assert p.flush(10) == 0
    assert sorted(reports, key=str) == sorted([("pos", None, 1, 0, b"a"), ("kw", None, 0, 0, b"b"), ("alias", None, 0, 1, b"c")],
                                              key=str)
    assert len(p) == 0 and p.poll(0) == 0


def test_purge_fails_queued_records_with_purge_errors(kafka_module, conf, rk_topic):
    topic = rk_topic(partitions=1)
    errors = []
    p = kafka_module.Producer(conf(**{"linger.ms": 60_000}))
    for i in range(3):
        p.produce(topic, b"x", on_delivery=lambda err, msg: errors.append(err.code() if err else None))
    assert len(p) == 3
    p.purge(in_queue=True, in_flight=True, blocking=True)
    assert p.flush(5) == 0 and len(p) == 0
    assert len(errors) == 3 and set(errors) <= {KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT}


def test_full_queue_raises_buffer_error_and_too_large_raises_kafka_exception(kafka_module, conf, rk_topic):
    topic = rk_topic(partitions=1)
    p = kafka_module.Producer(conf(**{"linger.ms": 60_000, "queue.buffering.max.messages": 1, "message.max.bytes": 1000}))
    p.produce(topic, b"x")
    with pytest.raises(BufferError):
        p.produce(topic, b"y")
    p.purge()
    with pytest.raises(KafkaException) as info:
        p.produce(topic, b"z" * 5000)
    assert info.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    with pytest.raises(TypeError):
        p.produce(topic, 12345)
    p.flush(1)


def test_context_manager_list_topics_and_transactions(kafka_module, conf, rk_topic, records_of):
    topic = rk_topic(partitions=1)
    with kafka_module.Producer(conf(**{"transactional.id": f"tx-{topic}", "linger.ms": 0})) as p:
        assert topic in p.list_topics(timeout=10).topics
        with pytest.raises(KafkaException) as info:
            p.begin_transaction()  # before init_transactions
        assert info.value.args[0].code() == KafkaError._STATE
        p.init_transactions(10)
        p.begin_transaction()
        p.produce(topic, b"in-tx", timestamp=TS)
        p.commit_transaction(10)
        p.begin_transaction()
        p.produce(topic, b"aborted", timestamp=TS)
        p.abort_transaction(10)
    assert [r[3] for r in records_of(topic)][:1] == [b"in-tx"]


def test_a_plain_call_is_a_kafka_client(kafka_module, conf):
    import confluent_kafka

    p = kafka_module.Producer(conf())
    assert isinstance(p, confluent_kafka.Producer)
    assert {"abort_transaction", "begin_transaction", "close", "commit_transaction", "flush", "init_transactions",
            "list_topics", "poll", "produce", "produce_batch", "purge", "send_offsets_to_transaction",
            "set_sasl_credentials"} <= set(dir(p))
