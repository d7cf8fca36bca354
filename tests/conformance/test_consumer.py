"""confluent_kafka.Consumer and rocketkafka.kafka.Consumer, side by side on the same broker."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

# containers: CI runs the differential suite again on the testcontainers backend (issue 13)
pytestmark = [pytest.mark.integration, pytest.mark.containers]


def _values(msgs):
    return sorted(m.value() for m in msgs if m.error() is None)


def _tps(tps):
    return sorted((tp.topic, tp.partition, tp.offset) for tp in tps)


# -- assign mode: plain Kafka, no group management --------------------------------------------------
def test_assign_poll_seek_pause_position_and_eof_events(kafka_module, conf, group, filled, drain_fn):
    topic = filled(partitions=2, n=5)
    c = kafka_module.Consumer(conf(**{"group.id": group, "enable.partition.eof": True, "enable.auto.commit": False}))
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING), TopicPartition(topic, 1, 3)])
    assert _tps(c.assignment()) == [(topic, 0, OFFSET_BEGINNING), (topic, 1, 3)]
    got = drain_fn(c, 9, eof=True)
    assert _values(got) == [b"0-0", b"0-1", b"0-2", b"0-3", b"0-4", b"1-3", b"1-4"]
    eofs = sorted((m.partition(), m.offset()) for m in got if m.error() is not None)
    assert eofs == [(0, 5), (1, 5)] and all(m.error().code() == KafkaError._PARTITION_EOF for m in got if m.error())
    assert _tps(c.position([TopicPartition(topic, 0), TopicPartition(topic, 1)])) == [(topic, 0, 5), (topic, 1, 5)]
    assert c.get_watermark_offsets(TopicPartition(topic, 0), cached=True) == (0, 5)
    c.seek(TopicPartition(topic, 0, 2))
    c.pause([TopicPartition(topic, 0)])
    assert [m for m in (c.poll(0.5), c.poll(0.5)) if m is not None and m.error() is None] == []
    c.resume([TopicPartition(topic, 0)])
    again = drain_fn(c, 3)
    assert [m.value() for m in again] == [b"0-2", b"0-3", b"0-4"] and [m.key() for m in again] == [b"k2", b"k3", b"k4"]
    assert again[0].timestamp() == (1, 1_700_000_000_002) and again[0].headers() is None
    c.incremental_unassign([TopicPartition(topic, 1)])
    assert _tps(c.assignment()) == [(topic, 0, OFFSET_BEGINNING)]
    c.unassign()
    assert c.assignment() == []
    c.close()


def test_commit_returns_and_raises_as_confluent(kafka_module, conf, group, filled, drain_fn):
    topic = filled(partitions=1, n=4)
    commits = []
    c = kafka_module.Consumer(conf(**{"group.id": group, "enable.auto.commit": False,
                                      "on_commit": lambda err, tps: commits.append((err, _tps(tps)))}))
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    with pytest.raises(KafkaException) as info:
        c.commit(asynchronous=False)  # nothing consumed: nothing stored
    assert info.value.args[0].code() == KafkaError._NO_OFFSET
    msgs = drain_fn(c, 4)
    result = c.commit(message=msgs[1], asynchronous=False)
    assert _tps(result) == [(topic, 0, 2)] and result[0].error is None
    assert _tps(c.committed([TopicPartition(topic, 0)], timeout=10)) == [(topic, 0, 2)]
    assert _tps(c.commit(asynchronous=False)) == [(topic, 0, 4)]  # the stored offsets: everything returned
    c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=True)
    c.poll(1.0)
    assert _tps(c.committed([TopicPartition(topic, 0)], timeout=10)) == [(topic, 0, 3)]
    assert commits == [(None, [(topic, 0, 3)])]  # the application's on_commit: asynchronous commits only
    c.close()
    with pytest.raises(RuntimeError):
        c.poll(0)


def test_store_offsets_decide_what_commit_commits(kafka_module, conf, group, filled, drain_fn):
    topic = filled(partitions=1, n=4)
    with kafka_module.Consumer(conf(**{"group.id": group, "enable.auto.commit": False,
                                       "enable.auto.offset.store": False})) as c:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        msgs = drain_fn(c, 4)
        c.store_offsets(message=msgs[0])
        assert _tps(c.commit(asynchronous=False)) == [(topic, 0, 1)]
        c.store_offsets(offsets=[TopicPartition(topic, 0, 3)])
        assert _tps(c.commit(asynchronous=False)) == [(topic, 0, 3)]
        assert c.list_topics(timeout=10).topics[topic].partitions.keys() == {0}
        assert c.memberid() is None  # no group membership in assign mode
        assert c.consumer_group_metadata() is not None


def test_auto_commit_of_an_assignment_commits_on_close(kafka_module, conf, group, filled, drain_fn, rk_settings):
    topic = filled(partitions=1, n=3)
    c = kafka_module.Consumer(conf(**{"group.id": group}))  # enable.auto.commit defaults to true
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    assert len(drain_fn(c, 3)) == 3
    c.close()
    from rocketkafka.testing.reading import committed_offsets

    assert committed_offsets(rk_settings.bootstrap_servers, group, topic, 1) == {0: 3}


# -- subscribe mode: the group decides (Kafka's coordinator / rocketkafka's lock table) ----------------
def test_subscribe_with_callbacks_reads_everything_and_commits(kafka_module, conf, group, filled, drain_fn, rk_settings):
    topic = filled(partitions=2, n=3)
    assigned, revoked, commits = [], [], []
    c = kafka_module.Consumer(conf(**{"group.id": group, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                                      "enable.partition.eof": True, "enable.auto.commit": False,
                                      "on_commit": lambda err, tps: commits.append(err)}))
    c.subscribe([topic], on_assign=lambda cons, tps: assigned.extend(_tps(tps)),
                on_revoke=lambda cons, tps: revoked.extend(_tps(tps)))
    got = drain_fn(c, 8, eof=True)
    assert _values(got) == [b"0-0", b"0-1", b"0-2", b"1-0", b"1-1", b"1-2"]
    assert sorted((m.partition(), m.offset()) for m in got if m.error()) == [(0, 3), (1, 3)]  # EOF events reach poll()
    assert assigned == [(topic, 0, -1001), (topic, 1, -1001)]
    assert _tps(c.assignment()) == [(topic, 0, -1000), (topic, 1, -1000)]
    c.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=True)
    c.poll(1.0)
    assert commits == [None]  # the application's on_commit sees the asynchronous commit's result
    assert _tps(c.commit(asynchronous=False)) == [(topic, 0, 3), (topic, 1, 3)]
    c.close()
    assert revoked == [(topic, 0, -1001), (topic, 1, -1001)]
    from rocketkafka.testing.reading import committed_offsets

    assert committed_offsets(rk_settings.bootstrap_servers, group, topic, 2) == {0: 3, 1: 3}


def test_regex_subscription_matches_topics_by_pattern(kafka_module, conf, group, filled, drain_fn):
    a, b = filled(partitions=1, n=2), filled(partitions=1, n=2)
    stem = a.rsplit("-", 1)[0]
    assert b.startswith(stem)
    c = kafka_module.Consumer(conf(**{"group.id": group, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                                      "topic.metadata.refresh.interval.ms": 1000}))
    c.subscribe([f"^{stem}-.*"])
    got = drain_fn(c, 4)
    assert sorted((m.topic(), m.value()) for m in got) == sorted([(a, b"0-0"), (a, b"0-1"), (b, b"0-0"), (b, b"0-1")])
    c.unsubscribe()
    c.close()


def test_a_new_group_starts_at_the_end_by_default(kafka_module, conf, group, rk_backend, rk_settings, rk_topic,
                                                  drain_fn):
    """librdkafka's ``auto.offset.reset`` default (latest): what was there before the group is not read.

    Where ListOffsets "latest" is exact (Apache Kafka) the old records go in one batch; on Tansu one
    record per batch, the only case its "latest" gets right (DESIGN §4)."""
    from confluent_kafka import Producer

    from rocketkafka.testing.capabilities import Capability

    topic = rk_topic(partitions=1)
    one_batch = rk_backend.missing(Capability.EXACT_LATEST_OFFSET) is None
    p = Producer({"bootstrap.servers": rk_settings.bootstrap_servers, "linger.ms": 50 if one_batch else 0})
    for i in range(3):
        p.produce(topic, f"old-{i}".encode())
        if not one_batch:
            assert p.flush(10) == 0
    assert p.flush(10) == 0
    c = kafka_module.Consumer(conf(**{"group.id": group, "session.timeout.ms": 6000}))
    c.subscribe([topic])
    deadline = time.monotonic() + 30
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    settle = time.monotonic() + 2  # let the reset to the end resolve before the next record is written
    while time.monotonic() < settle:
        assert c.poll(0.2) is None
    p.produce(topic, b"new")
    assert p.flush(10) == 0
    got = drain_fn(c, 1, timeout=15)
    assert [m.value() for m in got] == [b"new"]
    c.close()
