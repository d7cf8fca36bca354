"""The forwarder's handler: what happens to each record at the head of a delay topic's partition.

Records of a delay topic (a *tier*: every record waits the same time) are in due-time
order, so only the head matters (:mod:`rocketkafka.schedule.tiers`). Front to back, each
record is

- due: produced to its real topic and partition;
- past its hop but not due: re-routed to the tier the plan picks for the rest, or, when
  at most ``hold_ms`` remain, held in memory and produced exactly on time
  (:mod:`~rocketkafka.delay.holds`) while the partition goes on;
- not past its hop: the partition pauses until it is (no polling, no thread per record).

Produces are asynchronous: a batch's :class:`~rocketkafka.deliveries.BatchAck` is the
scheduler's settlement (:mod:`~rocketkafka.ordering.work.settlement`), so the commit point passes a record only once its delivery
is acknowledged -- a crash re-forwards at most the unacknowledged tail (duplicates,
never loss, never early: the due time is checked again). A failed delivery (a write refused, a
partition unreachable past the producer's timeout) rewinds the partition to the first record of
its topic in the batch, so what was delivered to other topics before it is not forwarded twice. A record that cannot be
forwarded (missing or garbled delay headers, an unknown real topic or partition) goes
to the forwarder group's dead-letter topic with the reason; a real topic Kafka hides from
this principal (no WRITE grant on it) is no unknown topic: its partition waits there, and the
refusal is told once a minute (:data:`~rocketkafka.refusals.REFUSALS`).

**What the delivered record carries.** RocketMQ clears ``DELAY`` on delivery; here the
routing headers go (``REAL_TOPIC``, ``REAL_QID``, ``ORIGIN_TS``: they name where the record
was going, which it has reached) and the provenance stays: ``DELIVER_AT`` (when it was
due, epoch ms) and ``DELAY`` (its level, for level messages), so the real topic shows
which messages were delayed, how long, and how late they arrived (the Spark view and
``audit-delay`` read them there). A retry copy of a delivered message is routed afresh:
the router replaces every delay header.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from confluent_kafka import KafkaException

from rocketkafka.deliveries import Ack, BatchAck
from rocketkafka.delay.holds import HoldTimer
from rocketkafka.delay.metrics import ForwarderMetrics
from rocketkafka.errors import AuthorizationError, InvalidTopicNameError, LockError, TopicNotFoundError
from rocketkafka.logs import record_fields
from rocketkafka.names import Header
from rocketkafka.ordering.work.lanes import Outcome, Run
from rocketkafka.record import Record, produce_waiting
from rocketkafka.refusals import GRANT_HINT, REFUSALS
from rocketkafka.schedule.routing import DELAY_HEADERS, now_ms
from rocketkafka.schedule.tiers import DELIVER, Deliver, Hold, Hop, Tier, Tiers, Wait

log = logging.getLogger(__name__)

_DELIVER_AT, _REAL_TOPIC, _REAL_QID, _LEVEL = Header.DELIVER_AT, Header.REAL_TOPIC, Header.REAL_QUEUE_ID, \
    Header.DELAY_LEVEL
_ORIGIN_TS = Header.ORIGIN_TIMESTAMP
#: The delay headers a delivered record keeps (see the module docstring).
PROVENANCE_HEADERS = frozenset({_DELIVER_AT, _LEVEL})
#: Decoded real topic names remembered (a forged stream of names must not grow memory).
TOPIC_NAMES_KEPT = 1024
#: How long a partition waits before it tries again a real topic Kafka hides from this principal (ms).
REFUSED_PAUSE_MS = 1000


class DelayRecordError(Exception):
    """A delay record the forwarder cannot act on; its message is the dead-letter reason."""


class ForwardHandler:
    """Forwards, re-routes or holds the due records at the front of a delay partition's batch.

    Parameters:
        tiers: the level and step topics and the hop plan.
        producer: the confluent-kafka producer (its delivery reports are served elsewhere).
        partitions: partition counts of delay and real topics (refreshed off the hot path).
        lookup: ``topic -> partition count`` asked once for a real topic not seen yet
            (raises :class:`~rocketkafka.errors.TopicNotFoundError`).
        dead_letter: ``(record, reason)``: writes a record that cannot be forwarded, durably.
        metrics: lateness and counts.
        max_ahead_ms: a due time further out than this is garbage.
        principal: who the producer writes as (``User:fwd``), named when no ACL allows a write.
    """

    def __init__(self, tiers: Tiers, producer: Any, partitions: dict[str, int], lookup: Callable[[str], int],
                 dead_letter: Callable[[Any, str], None], metrics: ForwarderMetrics, max_ahead_ms: int,
                 principal: str | None = None) -> None:
        self.tiers, self._kafka, self._partitions, self._lookup = tiers, producer, partitions, lookup
        self._principal = principal
        self._dead_letter, self.metrics, self._max_ahead = dead_letter, metrics, max_ahead_ms
        self.holds = HoldTimer()
        self._topic_names: dict[bytes, str] = {}

    def close(self) -> None:
        """Stop the holds, and let the producer go (the engine's reference cycles must not keep it)."""
        self.holds.close()
        self._kafka = None

    def handle(self, run: Run) -> Outcome:
        """The scheduler's BatchHandler: forward ``run``'s records (see the module docstring)."""
        return self.forward(run, self._kafka, run.start, holds=True)

    def forward(self, run: Run, kafka: Any, start: int, holds: bool) -> Outcome:
        """Forward ``run.records[start:run.stop]`` through ``kafka``. Without ``holds`` a record due within
        ``hold_ms`` is waited for, not held: a held record is written later by the hold timer, outside
        whatever the caller commits with the run.
        The outcome's ``handled`` counts from ``start``.
        """
        records, end = run.records, run.stop
        tier = self.tiers.by_topic[run.work.topic]
        ack = BatchAck(self._principal)
        # one delivery callback per real topic, knowing the first record it writes: a refused topic then rewinds
        # the partition to its first record, not the batch's (what went to other topics is not written twice)
        trackers: dict[str, Any] = {}
        on_delivery: Any = None
        tracked_topic: str | None = None
        partitions, fields, dead_letter = self._partitions, self._fields, self._dead_letter
        lateness: list[int] = []  # of the records delivered here; into the metrics once per batch
        now = now_ms()
        if not run.still_ours():  # first: a process woken after a stall must not forward up to 63 records a try
            return Outcome.not_ours(0)
        try:
            for i in range(start, end):
                if i & 63 == 63:  # every 64 records: the clock, and whether the lock still holds
                    now = now_ms()
                    if not run.still_ours():  # a stalled process stops: its lock may be gone
                        return Outcome.not_ours(i - start, ack.close())
                record = records[i]
                headers = record.headers() or []
                try:
                    due, real_topic, real_partition, kept = fields(headers, now)
                except DelayRecordError as exc:
                    dead_letter(record, str(exc))
                    continue
                known = partitions.get(real_topic)
                if due <= now and known is not None and real_partition < known:  # the common case: due, deliver
                    if real_topic is not tracked_topic:  # names are interned by _topic_name: `is` is enough
                        on_delivery = trackers.get(real_topic) or trackers.setdefault(real_topic,
                                                                                      ack.track_many(i))
                        tracked_topic = real_topic
                    on_delivery.add()
                    try:
                        kafka.produce(real_topic, record.value(), record.key(), partition=real_partition,
                                      headers=kept, on_delivery=on_delivery)
                    except BufferError:  # the producer's queue is full: wait for room
                        on_delivery.cancel()
                        _send(kafka, real_topic, real_partition, record.key(), record.value(), kept, ack.track(i))
                    except KafkaException as exc:  # refused at once (a topic librdkafka knows is not ours to write)
                        on_delivery(exc.args[0] if exc.args else exc, _Unsent(real_topic))
                        return Outcome(i - start + 1, ack.close())  # the failed ack rewinds the partition here
                    lateness.append(now - due)
                    continue
                pause_ms = self._not_plain(kafka, tier, record, i, due, real_topic, real_partition, headers, kept,
                                           ack, lateness, run.work if holds else None)
                if pause_ms is not None:
                    return Outcome(i - start, ack.close(), pause_ms)
            return Outcome(end - start, ack.close())
        finally:
            if lateness:
                self.metrics.on_forward_many(lateness)

    def _not_plain(self, kafka: Any, tier: Tier, record: Any, index: int, due: int, real_topic: str,
                   real_partition: int, headers: list[tuple[str, bytes | None]], kept: list[tuple[str, bytes | None]],
                   ack: BatchAck, lateness: list[int], holding: Any) -> int | None:
        """A record (at ``index`` of its batch) that is not yet due or whose destination is not known yet: hop,
        hold, deliver or dead-letter it; returns the pause (ms) when the partition must wait for it.
        ``holding``: the partition (its lock validity) when records may be held, else ``None``."""
        now = now_ms()
        action: Wait | Hold | Hop | Deliver = DELIVER if due <= now else \
            self.tiers.decide(tier, record.timestamp()[1], due, now)
        if isinstance(action, Wait):
            return action.ms
        if isinstance(action, Hold) and holding is None:
            return max(1, due - now)
        if isinstance(action, Hop):
            target = action.tier.topic
            partition = self.tiers.partition_for(real_topic, real_partition, self._partitions[target])
            _send(kafka, target, partition, record.key(), record.value(), headers, ack.track(index))
            self.metrics.on_reroute()
            return None
        known = self._partitions.get(real_topic)
        if known is None or real_partition >= known:
            try:
                reason = self._check_destination(real_topic, real_partition)
            except AuthorizationError as exc:  # hidden from us: not missing, not ours to write (no dead letter)
                REFUSALS.note(self._write_refused(real_topic, exc), f"delay forwarder: forwarding to {real_topic}")
                return REFUSED_PAUSE_MS
            if reason is not None:
                self._dead_letter(record, reason)
                return None
        if isinstance(action, Hold):
            ack.follow(self.holds.add(due, partial(self._deliver, real_topic, real_partition, record.key(),
                                                   record.value(), kept, due, holding)), index)
            return None
        _send(kafka, real_topic, real_partition, record.key(), record.value(), kept, ack.track(index))
        lateness.append(now - due)
        return None

    def _fields(self, headers: list[tuple[str, bytes | None]], now: int) -> tuple[int, str, int, list[Any]]:
        """Due time, real topic, real partition, and the headers the delivered record keeps.

        The router appends the delay headers last, in one order (``DELIVER_AT``, ``REAL_TOPIC``,
        ``REAL_QID``, ``ORIGIN_TS``, then ``DELAY`` for level messages): they are read at their
        places when they are there, else looked for from the end and then everywhere.

        Raises:
            DelayRecordError: missing or garbled delay headers, or a due time beyond the maximum delay.
        """
        n = len(headers)
        cut = n - 5 if n and headers[-1][0] == _LEVEL else n - 4
        if cut >= 0 and headers[cut][0] == _DELIVER_AT and headers[cut + 1][0] == _REAL_TOPIC \
                and headers[cut + 2][0] == _REAL_QID and headers[cut + 3][0] == _ORIGIN_TS \
                and (cut == 0 or headers[cut - 1][0] not in DELAY_HEADERS):
            raw_due, raw_topic, raw_qid = headers[cut][1], headers[cut + 1][1], headers[cut + 2][1]
            kept = headers[:cut + 1] + headers[cut + 4:]  # the provenance: DELIVER_AT, and DELAY when there
        else:
            raw_due, raw_topic, raw_qid, kept = _scattered_fields(headers)
        try:  # a missing (None) value raises too: it is named below, off the hot path
            due, topic, partition = int(raw_due), self._topic_name(raw_topic), int(raw_qid)  # type: ignore[arg-type]
        except (TypeError, ValueError, UnicodeDecodeError, AttributeError) as exc:
            for name, value in ((_DELIVER_AT, raw_due), (_REAL_TOPIC, raw_topic), (_REAL_QID, raw_qid)):
                if value is None:
                    raise DelayRecordError(f"missing header {name}") from None
            raise DelayRecordError(f"garbled delay header ({exc})") from None
        if not topic:
            raise DelayRecordError("empty real topic")
        if partition < 0:
            raise DelayRecordError(f"real partition {partition} is negative")
        if due < 0 or due > now + self._max_ahead:
            raise DelayRecordError(f"due time {due} is outside 0 .. now + the maximum delay")
        return due, topic, partition, kept

    def _topic_name(self, raw: bytes) -> str:
        """``raw.decode()``, remembered for the few real topics a forwarder sees."""
        name = self._topic_names.get(raw)
        if name is None:
            name = raw.decode()
            if len(self._topic_names) < TOPIC_NAMES_KEPT:
                self._topic_names[raw] = name
        return name

    def _write_refused(self, topic: str, hidden: AuthorizationError) -> AuthorizationError:
        """The refusal of a real topic Kafka hides from this principal, as the WRITE grant it misses."""
        return AuthorizationError("kafka", hidden.code_name, "topic", topic, "WRITE", self._principal or hidden.principal,
                                  hint=GRANT_HINT, error=hidden.kafka_error,
                                  detail="Kafka hides the topic from this principal; WRITE implies the DESCRIBE it lacks")

    def _check_destination(self, topic: str, partition: int) -> str | None:
        """Why ``topic``/``partition`` cannot receive the record, or ``None`` when it can."""
        partitions = self._partitions.get(topic)
        if partitions is None:  # first record for this topic: ask the broker once
            try:
                partitions = self._partitions[topic] = self._lookup(topic)
            except TopicNotFoundError:
                return f"unknown real topic {topic!r}"
            except InvalidTopicNameError as exc:  # a forged or garbled REAL_TOPIC: it can never exist
                return f"real topic can never exist: {exc}"
        if partition >= partitions:
            return f"real partition {partition} does not exist in {topic!r} ({partitions} partitions)"
        return None

    def _deliver(self, topic: str, partition: int, key: bytes | None, value: bytes | None,
                 headers: list[tuple[str, bytes | None]], due: int, work: Any) -> Ack:
        """A held record's delivery, at its due time (the hold timer's thread), while the partition's lock is valid.

        A process stalled past its lock (SIGSTOP, a long pause) wakes with its held records all overdue:
        the next owner forwards them from its committed offset, so delivering them here would only make
        duplicates. Its ack fails, and nothing is committed.

        Raises:
            LockError: the lock passed while the record was held.
        """
        if work.revoked or time.monotonic() >= work.valid_until():
            raise LockError(f"{work.topic}[{work.partition}]", "passed while a record was held; the next owner "
                            "forwards it")
        ack = BatchAck(self._principal)
        _send(self._kafka, topic, partition, key, value, headers, ack.track())
        self.metrics.on_forward(now_ms() - due)
        return ack.close() or ack


def _send(kafka: Any, topic: str, partition: int, key: bytes | None, value: bytes | None,
          headers: list[tuple[str, bytes | None]], on_delivery: Callable[[Any, Any], None]) -> None:
    """Produce, waiting for room while the producer's queue is full; a produce refused at once is a failed
    delivery."""
    try:
        produce_waiting(kafka, Record(topic, partition, key, value, headers, ""), on_delivery)
    except KafkaException as exc:
        on_delivery(exc.args[0] if exc.args else exc, _Unsent(topic))


class _Unsent:
    """What a delivery callback gets for a record librdkafka refused at once: its topic (the error names it)."""

    __slots__ = ("_topic",)

    def __init__(self, topic: str) -> None:
        self._topic = topic

    def topic(self) -> str:
        return self._topic


def _scattered_fields(headers: list[tuple[str, bytes | None]]) -> tuple[Any, Any, Any, list[Any]]:
    """``(due, topic, qid, kept headers)`` of headers not in the router's layout (raw values, ``None`` when missing).

    The trailing run of delay headers is read first (its earliest value of a name wins); when it
    lacks one, the headers are searched everywhere (the last value wins).
    """
    raw_due = raw_topic = raw_qid = None
    cut = len(headers)
    for i in range(cut - 1, -1, -1):
        name = headers[i][0]
        if name not in DELAY_HEADERS:
            break
        cut = i
        if name == _DELIVER_AT:
            raw_due = headers[i][1]
        elif name == _REAL_TOPIC:
            raw_topic = headers[i][1]
        elif name == _REAL_QID:
            raw_qid = headers[i][1]
    if raw_due is not None and raw_topic is not None and raw_qid is not None:
        return raw_due, raw_topic, raw_qid, headers[:cut] + [(k, v) for k, v in headers[cut:]
                                                             if k in PROVENANCE_HEADERS]
    for name, value in headers:
        if name == _DELIVER_AT:
            raw_due = value
        elif name == _REAL_TOPIC:
            raw_topic = value
        elif name == _REAL_QID:
            raw_qid = value
    return raw_due, raw_topic, raw_qid, [(k, v) for k, v in headers if k not in DELAY_HEADERS
                                         or k in PROVENANCE_HEADERS]


def log_dead_letter(record: Any, reason: str) -> None:
    log.error("delay record %s[%d]@%d cannot be forwarded: %s", record.topic(), record.partition(), record.offset(),
              reason, extra=record_fields(record))
