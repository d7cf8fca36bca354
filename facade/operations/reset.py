"""Moving a group's committed offsets while it runs (``mqadmin resetOffsetByTime``).

The request goes through Redis (:mod:`~rocketkafka.ordering.engine.resets`): the member holding
a partition's lock drains it, commits the requested offset under the lock and re-reads
from there; a partition nobody holds is locked and committed here. The call returns once
every partition was applied, so "re-delivered from the requested point" holds the moment
it returns (records handed out before it drain first and are not cut short).

``--to`` forms: ``earliest``, ``latest``, an offset (``1234``), or a time (ISO 8601,
``2026-05-01T09:00:00``, local time unless it names a zone) -- the first record stored at
or after it. A time needs a broker whose ``offsets_for_times`` is right; Tansu answers
offset 0 past its last batch, so on such a broker a time is refused unless forced, and
forced it is found by scanning the records' timestamps instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from confluent_kafka import Consumer, KafkaError, KafkaException

from rocketkafka.config import Settings
from rocketkafka.errors import ConfigError, RocketKafkaError
from rocketkafka.operations.groups import ADMIN_LOCK_SETTINGS, admin_id, lock_views
from rocketkafka.operations.reading import LogReader
from rocketkafka.ordering.engine.commits import fenced
from rocketkafka.ordering.locks import LockTable
from rocketkafka.ordering.engine.resets import OffsetResets
from rocketkafka.refusals import principal_of, refusal_in
from rocketkafka.topic_partition import TP

#: How often the members are woken again while a reset waits for them (s).
ANNOUNCE_EVERY_S = 1.0


class ResetError(RocketKafkaError):
    """An offset reset could not be applied to every partition in time (the request stays; owners apply it later)."""


@dataclass(frozen=True)
class ResetOutcome:
    """One partition's reset: the committed offset before, the offset now, and who applied it."""

    topic: str
    partition: int
    before: int | None
    after: int
    applied_by: str  # the owning member's id, or "admin" (nobody held the partition)


def parse_target(text: str) -> str | int | datetime:
    """``earliest`` / ``latest`` / an offset / an ISO 8601 time; :class:`ConfigError` for anything else."""
    value = text.strip()
    if value.lower() in ("earliest", "latest"):
        return value.lower()
    if value.isdigit():
        return int(value)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"--to {text!r}: expected earliest, latest, an offset or an ISO 8601 time "
                          "(2026-05-01T09:00:00)") from None
    return moment if moment.tzinfo is not None else moment.astimezone()


def reset_offset(settings: Settings, group: str, topic: str, to: str | int | datetime, *,
                 partitions: list[int] | None = None, force: bool = False, timeout: float = 60.0) -> list[ResetOutcome]:
    """Make ``group`` re-read ``topic`` from ``to``, safely while it runs; returns what each partition did.

    Parameters:
        to: ``"earliest"``, ``"latest"``, an offset (every chosen partition), or a time.
        partitions: only these partitions (default: all).
        force: reset to a time even on a broker whose ``offsets_for_times`` is unreliable (by scanning).
        timeout: seconds to wait for the owners to apply it.

    Raises:
        TopicNotFoundError: no such topic.
        ConfigError: a bad target, an offset outside a partition's log, or an unreliable broker without ``force``.
        ResetError: some partition was not applied within ``timeout``.
    """
    target = parse_target(to) if isinstance(to, str) else to
    with LogReader(settings) as reader:
        tps = reader.partitions(topic)
        if partitions is not None:
            missing = sorted(set(partitions) - {p for _, p in tps})
            if missing:
                raise ConfigError(f"topic {topic!r} has no partition {missing} (it has {len(tps)})")
            tps = [tp for tp in tps if tp[1] in set(partitions)]
        ends = reader.ends(tps)
        offsets = _targets(reader, tps, ends, target, force)
        before = reader.committed(group, tps)
    resets = OffsetResets(settings.require_redis(), group, settings.keys)
    try:
        owners = {(v.topic, v.partition): v.owner for v in lock_views(settings, group, tps)}
        resets.request(offsets)
        applied = _await(settings, group, resets, offsets, timeout)
    finally:
        resets.close()
    return [ResetOutcome(tp[0], tp[1], before.get(tp), offsets[tp], applied.get(tp) or owners.get(tp) or "admin")
            for tp in tps]


