"""Exactly once: the broker capability it needs (asked once per broker), and the transaction a thread writes into.

A Kafka transaction commits produced records together with consumed offsets, or neither.
That is exactly once only if read_committed readers skip what an aborted transaction wrote.
If they see it (Tansu today: DESIGN §4), an aborted forward would show up next to the retry
that replaced it. So a service started with ``exactly_once=True`` checks first, with
:func:`require_exactly_once`. It writes one record in a transaction and aborts it, then writes
one and commits it, and reads them back read_committed. If that does not hold, the service
refuses to start and says why. It never falls back to at-least-once without saying so.

The probe names its transactional id under the caller's own transactional-id prefix and reads back
with the caller's own consumer group (it commits nothing there), so a least-privilege principal
needs no grant beyond its own: no name shared by every deployment of the cluster.

While a handler runs inside a transaction, its thread's writes go into it
(:func:`writing_into`): retry copies and dead letters of the failure policies
(:class:`~rocketkafka.retry.Reconsumer`) and what a listener sends through an exactly-once
consumer's producer handle. They commit with the consumed offsets, or not at all.

>>> require_exactly_once(Settings.load(), "the delay forwarder")   # doctest: +SKIP
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings, kafka_client
from rocketkafka.errors import ConfigError
from rocketkafka.refusals import principal_of, refusal_in

log = logging.getLogger(__name__)

#: Seconds the probe may take as a whole (init_transactions, two transactions, the read back).
PROBE_TIMEOUT_S = 30.0

_current = threading.local()  # .producer: the transactional producer this thread writes into
_verdicts: dict[str, str | None] = {}  # bootstrap servers -> None (hides them) or why not
_asking = threading.Lock()


def probe_topic(settings: Settings) -> str:
    """The one-partition internal topic the probe writes to (kept: a probe costs two records)."""
    return settings.topics.probe()


def probe_transactional_id(prefix: str | None, marker: str) -> str:
    """The probe's transactional id under ``prefix`` (``~`` is no topic-name character: it never equals the id
    of a partition's producer, ``<prefix><topic>.<partition>``); without one, a throw-away ``rk-probe-*`` id."""
    return f"rk-probe-{marker}" if prefix is None else f"{prefix}~probe-{marker}"


def aborted_records_hidden(settings: Settings, timeout: float = PROBE_TIMEOUT_S, *,
                           transactional_id_prefix: str | None = None, group: str | None = None) -> str | None:
    """``None`` when read_committed readers of the broker of ``settings`` skip aborted records, else why not.

    An aborted record, then a committed one, in one partition. A reader from the aborted record's
    offset must see only the committed one. The probe writes under a transactional id that starts with
    ``transactional_id_prefix`` and reads back as a consumer of ``group``, committing nothing (default for
    either: a throw-away ``rk-probe-*`` name, which only a principal allowed every name can use).
    """
    deadline = time.monotonic() + timeout
    topic = probe_topic(settings)
    admin = TopicAdmin(settings)
    try:
        admin.create_internal({topic: 1}, timeout=timeout)
    finally:
        admin.close()
    marker = uuid.uuid4().hex.encode()
    transactional_id = probe_transactional_id(transactional_id_prefix, marker.decode())
    producer = kafka_client(Producer, {**settings.kafka_config(), "linger.ms": 0, "transactional.id": transactional_id})
    offsets: list[int] = []

    def delivered(err: object, msg: object) -> None:
        if err is None:
            offsets.append(msg.offset())  # type: ignore[attr-defined]

    try:
        producer.init_transactions(_left(deadline))
        for value, commit in ((b"aborted:" + marker, False), (b"committed:" + marker, True)):
            producer.begin_transaction()
            producer.produce(topic, value, partition=0, on_delivery=delivered)
            producer.flush(_left(deadline))
            (producer.commit_transaction if commit else producer.abort_transaction)(_left(deadline))
    except KafkaException as exc:
        refusal = refusal_in(exc, transactional_id, "WRITE", principal_of(settings.kafka))
        if refusal is not None:  # a missing grant, not a broker without transactions: AuthorizationError
            raise refusal from None
        return f"its transactions fail: {exc.args[0].str() if exc.args else exc}"
    finally:
        del producer
    if len(offsets) != 2:
        return "the probe's records were not acknowledged"
    return _read_back(settings, topic, offsets[0], marker, deadline, group or f"rk-probe-{marker.decode()}")


def _read_back(settings: Settings, topic: str, start: int, marker: bytes, deadline: float, group: str) -> str | None:
    consumer = kafka_client(Consumer, {**settings.kafka_config(), "group.id": group,
                                       "enable.auto.commit": False, "isolation.level": "read_committed"})
    seen: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, start)])
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            value = msg.value() or b""
            if value.endswith(marker):
                seen.append(value.split(b":")[0])
            if value == b"committed:" + marker:
                break
    finally:
        consumer.close()
    if seen == [b"committed"]:
        return None
    if b"aborted" in seen:
        return "its read_committed readers see aborted records"
    return f"a read_committed reader did not get the committed probe record within the time ({seen})"


def _left(deadline: float) -> float:
    return max(0.1, deadline - time.monotonic())


def require_exactly_once(settings: Settings, what: str, option: str = "exactly_once", *,
                         transactional_id_prefix: str | None = None, group: str | None = None) -> None:
    """Refuse ``option=True`` for ``what`` unless the broker hides aborted records (asked once per broker).

    ``transactional_id_prefix`` and ``group`` are the caller's own (its producers' transactional ids start
    with the prefix, ``group`` is the consumer group it commits to): the probe runs under them
    (:func:`aborted_records_hidden`).

    Raises:
        ConfigError: the broker does not hide aborted records, or its transactions fail (the message says which).
        AuthorizationError: the principal may not use the probe's transactional id, topic or group (named).
    """
    servers = settings.bootstrap_servers
    with _asking:
        if servers not in _verdicts:
            _verdicts[servers] = aborted_records_hidden(settings, transactional_id_prefix=transactional_id_prefix,
                                                        group=group)
            log.info("exactly-once probe of %s: %s", servers, _verdicts[servers] or "aborted records are hidden")
        why_not = _verdicts[servers]
    if why_not is not None:
        raise ConfigError(f"{what}: {option}=True needs a broker whose read_committed readers skip aborted "
                          f"records, and the broker at {servers} does not: {why_not}. Start it without {option} "
                          "(at-least-once)")


@contextmanager
def writing_into(producer: Any) -> Iterator[None]:
    """Within the block, this thread's transactional writes go into ``producer``'s open transaction."""
    before = getattr(_current, "producer", None)
    _current.producer = producer
    try:
        yield
    finally:
        _current.producer = before


def transaction_producer() -> Any | None:
    """The producer whose transaction this thread writes into, or ``None`` outside one."""
    return getattr(_current, "producer", None)
