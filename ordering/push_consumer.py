"""The push consumer: RocketMQ's ``DefaultMQPushConsumer`` on Kafka partitions.

Threads:
    poll thread   owns the confluent-kafka consumer: membership heartbeats, rebalance,
                  lock renewal, fetching, dispatching batches, committing.
    workers       a pool running listeners; they never touch the Kafka client, they
                  advance a batch's position and the poll thread commits.
    listeners     one per Redis node, turning join/leave announcements into a rebalance.

Assignment is ours, not Kafka's group coordinator: live members come from Redis,
an :mod:`allocation <ordering.allocation>` strategy picks this member's partitions,
and the consumer ``assign()``s them. In CLUSTERING mode a partition is fetched only
while this member holds its lock in the Redis lock table; a partition leaving is
first drained (the handler in flight finishes), committed, then unlocked, and the
new owner's lock attempt succeeds only then — so a graceful change re-delivers
nothing.
"""

from __future__ import annotations

import logging
from collections import deque
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from facade.admin import TopicAdmin
from facade.codec import MalformedRecordError, decode, tags_of
from facade.config import Settings
from facade.errors import ConfigError, StateError
from facade.logs import message_fields, record_fields
from facade.message import ConsumeFromWhere, ConsumeStatus, MessageExt, MessageModel
from facade.names import Header
from facade.retry import Reconsumer
from facade.sender import Sender
from facade.tags import TagFilter
from ordering.allocation import AllocationStrategy, Member, strategy_named
from ordering.dispatch import ConcurrentDispatch, Dispatch, contiguous
from ordering.locks import LockTable
from ordering.membership import Membership, MembershipSettings
from ordering.metrics import ConsumerMetrics, PartitionSample
from ordering.options import ConsumerOptions
from ordering.order_keys import PARTITION
from ordering.process_queue import Batch, ProcessQueue

log = logging.getLogger(__name__)

Listener = Callable[[MessageExt], Any]
TP = tuple[str, int]


@dataclass(frozen=True)
class Subscription:
    """One subscribed topic: its tag filter and listener."""

    topic: str
    filter: TagFilter
    listener: Listener