def _targets(reader: LogReader, tps: list[TP], ends: dict[TP, tuple[int, int]], target: str | int | datetime,
             force: bool) -> dict[TP, int]:
    if target == "earliest":
        return {tp: ends[tp][0] for tp in tps}
    if target == "latest":
        return {tp: ends[tp][1] for tp in tps}
    if isinstance(target, int):
        for tp in tps:
            low, high = ends[tp]
            if not low <= target <= high:
                raise ConfigError(f"offset {target} is outside {tp[0]}[{tp[1]}]'s log {low}..{high}")
        return {tp: target for tp in tps}
    if not isinstance(target, datetime):
        raise ConfigError(f"unknown reset target {target!r}")
    trusted = reader.times_reliable(tps, ends)
    if not trusted and not force:
        raise ConfigError(f"the broker at {reader.settings.bootstrap_servers} answers offsets_for_times wrongly "
                          "(it names a record for a time after its last one, as Tansu does), so a reset by time "
                          "could move to the wrong offset; --force finds the offset by scanning record timestamps")
    ms = int(target.timestamp() * 1000)
    return {tp: reader.first_at_or_after(tp, ms, *ends[tp], trust_broker=trusted) for tp in tps}


def _await(settings: Settings, group: str, resets: OffsetResets, offsets: dict[TP, int],
           timeout: float) -> dict[TP, str]:
    """Wait until every request is applied, applying those of unowned partitions here; returns who applied each."""
    applied: dict[TP, str] = {}
    table = LockTable(settings.require_redis(), group, admin_id(), settings.keys, ADMIN_LOCK_SETTINGS)
    try:
        deadline = time.monotonic() + timeout
        next_announce = time.monotonic() + ANNOUNCE_EVERY_S
        while True:
            pending = resets.pending(offsets)
            if not pending:
                return applied
            unowned = [v for v in lock_views(settings, group, pending) if v.owner is None]
            if unowned:
                won = table.lock_batch([(v.topic, v.partition) for v in unowned])
                if won:
                    # asked again under the lock: an owner may have applied it and unlocked since ``pending``
                    # was read (it marks the request done before it unlocks); its commit stands
                    still_pending = resets.pending(won)
                    mine = {tp: h for tp, h in won.items() if tp in still_pending}
                    if mine:
                        _commit(settings, group, {tp: offsets[tp] for tp in mine},
                                {tp: h.fencing_token for tp, h in mine.items()})
                        resets.done(mine, offsets)
                        applied.update({tp: "admin" for tp in mine})
                    table.unlock_batch(won)
                    continue
            if time.monotonic() > deadline:
                names = ", ".join(f"{t}[{p}]" for t, p in sorted(pending))
                raise ResetError(f"the owners of {names} did not apply the reset within {timeout:g} s; the request "
                                 "stays in Redis and is applied when they (or their successors) next rebalance")
            if time.monotonic() >= next_announce:
                resets.announce()
                next_announce = time.monotonic() + ANNOUNCE_EVERY_S
            time.sleep(0.05)
    finally:
        table.close()


def _commit(settings: Settings, group: str, offsets: dict[TP, int], tokens: dict[TP, int]) -> None:
    """Commit ``offsets`` for ``group`` with their fencing tokens.

    Raises:
        AuthorizationError: no ACL lets this principal commit for ``group`` (READ) or on the topic.
    """
    consumer = Consumer(settings.kafka_config(**{"group.id": group, "enable.auto.commit": False}))
    try:
        consumer.commit(offsets=[fenced(tp, offset, tokens[tp]) for tp, offset in offsets.items()], asynchronous=False)
    except KafkaException as exc:
        topic = next(iter(offsets))[0]
        code = exc.args[0].code() if exc.args and isinstance(exc.args[0], KafkaError) else None
        refusal = refusal_in(exc, topic if code == KafkaError.TOPIC_AUTHORIZATION_FAILED else group, "READ",
                             principal_of(settings.kafka))
        if refusal is None:
            raise
        raise refusal from None
    finally:
        consumer.close()
