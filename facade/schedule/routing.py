"""Send side: turn a delayed message into a record on its first delay topic.

RocketMQ's broker swaps a delayed message's topic for ``SCHEDULE_TOPIC_XXXX``
(queue ``level - 1``) and keeps the real topic and queue as properties; here the
producer does it (:class:`DelayRouter`, reached from ``Sender.prepare``):

- ``delay_time_level`` L goes to level topic L, due ``now + level(L)``;
- ``delay`` / ``deliver_at`` go to the tier :meth:`Tiers.next_hop` picks for the
  remaining time; the forwarder re-plans at every hop (largest level not after the
  due time, then shorter ones) and the final hop waits the exact remainder at the
  head of its queue.

The real partition is fixed at send time (the selector's choice, else the partition the
producer's partitioner gives the key, else round robin) so a key keeps its partition and
its order. Everything the
forwarder needs travels in headers; there is no other per-message state.

Headers added (``rocketkafka.names.Header``): ``DELIVER_AT`` (absolute due time, epoch ms),
``REAL_TOPIC``, ``REAL_QID``, ``ORIGIN_TS`` (epoch ms of the send), and ``DELAY`` for
level messages. The forwarder removes them all on delivery.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from rocketkafka.schedule.levels import RETRY_BASE_DELAY_LEVEL, DelayConfig, format_duration
from rocketkafka.schedule.tiers import Tier, Tiers
from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.errors import DelayError
from rocketkafka.message import Message
from rocketkafka.partitioning import DEFAULT_PARTITIONER, key_partition
from rocketkafka.names import Header
from rocketkafka.record import Record

#: Headers that exist only while a message is delayed; delivery removes them.
DELAY_HEADERS = frozenset({Header.DELAY_LEVEL, Header.DELIVER_AT, Header.REAL_TOPIC, Header.REAL_QUEUE_ID,
                           Header.ORIGIN_TIMESTAMP})


def now_ms() -> int:
    """Wall-clock epoch milliseconds (due times are absolute, as karafka's delayer)."""
    return time.time_ns() // 1_000_000


class DelayRouter:
    """Routes delayed records to the level and step topics of ``settings``' prefix.

    Parameters:
        settings: names the internal topics.
        admin: partition counts, and provisioning of the delay topics on first use.
        config: levels and limits (default: ``settings.delay``).

    >>> router = DelayRouter(settings, admin)                                         # doctest: +SKIP
    >>> router.route(Message("orders", b"x", delay_time_level=3), record, 8).topic    # doctest: +SKIP
    'rk.delay.level.03'
    """

    def __init__(self, settings: Settings, admin: TopicAdmin, config: DelayConfig | None = None,
                 partitioner: str | None = None) -> None:
        self.config = config or settings.delay
        self.tiers = Tiers(settings.topics, self.config)
        self._admin = admin
        self._round_robin = itertools.count()
        # the sending producer's rule (rocketkafka.partitioning), so a delayed key lands where an immediate one does
        self._partitioner = partitioner or str(settings.kafka.get("partitioner", DEFAULT_PARTITIONER))
        self._provisioned = False
        self._provision_lock = threading.Lock()

    # -- provisioning --------------------------------------------------------------------
    def ensure_topics(self) -> None:
        """Create the level and step topics that do not exist yet (once per router)."""
        if self._provisioned:
            return
        with self._provision_lock:
            if not self._provisioned:
                provision(self._admin, self.tiers)
                self._provisioned = True

    # -- the seam called by Sender.prepare ----------------------------------------------
    def route(self, msg: Message, record: Record, partitions: int) -> Record:
        """``record`` re-addressed to its first delay topic, or unchanged when it is due now.

        Raises:
            DelayError: unknown level, negative, too large or malformed delay, or more than one
                of ``delay_time_level``, ``delay``, ``deliver_at``; nothing is sent.
        """
        now = now_ms()
        due, level = self.due_of(msg, now)
        if due is None:
            return record
        return self.delayed(record, due, now, partitions, level)

    def route_level(self, record: Record, level: int, partitions: int) -> Record:
        """``record`` sent through delay ``level`` (the retry back-off's entry point)."""
        self.tier_of_level(level)
        now = now_ms()
        return self.delayed(record, now + self.config.level_ms(level), now, partitions, level)

    def due_of(self, msg: Message, now: int) -> tuple[int | None, int | None]:
        """``(due epoch ms or None when not delayed, level or None)`` of ``msg``; :class:`DelayError` when invalid."""
        level, delay, deliver_at = msg.delay_time_level, msg.delay, msg.deliver_at
        given = [name for name, value in (("delay_time_level", level), ("delay", delay), ("deliver_at", deliver_at))
                 if value not in (None, 0)]
        if len(given) > 1:
            raise DelayError(f"set only one of delay_time_level, delay, deliver_at (got {', '.join(given)})")
        if level:
            if isinstance(level, bool) or not isinstance(level, int):
                raise DelayError(f"delay_time_level must be an int, got {level!r}")
            self.tier_of_level(level)
            return now + self.config.level_ms(level), level
        if delay is not None:
            ms = _delay_ms(delay)
            self._check_distance(ms, "delay")
            return (now + ms if ms > 0 else None), None
        if deliver_at is not None:
            due = _epoch_ms(deliver_at)
            self._check_distance(due - now, "deliver_at")
            return (due if due > now else None), None  # a due time in the past is due now
        return None, None

    def tier_of_level(self, level: int) -> Tier:
        try:
            return self.tiers.level(level)
        except KeyError:
            raise DelayError(f"unknown delay level {level}: levels are 1..{len(self.config.levels)} "
                             f"({self.config.describe()}), 0 = no delay") from None

    def delayed(self, record: Record, due: int, now: int, partitions: int, level: int | None = None) -> Record:
        """``record`` on the tier for ``due``: its level's topic, else the plan's next hop."""
        self.ensure_topics()
        real_partition = record.partition if record.partition >= 0 else self.pick_partition(record.key, partitions)
        tier = self.tiers.level(level) if level else self.tiers.next_hop(due - now)
        headers = [(k, v) for k, v in record.headers if k not in DELAY_HEADERS]
        headers += [(Header.DELIVER_AT, str(due).encode()), (Header.REAL_TOPIC, record.topic.encode()),
                    (Header.REAL_QUEUE_ID, str(real_partition).encode()), (Header.ORIGIN_TIMESTAMP, str(now).encode())]
        if level:
            headers.append((Header.DELAY_LEVEL, str(level).encode()))
        partition = self.tiers.partition_for(record.topic, real_partition, self._admin.partitions(tier.topic))
        return Record(tier.topic, partition, record.key, record.value, headers, record.msg_id)

    def pick_partition(self, key: bytes | None, partitions: int) -> int:
        """The real partition of a record the selector left open: where the producer's partitioner puts
        its key (so delayed and immediate sends of one key share a partition), else round robin."""
        if key is not None:
            return key_partition(key, partitions, self._partitioner)
        return next(self._round_robin) % partitions

    def _check_distance(self, ms: int, what: str) -> None:
        if ms > self.config.max_delay:
            raise DelayError(f"{what} is {format_duration(ms)} away, over the maximum of "
                             f"{format_duration(self.config.max_delay)} (ROCKETKAFKA_DELAY_MAX_DELAY)")


def provision(admin: TopicAdmin, tiers: Tiers) -> None:
    """Create every level and step topic (existing ones keep their partition count)."""
    admin.create_internal({topic: tiers.config.partitions for topic in tiers.topics()})


def retry_backoff(sender: Any, config: DelayConfig | None = None) -> Callable[[Record, int], Record]:
    """The ``Reconsumer`` hook: retry ``n`` (1-based) waits delay level ``3 + n - 1`` (RocketMQ's back-off).

    The first retry waits level 3 (10 s by default), the next level 4 (30 s), and so on,
    capped at the last level. The copy reaches the group's retry topic when due.
    """
    router = DelayRouter(sender.settings, sender.admin, config)
    last = len(router.config.levels)

    def route(record: Record, reconsume_times: int) -> Record:
        level = min(RETRY_BASE_DELAY_LEVEL + max(reconsume_times, 1) - 1, last)
        return router.route_level(record, level, sender.partitions(record.topic))

    return route


def _delay_ms(delay: Any) -> int:
    if isinstance(delay, timedelta):
        seconds = delay.total_seconds()
    elif isinstance(delay, (int, float)) and not isinstance(delay, bool):
        seconds = float(delay)
    else:
        raise DelayError(f"delay must be a timedelta or seconds (int/float), got {type(delay).__name__}")
    if not math.isfinite(seconds):
        raise DelayError(f"delay must be finite, got {delay!r}")
    if seconds < 0:
        raise DelayError(f"delay must not be negative, got {delay!r}")
    return math.ceil(seconds * 1000)


def _epoch_ms(deliver_at: Any) -> int:
    if isinstance(deliver_at, datetime):
        if deliver_at.tzinfo is None or deliver_at.utcoffset() is None:
            raise DelayError("deliver_at must be a timezone-aware datetime (or epoch seconds)")
        seconds = deliver_at.timestamp()
    elif isinstance(deliver_at, (int, float)) and not isinstance(deliver_at, bool):
        seconds = float(deliver_at)
    else:
        raise DelayError(f"deliver_at must be a datetime or epoch seconds, got {type(deliver_at).__name__}")
    if not math.isfinite(seconds) or seconds < 0:
        raise DelayError(f"deliver_at must be a time after the epoch, got {deliver_at!r}")
    return math.ceil(seconds * 1000)
