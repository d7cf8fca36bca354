"""Probes of optional broker features: each tries the feature once on a throw-away topic.

Tansu and Apache Kafka differ exactly here (DESIGN §4): Tansu answers ListOffsets "latest"
with the last batch's first offset + 1, ``offsets_for_times`` by batch write time, refuses
DeleteRecords and CreatePartitions, and does not hide aborted records from read_committed
readers. A test that relies on one of these declares it (``rk_needs("offsets-by-time")``)
and a backend probes it once; the answer is ``None`` (the broker has it) or why not.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from rocketkafka.config import DEFAULT_FETCH_WAIT_MS, SHORT_FETCH_WAIT_MS, Settings
from rocketkafka.exactly_once import aborted_records_hidden
from rocketkafka.testing.capabilities import Capability, MissingCapability, add_partitions

log = logging.getLogger(__name__)


@contextmanager
def _probe_topic(settings: Settings, what: str) -> Iterator[str]:
    admin = AdminClient(settings.kafka_config())
    topic = f"rk-probe-{what}-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, -1)])[topic].result(10)
    try:
        yield topic
    finally:
        try:
            admin.delete_topics([topic])[topic].result(10)
        except Exception:  # a probe topic left behind is harmless
            log.debug("could not delete probe topic %s", topic, exc_info=True)
        del admin  # let the client go here, not in a later garbage collection (TopicAdmin.close says why)


def _produce(settings: Settings, topic: str, batches: list[list[int]], extra: dict | None = None) -> None:
    """Each inner list is one batch of records with those timestamps (ms)."""
    producer = Producer({**settings.kafka_config(), "linger.ms": 50, **(extra or {})})
    for batch in batches:
        for ts in batch:
            producer.produce(topic, b"probe", timestamp=ts)
        if producer.flush(10):
            raise KafkaException("probe records were not delivered in 10 s")
    del producer


def _consumer(settings: Settings, **extra: object) -> Consumer:
    return Consumer({**settings.kafka_config(), "group.id": f"rk-probe-{uuid.uuid4().hex[:8]}",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest", **extra})


def probe_add_partitions(settings: Settings) -> str | None:
    """Grow a one-partition topic to two: a broker without CreatePartitions says why not."""
    with _probe_topic(settings, "partitions") as topic:
        try:
            add_partitions(settings, topic, 2)
        except MissingCapability as exc:
            return exc.reason.split(": ", 1)[-1]
        except KafkaException as exc:
            return str(exc)
    return None


def probe_exact_latest_offset(settings: Settings) -> str | None:
    """One batch of 5 records: a correct broker's ListOffsets "latest" is 5."""
    with _probe_topic(settings, "latest") as topic:
        now = int(time.time() * 1000)
        _produce(settings, topic, [[now] * 5])
        consumer = _consumer(settings)
        try:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
        finally:
            consumer.close()
    return None if high == 5 else f"ListOffsets latest answered {high} after one batch of 5 records (log end 5)"


def probe_offsets_by_time(settings: Settings) -> str | None:
    """Two records stamped an hour and half an hour ago: the time between them must name the second."""
    with _probe_topic(settings, "bytime") as topic:
        hour_ago = int(time.time() * 1000) - 3_600_000
        _produce(settings, topic, [[hour_ago], [hour_ago + 1_800_000]])
        consumer = _consumer(settings)
        try:
            found = consumer.offsets_for_times([TopicPartition(topic, 0, hour_ago + 1)], timeout=10)[0].offset
        finally:
            consumer.close()
    return None if found == 1 else f"offsets_for_times answered offset {found} where the record timestamps say 1"


def probe_delete_records(settings: Settings) -> str | None:
    """Delete the first of two records: the log start must move to 1."""
    with _probe_topic(settings, "delete") as topic:
        now = int(time.time() * 1000)
        _produce(settings, topic, [[now, now]])
        admin = AdminClient(settings.kafka_config())
        try:
            futures = admin.delete_records([TopicPartition(topic, 0, 1)], request_timeout=10)
            next(iter(futures.values())).result(10)
        except KafkaException as exc:
            return str(exc.args[0].str() if exc.args else exc)
        finally:
            del admin
    return None


def probe_hide_aborted(settings: Settings) -> str | None:
    """An aborted record then a committed one: a read_committed reader must see only the second (the
    library's own probe, :func:`rocketkafka.exactly_once.aborted_records_hidden`)."""
    return aborted_records_hidden(settings)


