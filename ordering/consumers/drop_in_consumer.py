"""The Kafka-style drop-in consumer: a ``confluent_kafka.Consumer`` whose subscriptions use RocketMQ's
ownership.

:class:`Consumer` *is* a ``confluent_kafka.Consumer`` (a subclass): every call has confluent-kafka's
signature and, where rocketkafka adds nothing, passes straight through (``assign``, ``seek``,
``pause``/``resume``, ``position``, ``committed``, ``get_watermark_offsets``, ``store_offsets``,
``offsets_for_times``, ``list_topics``, ``consumer_group_metadata``, ``commit``...). Two modes,
as in Kafka:

- **subscribe** (group management): instead of Kafka's group coordinator, the ownership engine
  (membership, allocation, the Redis lock table) decides which partitions this member reads
  and ``incremental_assign`` s them. It runs on the caller's thread, inside ``poll()`` /
  ``consume()`` (a time comparison when nothing is due), so records are the client's own
  ``confluent_kafka.Message`` objects at the client's speed; the engine's keeper renews locks
  from its own thread, so a busy application keeps its partitions between calls.
  ``on_assign`` / ``on_revoke`` / ``on_lost`` run inside ``poll()`` as in confluent-kafka;
  ``^regex`` topics are matched against the broker's topics at every rebalance.
  ``enable.auto.commit`` (default true) commits the returned positions every commit interval
  and when a partition leaves -- only while this member holds its lock. Explicit commits of
  partitions this member does not own raise ``KafkaException(_STATE)``.
- **assign** (no subscription): plain confluent-kafka, no Redis; auto commit as librdkafka's.

Inside a subscription, ``assign(partitions)`` (e.g. from ``on_assign``) sets start offsets of
owned partitions, and ``unassign()`` / ``incremental_unassign()`` inside ``on_revoke`` /
``on_lost`` are accepted (the engine unassigns itself); elsewhere they raise
``KafkaException(_STATE)``: ownership is the lock table's. ``memberid()`` is this member's name
in the Redis membership. docs/guides/from-confluent-kafka.md ("What differs") lists the rest.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka import Consumer as _KafkaConsumer
from pydantic import ValidationError

from rocketkafka.config import Settings
from rocketkafka.errors import (AuthenticationError, AuthorizationError, ConfigError, InvalidTopicNameError,
                                MalformedRecordError, RedisAuthError, TopicNotFoundError)
from rocketkafka.logs import SampledWarning, record_fields
from rocketkafka.message_selector import MessageSelector
from rocketkafka.names import check_group_name
from rocketkafka.ordering.consumers.background_join import BackgroundJoin
from rocketkafka.ordering.consumers.commit_args import (check_message_or_offsets, check_subscription, position_of,
                                                        require_owned)
from rocketkafka.ordering.engine.commits import commit_offsets
from rocketkafka.ordering.consumers.drop_in_step import DropInStep, Native, RebalanceCallback
from rocketkafka.ordering.engine.engine import OwnershipEngine
from rocketkafka.ordering.engine.options import ConsumerOptions
from rocketkafka.ordering.consumers.selecting import RecordFilter, record_filter
from rocketkafka.topic_partition import TP
from rocketkafka.validation import validation_summary

#: How long one wait inside ``poll()`` lasts at most, so the engine's due work is done between waits (s).
WAIT_SLICE_S = 0.1
#: How long ``subscribe`` waits for the first join attempt before it returns and the join goes on
#: in the background (s): long enough for a reachable cluster, short enough not to stall on an outage.
SUBSCRIBE_WAIT_S = 2.0
#: Join failures ``subscribe`` raises when the first attempt meets them: no retry can mend them.
HOPELESS = (TopicNotFoundError, InvalidTopicNameError, RedisAuthError, ConfigError, AuthenticationError, AuthorizationError)

log = logging.getLogger(__name__)

class Consumer(_KafkaConsumer):
    """``confluent_kafka.Consumer`` (a subclass of it) with RocketMQ's ownership for subscriptions.

    Parameters:
        config: the confluent-kafka config dict; ``group.id`` is required (as confluent-kafka);
            ``enable.auto.commit``, ``auto.commit.interval.ms``, ``enable.auto.offset.store``,
            ``auto.offset.reset``, ``enable.partition.eof``, ``on_commit`` and the rest mean what
            they mean there. ``rocketkafka.redis.urls`` names the lock table's Redis nodes
            (needed by ``subscribe`` only).
        **kwargs: :class:`~rocketkafka.ordering.engine.options.ConsumerOptions` fields (timings, allocation, ...);
            anything else goes to confluent-kafka as its keyword config (``logger=...``).

    >>> c = Consumer({"bootstrap.servers": "...", "group.id": "billing"})    # doctest: +SKIP
    >>> c.subscribe(["orders"], tags="created || paid")
    >>> msg = c.poll(1.0)
    """

    # what a subclass that never called __init__ sees: closed, so every call raises confluent-kafka's
    # RuntimeError("Consumer closed") instead of an AttributeError
    _closed = True
    _engine: OwnershipEngine | None = None
    _join: BackgroundJoin | None = None
    _auto_commit = False
    _ever_assigned = False  # assign mode had partitions at some point: close() commits their positions

    def __init__(self, config: dict[str, Any] | None = None, /, **kwargs: Any) -> None:
        if not isinstance(config, dict) and not (config is None and kwargs):
            raise TypeError("expected configuration dict")  # confluent-kafka's words
        options = {k: v for k, v in kwargs.items() if k in ConsumerOptions.model_fields}
        config = {**(config or {}), **{k: v for k, v in kwargs.items() if k not in options}}
        group = config.get("group.id")
        if not group or not isinstance(group, str):
            raise ConfigError("Failed to create consumer: group.id must be set (a non-empty string), as in "
                              "confluent-kafka")
        self._group = check_group_name(group, "group.id")
        # no broker named is fine, as with confluent-kafka: librdkafka says so in the log
        self.settings, client_config = Settings.from_client_config(config, require_broker=False)
        try:
            self.options = ConsumerOptions(**options)
        except ValidationError as exc:
            raise ConfigError(validation_summary(exc, "bad consumer options")) from None
        self._auto_commit = str(client_config.get("enable.auto.commit", True)).lower() in ("true", "1")
        self._auto_store = str(client_config.get("enable.auto.offset.store", True)).lower() in ("true", "1")
        self._commit_every = float(client_config.get("auto.commit.interval.ms", 5000)) / 1000
        self._user_on_commit = client_config.pop("on_commit", None)
        if self._user_on_commit is not None and not callable(self._user_on_commit):
            raise TypeError("on_commit must be callable, as in confluent-kafka")
        self._error_cb = client_config.get("error_cb")  # join failures are reported there too
        if self.settings.bootstrap_servers:
            client_config["bootstrap.servers"] = self.settings.bootstrap_servers
        # librdkafka never auto-commits under us: a subscription commits only while it holds the lock
        # (the engine), an assignment as librdkafka would (commit_due below)
        super().__init__({**client_config, "enable.auto.commit": False, "on_commit": self._on_commit})
        self._closed = False
        self._selects: RecordFilter | None = None  # the tag expression's test; None: every record
        self._unmatchable_warning = SampledWarning(log)  # records skipped for a garbled tag
        self._engine: OwnershipEngine | None = None
        self._stored: dict[TP, int] = {}  # store_offsets() with enable.auto.offset.store=false
        self._next_auto_commit = time.monotonic() + self._commit_every
        self._last_auto: dict[TP, int] = {}  # what auto commit committed last, per partition (assign mode)
        self._in_revoke = 0

    # -- subscriptions -----------------------------------------------------------------------
    def subscribe(self, topics: list[str], on_assign: RebalanceCallback | None = None,
                  on_revoke: RebalanceCallback | None = None, on_lost: RebalanceCallback | None = None, *,
                  tags: str = "*") -> None:
        """Join the group for ``topics`` (``^regex`` names match by pattern); only messages matching the
        tag expression are returned.

        ``on_assign(consumer, partitions)`` runs after partitions were taken, ``on_revoke`` before
        a partition leaves (commit there when committing manually), ``on_lost`` when its lock was
        lost (nothing may be committed any more); all inside ``poll()``/``consume()``.

        As in confluent-kafka, an unreachable cluster does not fail the call: joining (Redis membership,
        lock table, the topics' partitions) goes on in the background after ``SUBSCRIBE_WAIT_S``,
        retried, each failure reported through ``error_cb`` (else the log) inside ``poll()``/``consume()``.
        With no Redis nodes or no broker configured the subscription stays empty and says so in the
        log, as librdkafka does for a missing ``bootstrap.servers``.

        Raises:
            TypeError: ``topics`` is not a list of names, or a callback is not callable.
            TopicNotFoundError: a literal topic does not exist (a KafkaException, UNKNOWN_TOPIC_OR_PART).
            RedisAuthError: a Redis node refused the credentials.
            AuthenticationError, AuthorizationError: a secured cluster refused who it is, or a grant (named).
            InvalidTopicNameError: a literal name breaks a Kafka topic name rule (the error names it).
            RuntimeError: the consumer is closed.
        """
        self._check_open()
        check_subscription(topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        selects = record_filter(MessageSelector.by_tag(tags), self._unmatchable_tag)
        if self._engine is not None or self._join is not None:
            self.unsubscribe()  # as confluent-kafka: a new subscription replaces the old one
        if self.assignment():
            super().unassign()
        self._selects = selects
        missing = [what for what, given in (("Redis nodes (rocketkafka.redis.urls)", self.settings.redis_urls),
                                            ("bootstrap.servers", self.settings.bootstrap_servers)) if not given]
        if missing:
            log.warning("consumer of group %s: no %s configured: subscription to %s will not receive "
                        "anything", self._group, " and no ".join(missing), list(topics))
            return

        def make_engine() -> OwnershipEngine:
            step = DropInStep(self, topics, self._auto_commit, on_revoke, on_lost)
            engine = OwnershipEngine(self._group, self.settings, self.options, step, kafka=Native(self),
                                     name=f"consumer {self.options.instance_name} of group {self._group}")
            if on_assign is not None:
                engine.on_assigned = lambda locks: on_assign(self, [TopicPartition(*tp) for tp in locks])
            return engine

        join = BackgroundJoin(make_engine, self._group)
        if join.wait(SUBSCRIBE_WAIT_S) and isinstance(join.first_failure, HOPELESS):
            join.cancel()
            raise join.first_failure
        self._join = join
        self._joined(report=False)  # take the first partitions now when joined; failures go to poll()

    def unsubscribe(self) -> None:
        """Leave the group gracefully (commit what was returned with auto commit, unlock, leave the membership)."""
        self._check_open()
        join, self._join = self._join, None
        if join is not None:
            join.cancel()
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()
        self._selects = None

    def _joined(self, report: bool = True) -> OwnershipEngine | None:
        """The subscription's engine once the background join is done (its first partitions taken); the
        join's failures go to ``error_cb`` meanwhile, whose exceptions propagate, as in confluent-kafka."""
        join = self._join
        if join is None:
            return self._engine
        failures = join.failures() if report else []
        engine = join.take()
        if engine is not None:
            self._join, self._engine = None, engine
            engine.maintain()
        for exc in failures:
            self._report(exc)
        return engine

    def _report(self, exc: BaseException) -> None:
        """A join failure, as librdkafka reports a broker it cannot reach: ``error_cb``, else the log."""
        if self._error_cb is None:
            log.warning("consumer of group %s: joining failed, retrying: %s", self._group, exc)
            return
        cause = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        self._error_cb(cause if isinstance(cause, KafkaError) else KafkaError(KafkaError._TRANSPORT, str(exc)))

    # -- reading -----------------------------------------------------------------------------
    def poll(self, timeout: float | None = None) -> Message | None:
        """The next message or event (a ``confluent_kafka.Message``), or ``None`` after ``timeout`` s
        (``None`` or negative: wait)."""
        engine = self._engine if self._join is None else self._joined(report=False)  # failures: after the
        if engine is None and self._join is None:                                   # client's own callbacks
            msg = _KafkaConsumer.poll(self, -1 if timeout is None else timeout)
            if self._auto_commit and time.monotonic() >= self._next_auto_commit:
                self._commit_assigned()
            return msg
        if engine is not None:  # the first slice inline: two cheap checks over the client's poll (bench consume)
            engine.lifecycle.check("this call")
            engine.maintain()
            started = time.monotonic()
            msg = self._read_one(timeout if timeout is not None and 0 <= timeout <= WAIT_SLICE_S else WAIT_SLICE_S)
            if msg is not None or timeout == 0:
                return msg
            if timeout is not None and timeout > 0:  # a record the selector dropped may have come early
                timeout = started + timeout - time.monotonic()
                if timeout <= 0:
                    return None
        return self._in_slices(engine, timeout, self._read_one, None)

    def _read_one(self, wait: float) -> Message | None:
        """One client poll of at most ``wait`` s: a message or event the subscription's selector lets through."""
        msg, selects = _KafkaConsumer.poll(self, wait), self._selects  # while joining, the client serves callbacks
        return msg if msg is not None and (selects is None or msg.error() is not None or selects(msg)) else None

    def consume(self, num_messages: int = 1, timeout: float | None = None) -> list[Message]:
        """Up to ``num_messages`` messages and events, waiting at most ``timeout`` s (``None``/negative:
        until one)."""
        engine = self._joined(report=False)
        if engine is None and self._join is None:
            records = super().consume(num_messages, -1 if timeout is None else timeout)
            if self._auto_commit and time.monotonic() >= self._next_auto_commit:
                self._commit_assigned()
            return records
        if isinstance(num_messages, bool) or not isinstance(num_messages, int) \
                or not 1 <= num_messages <= 1_000_000:
            raise ValueError(f"num_messages must be between 1 and 1000000, got {num_messages!r}")
        native_consume, selects = super().consume, self._selects

        def read(wait: float) -> list[Message]:
            records = native_consume(num_messages, wait)
            return [m for m in records if m.error() is not None or selects(m)] if records and selects else records
        return self._in_slices(engine, timeout, read, [])

    def _in_slices(self, engine: OwnershipEngine | None, timeout: float | None, read: Callable[[float], Any],
                   nothing: Any) -> Any:
        """``read(wait)`` in slices of at most :data:`WAIT_SLICE_S`, the engine's work between them, until it
        returns something or ``timeout`` s passed (``None`` or negative: wait); then ``nothing``."""
        if engine is not None:
            self._running(engine)
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while True:
            if engine is not None:
                engine.maintain()
            got = read(WAIT_SLICE_S if deadline is None
                       else max(0.0, min(WAIT_SLICE_S, deadline - time.monotonic())))
            if got:
                return got
            if engine is None:
                engine = self._joined()  # librdkafka's own reports first, then the join's
            if deadline is not None and time.monotonic() >= deadline:
                return nothing

    def _unmatchable_tag(self, record: Message, error: MalformedRecordError) -> None:
        """A tag that is not UTF-8 matches no expression: skipped as another tag's, and logged (no dead-letter
        topic here: records are the application's, as in confluent-kafka); a stream of them: one warning a minute."""
        self._unmatchable_warning("consumer of group %s skips a record whose tag no expression can match: %s",
                                  self._group, error, extra=record_fields(record))

    # -- assignment --------------------------------------------------------------------------
    def assign(self, partitions: list[TopicPartition]) -> None:
        """Read ``partitions`` (assign mode); inside a subscription: start offsets for owned partitions."""
        if self._engine is None:
            self._ever_assigned = True
            return super().assign(partitions)
        owned = set(self._engine.owned())
        require_owned(partitions, owned, "assign")
        positioned = [tp for tp in partitions if tp.offset != OFFSET_INVALID]
        if positioned:
            super().incremental_unassign([TopicPartition(tp.topic, tp.partition) for tp in positioned])
            super().incremental_assign(positioned)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        """Add ``partitions`` (assign mode); inside a subscription: start offsets for owned partitions."""
        if self._engine is None:
            self._ever_assigned = True
            return super().incremental_assign(partitions)
        return self.assign(partitions)

    def unassign(self) -> None:
        """Stop reading every partition (assign mode); inside ``on_revoke``/``on_lost`` a no-op."""
        if self._engine is None:
            return super().unassign()
        if not self._in_revoke:
            raise KafkaException(KafkaError(KafkaError._STATE, "unassign() while subscribed: partitions belong to "
                                                               "the lock table; call unsubscribe() or close()"))

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        """Stop reading ``partitions`` (assign mode); inside ``on_revoke``/``on_lost`` a no-op."""
        if self._engine is None:
            return super().incremental_unassign(partitions)
        if not self._in_revoke:
            raise KafkaException(KafkaError(KafkaError._STATE,
                                            "incremental_unassign() while subscribed: partitions "
                                            "belong to the lock table; call unsubscribe()"))

    # -- committing --------------------------------------------------------------------------
    def commit(  # type: ignore[override]  # the stub overloads on literal asynchronous; one signature here
            self, message: Message | None = None, offsets: list[TopicPartition] | None = None,
            asynchronous: bool = True) -> list[TopicPartition] | None:
        """As confluent-kafka's: ``message``'s offset + 1, explicit ``offsets``, or the stored offsets.

        As there, only the ``message``'s position is read: one another client consumed is taken too.
        ``asynchronous=False`` waits and returns the committed partitions (each with its error).
        While subscribed, only partitions whose lock this member holds may be committed.

        Raises:
            TypeError: not a confluent-kafka message or offsets list (the words say what to pass).
            KafkaException: a partition is not owned by this member (``_STATE``), nothing to commit
                (``_NO_OFFSET``), or the broker refused.
        """
        self._check_open()
        check_message_or_offsets(message, offsets, "commit")
        kwargs: dict[str, Any] = {"asynchronous": asynchronous}
        if message is not None:
            kwargs["message"] = message
        if offsets is not None:
            kwargs["offsets"] = offsets
        if self._engine is not None:
            owned = set(self._engine.owned())
            if message is not None:
                topic, partition, _ = position_of(message, "commit")
                require_owned([TopicPartition(topic, partition)], owned, "commit")
            elif offsets is not None:
                require_owned(offsets, owned, "commit")
            elif not self._auto_store:
                kwargs["offsets"] = [TopicPartition(*tp, off) for tp, off in self._stored.items() if tp in owned]
        return super().commit(**kwargs)

    def store_offsets(self, message: Message | None = None, offsets: list[TopicPartition] | None = None) -> None:
        """As confluent-kafka's; what is stored is what auto commit and ``commit()`` commit (raises as those)."""
        self._check_open()
        check_message_or_offsets(message, offsets, "store_offsets", required=True)
        if message is not None:
            super().store_offsets(message=message)
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            if topic is not None and partition is not None and offset is not None:  # else a logical offset
                self._stored[(topic, partition)] = offset + 1
        else:
            super().store_offsets(offsets=offsets)
            for tp in offsets or []:
                self._stored[(tp.topic, tp.partition)] = tp.offset

    def auto_commit_offset(self, tp: TP) -> int:
        """The offset auto commit commits for ``tp``: the position, or the stored offset when the
        application stores offsets itself (``enable.auto.offset.store=false``); negative: none."""
        if not self._auto_store:
            return self._stored.get(tp, -1)
        return super().position([TopicPartition(*tp)])[0].offset

    def _commit_assigned(self, asynchronous: bool = True) -> None:
        """librdkafka's auto commit of an assignment: the positions (or stored offsets) that moved."""
        self._next_auto_commit = time.monotonic() + self._commit_every
        offsets = [TopicPartition(tp.topic, tp.partition, self.auto_commit_offset((tp.topic, tp.partition)))
                   for tp in super().assignment()]
        offsets = [tp for tp in offsets
                   if tp.offset >= 0 and self._last_auto.get((tp.topic, tp.partition)) != tp.offset]
        if offsets:
            self._last_auto.update({(tp.topic, tp.partition): tp.offset for tp in offsets})
            commit_offsets(Native(self), offsets, asynchronous)  # confluent-kafka's commit, past our override

    def _on_commit(self, err: Any, partitions: list[TopicPartition]) -> None:
        """Commit results: the engine's bookkeeping first, then the application's ``on_commit``."""
        if self._engine is not None:
            self._engine.on_commit(err, partitions)
        if self._user_on_commit is not None:
            self._user_on_commit(err, partitions)

    # -- state -------------------------------------------------------------------------------
    def memberid(self) -> str | None:  # type: ignore[override]  # librdkafka's is None before a join too
        """This member's id: its name in the Redis membership while subscribed, else librdkafka's (``None``)."""
        if self._engine is not None:
            return self.options.instance_name
        return super().memberid()

    @property
    def metrics(self) -> Any:
        """Always ``None``: the drop-in exposes no series of its own (the engine's are the push consumer's)."""
        return None

    def close(self) -> None:
        """Leave the group gracefully (auto commit: commit what was returned; unlock; leave), then close the
        client."""
        if self._closed:
            return super().close()  # confluent-kafka's own answer to a second close
        try:
            join, self._join = self._join, None
            if join is not None:
                join.cancel()
            if self._engine is not None:
                engine, self._engine = self._engine, None
                engine.close()
            elif self._auto_commit and self._ever_assigned:  # else no call: it may serve librdkafka callbacks
                try:
                    self._commit_assigned(asynchronous=False)
                except KafkaException:
                    pass  # nothing to commit, or the broker is gone: librdkafka's close does not raise either
        finally:
            self._closed = True
            super().close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Consumer closed")  # confluent-kafka's error for a closed consumer

    def _running(self, engine: OwnershipEngine) -> None:
        engine.lifecycle.check("this call")


__all__ = ["Consumer"]