class PushConsumer:
    """Consume topics with RocketMQ semantics; the listener is called once per message.

    Parameters:
        group_id: consumer group.
        config: confluent-kafka settings (``bootstrap.servers`` and any consumer setting).
        redis_urls: the lock table's Redis nodes.
        settings: ready :class:`Settings` instead of ``config``/``redis_urls``.
        orderly: consume in order under the partition locks (``MessageListenerOrderly``): each
            partition serially, or -- with ``order_key="key"`` or a JSON path such as
            ``order_key="$.order.id"`` (an :class:`ConsumerOptions` field) -- each order key
            serially and the keys of a partition in parallel (DDMQ's key-level ordering).
        message_model: CLUSTERING (each message to one member) or BROADCASTING (to all).
        options: :class:`ConsumerOptions`; keyword ``overrides`` replace single fields.
        allocation_strategy: a strategy object (e.g. ``ByConfig``, ``MachineRoomNearby``) instead of
            the named one in ``options.allocation``.

    The listener returns (anything but ``RECONSUME_LATER``) to mean success, or returns
    ``ConsumeStatus.RECONSUME_LATER`` / raises to have the message consumed again later.

    >>> c = PushConsumer("orders-app", {"bootstrap.servers": "..."}, redis_urls=[...])   # doctest: +SKIP
    >>> c.subscribe("orders", handle, expression="created || paid"); c.start()
    """

    def __init__(self, group_id: str, config: dict[str, Any] | None = None, *, redis_urls: list[str] | None = None,
                 settings: Settings | None = None, orderly: bool = False,
                 message_model: MessageModel = MessageModel.CLUSTERING, options: ConsumerOptions | None = None,
                 dispatch: Dispatch | None = None, allocation_strategy: AllocationStrategy | None = None,
                 **overrides: Any) -> None:
        if not group_id or not isinstance(group_id, str):
            raise StateError("group_id must be a non-empty string")
        self.group_id = group_id
        self.settings = settings or Settings.load(config, redis_urls)
        self._consumer_config = {k: v for k, v in (config or {}).items() if k != "bootstrap.servers"}
        fields = (options or ConsumerOptions()).model_dump()
        if message_model is not MessageModel.CLUSTERING or options is None:
            fields["message_model"] = message_model
        try:
            self.options = ConsumerOptions(**{**fields, **overrides})
        except ValueError as exc:  # pydantic's ValidationError names every bad field
            raise ConfigError(f"bad consumer options: {exc}") from exc
        self.orderly = orderly
        self.keyed = self.options.order_key != PARTITION
        if self.keyed and not orderly:
            raise ConfigError(f"order_key={self.options.order_key!r} orders keys; it needs orderly=True")
        self._dispatch_override = dispatch
        self._strategy = allocation_strategy or strategy_named(self.options.allocation)
        self._subs: dict[str, Subscription] = {}
        self._queues: dict[TP, ProcessQueue] = {}
        self._releasing: dict[TP, tuple[ProcessQueue, bool]] = {}  # tp -> (queue, commit when idle)
        self._pending: set[TP] = set()
        self._stalled: deque[Batch] = deque()  # concurrent batches stopped by an expired lock, to run again
        self._members: list[Member] = []
        self._rebalance_now = threading.Event()
        self._stopping = threading.Event()
        self._state = "new"
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        #: Prometheus series of this consumer (``None`` unless ``metrics`` or ``metrics_port`` is set).
        self.metrics: ConsumerMetrics | None = ConsumerMetrics(group_id) if self.options.metrics_enabled else None

    # -- public API ------------------------------------------------------------------
    @property
    def broadcasting(self) -> bool:
        return self.options.message_model is MessageModel.BROADCASTING

    @property
    def instance_name(self) -> str:
        return self.options.instance_name

    def subscribe(self, topic: str, callback: Listener, expression: str = "*") -> None:
        """Consume ``topic`` messages matching the tag ``expression`` with ``callback``.

        Raises:
            TagExpressionError: the expression does not parse.
            TopicNotFoundError: at :meth:`start`, when the topic does not exist.
        """
        if self._state != "new":
            raise StateError("subscribe before start()")
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {type(callback).__name__}")
        self._subs[topic] = Subscription(topic, TagFilter.parse(expression), callback)

    def start(self) -> None:
        """Provision internal topics, join the group and start consuming."""
        if self._state != "new":
            raise StateError(f"consumer is {self._state}; start() works once")
        if not self._subs:
            raise StateError("subscribe to at least one topic before start()")
        self._admin = TopicAdmin(self.settings)
        for topic in self._subs:
            self._admin.partitions(topic)  # raises TopicNotFoundError
        self._sender = Sender(self.settings)
        from delay.routing import retry_backoff  # narrow seam: retries wait in the delay levels (3 + n)

        self._reconsumer = Reconsumer(self._sender, self.group_id, self.options.max_reconsume_times,
                                      retry_router=retry_backoff(self._sender) if self.options.retry_backoff else None)
        if not self.broadcasting:
            self._admin.create_many({self._reconsumer.retry_topic: 1, self._reconsumer.dlq_topic: 1})
        self._kafka = Consumer(self.settings.kafka_config(**{
            "group.id": self._offsets_group(),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            "on_commit": self._on_commit,
            **self._consumer_config,
        }))
        self._pool = ThreadPoolExecutor(self.options.consume_thread_max, thread_name_prefix=f"rk-consume-{self.group_id}")
        self._dispatch = self._dispatch_override or self._default_dispatch()
        self._locks = None if self.broadcasting else LockTable(
            self.settings.require_redis(), self.group_id, self.instance_name, self.settings.keys, self.options.lock_settings())
        self._membership = None if self.broadcasting else Membership(
            self.settings.require_redis(), self.group_id, Member(self.instance_name, self.options.machine_room),
            self.settings.keys, MembershipSettings(self.options.heartbeat_interval_ms, self.options.member_timeout_ms),
            on_change=self._rebalance_now.set)
        self._members = self._membership.join() if self._membership else []
        if self.metrics is not None:
            locks = self._locks
            self.metrics.bind(self._reconsumer.counts, (lambda: locks.lost_total) if locks else (lambda: 0))
            if self.options.metrics_port is not None:
                self.metrics.serve(self.options.metrics_port)
        self._state = "running"
        self._thread = threading.Thread(target=self._run, name=f"rk-poll-{self.group_id}", daemon=True)
        self._thread.start()
        log.info("consumer %s of group %s started (%s)", self.instance_name, self.group_id, self.options.message_model.value)

    def shutdown(self, timeout: float = 30.0) -> None:
        """Leave gracefully: finish handlers in flight, commit, unlock, leave the group."""
        if self._state != "running":
            self._state = "closed"
            return
        self._state = "closing"
        if self._membership:
            self._membership.leave()  # the others rebalance now and wait for our unlocks
        self._stopping.set()
        if self._thread:
            self._thread.join(timeout)
        if hasattr(self._dispatch, "close"):
            self._dispatch.close()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._sender.close()
        if self._locks:
            self._locks.close()
        if self._membership:
            self._membership.close()
        self._kafka.close()
        if self.metrics is not None:
            self.metrics.close()
        self._state = "closed"
        log.info("consumer %s of group %s closed", self.instance_name, self.group_id)

    close = shutdown

    def __enter__(self) -> PushConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def assignment(self) -> set[TP]:
        """Partitions this member owns right now."""
        return set(self._queues)

    def serve_metrics(self, port: int, addr: str = "0.0.0.0") -> int:
        """Serve :attr:`metrics` on ``http://addr:port/metrics``; returns the port (``0`` picks a free one).

        Raises:
            ConfigError: metrics are off (``ConsumerOptions(metrics=True)`` turns them on).
        """
        if self.metrics is None:
            raise ConfigError("metrics are off: pass metrics=True (ConsumerOptions) to collect them")
        return self.metrics.serve(port, addr)

    # -- the poll thread -------------------------------------------------------------
    def _run(self) -> None:
        o = self.options
        now = time.monotonic()
        due = {"heartbeat": now + o.heartbeat_interval_ms / 1000, "rebalance": now, "renew": now + o.lock_renew_interval_ms / 1000,
               "commit": now + o.commit_interval_ms / 1000, "acquire": now}
        try:
            while not self._stopping.is_set():
                now = time.monotonic()
                if now >= due["heartbeat"] and self._membership:
                    due["heartbeat"] = now + o.heartbeat_interval_ms / 1000
                    self._heartbeat()
                if self._rebalance_now.is_set() or now >= due["rebalance"] or (self._pending and now >= due["acquire"]):
                    self._rebalance_now.clear()
                    due["rebalance"] = now + o.rebalance_interval_ms / 1000
                    due["acquire"] = now + o.acquire_retry_ms / 1000
                    self._rebalance()
                if self._locks and now >= due["renew"]:
                    due["renew"] = now + o.lock_renew_interval_ms / 1000
                    self._renew()
                self._finish_releases()
                self._fetch_and_dispatch()
                if now >= due["commit"]:
                    due["commit"] = now + o.commit_interval_ms / 1000
                    self._commit(list(self._queues.values()), asynchronous=True)
                    if self.metrics is not None:
                        self._publish_metrics()
            self._release_all()
            if self.metrics is not None:
                self.metrics.publish_retired()
        except BaseException as exc:  # never die silently
            self._error = exc
            log.exception("consumer %s poll thread failed", self.instance_name)

    def _heartbeat(self) -> None:
        members = self._membership.refresh(self._members)
        if members is not None:
            self._members = members
            self._rebalance_now.set()

    def _topics(self) -> list[str]:
        # orderly consumption retries in place (never skips ahead), so it has no retry topic to read
        retries = self.options.consume_retry_topic and not (self.broadcasting or self.orderly)
        return list(self._subs) + ([self._reconsumer.retry_topic] if retries else [])

    def _rebalance(self) -> None:
        target: set[TP] = set()
        for topic in self._topics():
            partitions = [(topic, p) for p in range(self._admin.partitions(topic))]
            if self.broadcasting:
                target.update(partitions)
            else:
                target.update(self._strategy.allocate(self.group_id, self.instance_name, partitions, self._members))
        for tp in [tp for tp in self._queues if tp not in target]:
            self._release(tp, commit=True)
        wanted = target - self._queues.keys() - self._releasing.keys()
        self._pending = set()
        if not wanted:
            return
        won = self._locks.lock_batch(wanted) if self._locks else {tp: None for tp in wanted}
        if won:
            self._assign({tp: (held.fencing_token if held else None) for tp, held in won.items()})
        self._pending = wanted - won.keys()

    def _assign(self, won: dict[TP, int | None]) -> None:
        committed = self._kafka.committed([TopicPartition(t, p) for t, p in won], timeout=10)
        assigned = []
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else self._start_offset(tp.topic, tp.partition)
            assigned.append(TopicPartition(tp.topic, tp.partition, offset))
            self._queues[(tp.topic, tp.partition)] = ProcessQueue(
                tp.topic, tp.partition, offset, won[(tp.topic, tp.partition)], serial=self.orderly and not self.keyed,
                keyed=self.keyed, committed=tp.offset)
        self._kafka.incremental_assign(assigned)
        log.info("%s took %s", self.instance_name, sorted(won))

    def _start_offset(self, topic: str, partition: int) -> int:
        where = self.options.consume_from_where
        if where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET:
            # librdkafka's OFFSET_END follows ListOffsets "latest", which some brokers (Tansu) get
            # wrong after batched produce; the high watermark is the same figure, asked once.
            return self._kafka.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)[1]
        if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            found = self._kafka.offsets_for_times([TopicPartition(topic, partition, self.options.consume_timestamp_ms)], timeout=10)
            return found[0].offset if found[0].offset >= 0 else OFFSET_BEGINNING
        return OFFSET_BEGINNING

    def _release(self, tp: TP, commit: bool) -> None:
        """Stop fetching ``tp``; it is committed and unlocked once drained (see ProcessQueue.drop).

        Without a valid lock (it expired while this process stalled) nothing more runs and
        nothing is committed: the next owner may have moved on, and our commit would rewind it.
        """
        pq = self._queues.pop(tp)
        if commit and self._locks and not self._locks.is_held(tp):
            commit = False
        pq.drop() if commit else pq.revoke()
        self._kafka.incremental_unassign([TopicPartition(*tp)])
        self._releasing[tp] = (pq, commit)

    def _finish_releases(self) -> None:
        for tp, (pq, commit) in list(self._releasing.items()):
            if not pq.drained():
                continue
            if commit:
                self._commit([pq], asynchronous=False)
            if self._locks:
                self._locks.unlock_batch([tp])
            if self.metrics is not None:
                pq.commit_point()  # counts its finished batches
                self.metrics.retire(tp, pq.finished)
            del self._releasing[tp]
            log.info("%s released %s", self.instance_name, tp)

    def _release_all(self) -> None:
        for tp in list(self._queues):
            self._release(tp, commit=True)
        deadline = time.monotonic() + 30
        while self._releasing and time.monotonic() < deadline:
            self._finish_releases()
            time.sleep(0.005)

    def _renew(self) -> None:
        """Renew every lock in one round, writing each partition's transition state (DeFiBus).

        The entry records ``delivered`` (fetched, or the cut while leaving) and ``acked``
        (the commit point): a queue is free for its next owner when the two meet and the
        owner unlocks, or when the lease runs out.
        """
        for tp, pq in [*self._queues.items(), *((tp, pq) for tp, (pq, _) in self._releasing.items())]:
            acked = pq.commit_point()
            if acked >= 0:
                self._locks.record_progress(tp, max(pq.delivered(), acked), acked)
        for tp in self._locks.renew_batch():
            log.warning("%s lost the lock of %s; stops consuming it", self.instance_name, tp)
            if tp in self._queues:
                self._release(tp, commit=False)  # the new owner may have moved on: our commit could rewind it
                self._rebalance_now.set()
            elif tp in self._releasing:  # lost while draining: stop, and never commit
                pq, _ = self._releasing[tp]
                pq.revoke()
                self._releasing[tp] = (pq, False)

    def _publish_metrics(self) -> None:
        """Snapshot every partition for :attr:`metrics` (poll thread: it alone touches the client and queues)."""
        metrics, locks, samples = self.metrics, self._locks, {}
        for tp, pq in self._queues.items():
            point = pq.commit_point()
            # the cached high watermark is the one the last fetch brought, which every broker gets right
            high = self._kafka.get_watermark_offsets(TopicPartition(*tp), cached=True)[1]
            lag = max(0, high - point) if high >= 0 and point >= 0 else 0 if high == 0 else None
            samples[tp] = PartitionSample(lag, pq.buffered(), locks.is_held(tp) if locks else None,
                                          metrics.retired(tp) + pq.finished)
        for tp in self._pending:
            samples[tp] = PartitionSample(None, 0, False, metrics.retired(tp))
        metrics.publish(samples)

    def _fetch(self, timeout: float) -> list[Any]:
        """What is fetched already, else the first record within ``timeout`` s and what came with it.

        ``Consumer.consume(n, timeout)`` waits the whole timeout unless ``n`` records arrive,
        which would delay every record of a light stream by up to the timeout.
        """
        records = self._kafka.consume(self.options.pull_batch_size, 0)
        if records:
            return records
        first = self._kafka.poll(timeout)
        if first is None:
            return []
        return [first, *self._kafka.consume(self.options.pull_batch_size - 1, 0)] if self.options.pull_batch_size > 1 else [first]

    def _fetch_and_dispatch(self) -> None:
        # while a partition is paused, nothing wakes this thread when its buffer drains: look often
        paused = any(pq.paused for pq in self._queues.values())
        records = self._fetch(0.005 if paused else 0.05 if self._queues else 0.1)
        if not records:
            self._dispatch.tick()
            self._resume_stalled()
            self._flow_control()  # every partition may be paused: only this resumes them
            return
        fetched: dict[TP, list[Any]] = {}
        for record in records:
            if record.error() is not None:
                if record.error().code() != KafkaError._PARTITION_EOF:
                    log.warning("fetch error: %s", record.error())
                continue
            tp = (record.topic(), record.partition())
            pq = self._queues.get(tp)
            if pq is not None and (pq.next_offset < 0 or record.offset() >= pq.next_offset):
                fetched.setdefault(tp, []).append(record)
        size = self.options.consume_batch_size
        chunk = getattr(self._dispatch, "chunk", contiguous)
        for tp, recs in fetched.items():
            pq = self._queues[tp]
            for batch in [pq.add(group, key) for key, group in chunk(recs, size)]:
                self._dispatch.submit(batch)
        self._dispatch.tick()
        self._resume_stalled()
        self._flow_control()

    def _resume_stalled(self) -> None:
        """Re-run batches a worker left when the lock's client-side expiry passed but the lock was kept.

        A lock that was really lost revokes its queue (``_renew``), and its batches are dropped here;
        one whose renewal came late is valid again, and its unfinished batches must not be stranded,
        or the commit point would stop at them for good.
        """
        for _ in range(len(self._stalled)):
            batch = self._stalled.popleft()
            pq = batch.queue
            if pq.dropped or batch.done:
                continue
            if self._locks is None or self._locks.is_held(pq.tp):
                self._dispatch.submit(batch)
            else:
                self._stalled.append(batch)

    def _flow_control(self) -> None:
        limit = self.options.pull_threshold_per_partition
        pause, resume = [], []
        for pq in self._queues.values():
            buffered = pq.buffered()
            if not pq.paused and buffered > limit:
                pq.paused = True
                pause.append(TopicPartition(pq.topic, pq.partition))
            elif pq.paused and buffered <= limit // 2:
                pq.paused = False
                resume.append(TopicPartition(pq.topic, pq.partition))
        if pause:
            self._kafka.pause(pause)
        if resume:
            self._kafka.resume(resume)

    def _commit(self, queues: list[ProcessQueue], asynchronous: bool) -> None:
        offsets = []
        for pq in queues:
            if pq.revoked or (self._locks and not self._locks.is_held(pq.tp)):
                continue  # only the valid lock holder commits
            point = pq.commit_point()
            if point >= 0 and point != pq.committed:
                if pq.fencing_token is None:  # broadcasting: no lock
                    offsets.append(TopicPartition(pq.topic, pq.partition, point))
                else:  # the token travels with the commit, for auditors and brokers that keep metadata
                    offsets.append(TopicPartition(pq.topic, pq.partition, point,
                                                  metadata=f"{Header.FENCING_TOKEN}={pq.fencing_token}"))
                pq.committed = point
        if offsets:
            try:
                self._kafka.commit(offsets=offsets, asynchronous=asynchronous)
            except Exception as exc:  # retried at the next interval
                log.warning("commit failed: %s", exc)
                for pq in queues:
                    pq.committed = -1

    def _on_commit(self, err: Any, partitions: list[TopicPartition]) -> None:
        """Commit results (served on the poll thread): a failed commit is sent again at the next interval."""
        failed = [tp for tp in partitions if err is not None or tp.error is not None]
        for tp in failed:
            pq = self._queues.get((tp.topic, tp.partition))
            if pq is not None:
                pq.committed = -1
        if failed:
            log.warning("commit of %d partitions failed (%s); retrying", len(failed), err or failed[0].error)

    # -- workers ---------------------------------------------------------------------
    def _default_dispatch(self) -> Dispatch:
        if self.keyed:
            from ordering.key_ordered import KeyOrderedDispatch
            from ordering.order_keys import order_key_of

            return KeyOrderedDispatch(self, order_key_of(self.options.order_key))
        if self.orderly:
            from ordering.orderly import OrderlyDispatch

            return OrderlyDispatch(self)
        return ConcurrentDispatch(self._pool, self.run_batch)

    def may_consume(self, pq: ProcessQueue) -> bool:
        """True while ``pq`` is ours: not revoked and (clustering) its lock is held and unexpired."""
        return not pq.revoked and (self._locks is None or time.monotonic() < self._locks.valid_until(pq.tp))

    def run_batch(self, batch: Batch) -> None:
        """Handle a batch front to back (worker thread); stops at once when the lock is lost or expires.

        The hot loop of concurrent mode: the lock's expiry is read once and re-read only when
        the clock passes it (a renewal moves it later; a loss revokes the queue).
        """
        pq = batch.queue
        if not pq.admit(batch):
            return
        locks, monotonic, records = self._locks, time.monotonic, batch.records
        valid_until = locks.valid_until(pq.tp) if locks else float("inf")
        try:
            for i in range(batch.index, len(records)):
                if pq.revoked:
                    return
                if monotonic() >= valid_until:
                    valid_until = locks.valid_until(pq.tp)
                    if monotonic() >= valid_until:
                        self._stalled.append(batch)  # the poll thread re-runs it once the lock is valid again
                        return
                self.consume_record(records[i])
                batch.advance(i)
        finally:
            batch.running = False

    def subscription_of(self, record: Any) -> tuple[Subscription | None, str]:
        """The subscription a record belongs to, and the topic the listener should see."""
        topic = record.topic()
        sub = self._subs.get(topic)
        if sub is None:  # a retry copy: it belongs to its original topic
            for name, value in record.headers() or ():
                if name == Header.ORIGIN_TOPIC and value is not None:
                    topic = value.decode("utf-8", "replace")
                    sub = self._subs.get(topic)
        return sub, topic

    def prepare(self, record: Any) -> tuple[Subscription, MessageExt] | None:
        """The listener and decoded message for ``record``, or None when it is filtered out or malformed.

        Malformed records and retry copies of unknown topics are dead-lettered here.
        """
        topic = record.topic()
        sub = self._subs.get(topic)
        if sub is None:  # a retry copy (or a stranger)
            sub, topic = self.subscription_of(record)
        if sub is None:
            self._dead_letter_raw(record, MalformedRecordError(record.topic(), record.partition(), record.offset(),
                                                               "retry copy of a topic this group does not subscribe"))
            return None
        if not sub.filter.matches_all and not sub.filter.matches(tags_of(record)):
            return None  # filtered out; its offset still commits
        try:
            msg = decode(record)
        except MalformedRecordError as exc:
            self._dead_letter_raw(record, exc)
            return None
        if msg.topic != topic:
            msg.topic = topic  # a retry copy is seen under its original topic
        return sub, msg

    def consume_record(self, record: Any) -> None:
        """Concurrent mode: hand one record to its listener; failures go to the retry topic (clustering)."""
        prepared = self.prepare(record)
        if prepared is None:
            return
        sub, msg = prepared
        try:
            status = sub.listener(msg)
            error = None if status is not ConsumeStatus.RECONSUME_LATER else "listener returned RECONSUME_LATER"
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.info("listener failed on %s: %s", msg.id, error, extra=message_fields(msg))
        if error is not None and not self.broadcasting:  # broadcasting drops failures, as RocketMQ
            self.write_durably(lambda: self._reconsumer.send_back(msg, error))

    def dead_letter(self, msg: MessageExt, reason: str) -> None:
        """Write ``msg`` to the group's dead-letter topic, retrying until it is durable."""
        self.write_durably(lambda: self._reconsumer.dead_letter(msg, reason))

    def _dead_letter_raw(self, record: Any, error: MalformedRecordError) -> None:
        if not self.broadcasting:
            self.write_durably(lambda: self._reconsumer.dead_letter_raw(record, error))
        else:
            log.error("dropping malformed record: %s", error, extra=record_fields(record))

    def write_durably(self, write: Callable[[], Any]) -> None:
        """A failed message's copy must be durable before its offset may commit: retry, never skip."""
        delay = 0.1
        while True:
            try:
                write()
                return
            except Exception as exc:
                if self._stopping.is_set():
                    raise
                log.warning("could not write retry/dead-letter copy (%s); retrying in %.1f s", exc, delay)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _offsets_group(self) -> str:
        # broadcasting: every member keeps its own progress (RocketMQ's local offset store)
        return f"{self.group_id}.bcast.{self.instance_name}" if self.broadcasting else self.group_id