#: The probe of each broker feature.
PROBES: dict[Capability, Callable[[Settings], str | None]] = {
    Capability.ADD_PARTITIONS: probe_add_partitions,
    Capability.DELETE_RECORDS: probe_delete_records,
    Capability.OFFSETS_BY_TIME: probe_offsets_by_time,
    Capability.EXACT_LATEST_OFFSET: probe_exact_latest_offset,
    Capability.HIDE_ABORTED: probe_hide_aborted,
}


#: The variable that names the engine's fetch wait; where it is set, the test backends and the dev stack do not probe.
FETCH_WAIT_ENV = "ROCKETKAFKA_FETCH_WAIT_MS"
#: The fetch probe: how long its consumer lets the broker hold a fetch, how long after a fetch went out each of its
#: records is sent, how many it sends, and below which delivery time (s) the broker answered on arrival.
FETCH_PROBE_WAIT_S = 3.0
FETCH_PROBE_GAP_S = 0.5
FETCH_PROBE_RECORDS = 3
FETCH_PROBE_EARLY_S = 0.25


def answers_fetch_early(settings: Settings) -> bool:
    """Whether the broker answers a waiting fetch as soon as a record arrives (Apache Kafka), rather than late in
    the fetch's wait (Tansu holds it for half the wait, DESIGN §4).

    A consumer fetches the end of an empty partition with a 3 s wait; 0.5 s after each fetch went out (at the
    start, and right after each delivery) one producer, connected beforehand, sends a record. Early when the
    median of three deliveries, timed from the send, is under 0.25 s (Tansu takes about 1 s every time).
    """
    with _probe_topic(settings, "fetch-wait") as topic:
        consumer = _consumer(settings, **{"fetch.wait.max.ms": int(FETCH_PROBE_WAIT_S * 1000)})
        producer = Producer({**settings.kafka_config(), "linger.ms": 0})
        delivered: list[float] = []
        try:
            end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1]
            producer.list_topics(topic, timeout=10)  # connected before the first send is timed
            consumer.assign([TopicPartition(topic, 0, end)])  # an offset, not OFFSET_END: no record is skipped
            for _ in range(FETCH_PROBE_RECORDS):
                time.sleep(FETCH_PROBE_GAP_S)  # the fetch went out and waits at the broker
                sent = time.monotonic()
                producer.produce(topic, b"probe", partition=0)
                producer.flush(10)
                while (msg := consumer.poll(1.0)) is None or msg.error() is not None:
                    if time.monotonic() - sent > 2 * FETCH_PROBE_WAIT_S + 10:
                        raise KafkaException("the fetch probe's record did not arrive")
                delivered.append(time.monotonic() - sent)
        finally:
            consumer.close()
            del producer
    return sorted(delivered)[len(delivered) // 2] < FETCH_PROBE_EARLY_S


def add_fetch_wait(overrides: dict[str, Any], probed: Callable[[], int]) -> None:
    """Put the probed fetch wait (``probed()``, asked only then) into a backend's or stack's settings ``overrides``,
    unless the caller named one or ``ROCKETKAFKA_FETCH_WAIT_MS`` is set (the variable wins over the probe)."""
    if "fetch_wait_ms" not in overrides and not os.environ.get(FETCH_WAIT_ENV):
        overrides["fetch_wait_ms"] = probed()


def probe_fetch_wait(settings: Settings) -> int:
    """The ``fetch_wait_ms`` the engine's consumers should use on the broker of ``settings`` (ms): the default
    where a fetch is answered as soon as a record arrives, the short wait where the broker holds it (the
    short one too where the probe cannot run: latency before idle cost)."""
    try:
        early = answers_fetch_early(settings)
    except Exception as exc:
        log.warning("fetch probe of %s failed, short fetch wait: %s", settings.bootstrap_servers, exc)
        return SHORT_FETCH_WAIT_MS
    wait = DEFAULT_FETCH_WAIT_MS if early else SHORT_FETCH_WAIT_MS
    log.info("the broker at %s answers a waiting fetch %s: fetch_wait_ms=%d", settings.bootstrap_servers,
             "as soon as a record arrives" if early else "when its wait ends", wait)
    return wait


def probe(settings: Settings, capability: Capability) -> str | None:
    """``None`` when the broker of ``settings`` has ``capability``, else why not (a probe that fails says how)."""
    try:
        return PROBES[capability](settings)
    except Exception as exc:  # a probe that cannot run is a missing feature, with its reason
        return f"the probe failed: {exc}"
