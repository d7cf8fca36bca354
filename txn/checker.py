"""The transaction checker (RocketMQ's ``TransactionalMessageCheckService``), as a scalable sidecar.

Each instance joins the checker's system group (membership in Redis), takes its share
of the half partitions by the consumers' allocation strategy, and holds each one in
the Redis lock table while it works on it; half partition ``p`` comes with op
partition ``p``. One thread owns the Kafka consumer and producer.

Per owned partition, every ``check_interval_ms`` while halves are waiting, a *scan*::

    1. write a probe op record and read the op partition up to it: every op acked before
       the scan began is now in the ledger (no check-back for a half already ended)
    2. walk the halves from the half progress (txn.matching.decide):
         closed by an op (this copy or another copy of its transaction)  -> done
         stored after the scan began, or younger than the timeout       -> stop the scan
         checked max_check_times times                                 -> max-check topic
         otherwise                                                     -> check back
    3. halves to check whose transaction has an end marker in Redis are done too
    4. re-write the rest to the half topic (check times + 1, born time kept), and once
       those copies are acked, publish the check requests to each group's check topic
    5. commit the half progress past everything decided and the op progress up to the
       first op still waiting for its half

Steps 2-5 repeat in steps of ``step_halves`` until the scan stops, so a long backlog
commits as it goes; check requests are fire-and-forget (a slow or dead producer never
stalls a scan). A failed write of a copy resets the partition to its committed progress
(its halves are decided again; duplicates of copies are closed by transaction id).

On SIGTERM (:meth:`TransactionChecker.stop`) the step in progress finishes, progress is
committed, locks are released and the member leaves, so another instance takes over at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from facade.admin import TopicAdmin
from facade.codec import MalformedRecordError
from facade.config import Settings
from facade.errors import StateError
from facade.logs import record_fields
from facade.names import Header
from facade.sender import Record, Sender
from ordering.allocation import Member, strategy_named
from ordering.locks import LockTable
from ordering.membership import Membership
from txn.end import produce_all
from txn.markers import EndMarkers
from txn.matching import Decision, HalfOpLedger, decide
from txn.metrics import CheckerMetrics
from txn.options import CheckerOptions
from txn.records import OP_COMMIT, OP_ROLLBACK, HalfMessage, OpRecord, probe_record, provision

log = logging.getLogger(__name__)

_ACQUIRE_RETRY_S = 0.5
_PROBE_PATIENCE_S = 30.0
_IDLE_COMMIT_S = 1.0


@dataclass
class CheckerStats:
    """Counters since start (and, at :meth:`TransactionChecker.stats`, gauges of the moment)."""

    scans: int = 0
    steps: int = 0
    done_by_op: int = 0
    closed_by_transaction: int = 0
    closed_by_marker: int = 0
    checks_sent: int = 0
    check_requests_lost: int = 0
    rewritten: int = 0  # halves re-written with one more check (each then checked back)
    max_checked: int = 0
    malformed: int = 0
    ended_commit: int = 0  # op records read that commit a transaction
    ended_rollback: int = 0  # op records read that roll one back
    locks_lost: int = 0
    resets: int = 0
    commits: int = 0
    partitions_owned: int = 0
    buffered_halves: int = 0
    peak_buffered_halves: int = 0
    waiting_ops: int = 0


@dataclass(eq=False)
class _Scan:
    start_ms: int
    started: float  # monotonic
    probe_offset: int | None = None
    probe_error: str | None = None


@dataclass(eq=False)
class _Partition:
    """One owned half partition with its op partition."""

    index: int
    ledger: HalfOpLedger
    committed: tuple[int, int]  # (half, op) progress last committed
    halves: deque = field(default_factory=deque)
    paused: bool = False
    scan: _Scan | None = None
    next_scan: float = 0.0  # monotonic


class TransactionChecker:
    """Checks back half messages that were not ended in time.

    Parameters:
        settings: broker, Redis nodes, topic and key prefixes.
        options: :class:`CheckerOptions`; keyword ``overrides`` replace single fields.

    >>> with TransactionChecker(Settings.load(), transaction_timeout_ms=6000) as checker:   # doctest: +SKIP
    ...     serve_forever()
    """

    def __init__(self, settings: Settings, options: CheckerOptions | None = None, **overrides: Any) -> None:
        base = options or CheckerOptions()
        self.options = CheckerOptions.model_validate({**base.model_dump(), **overrides}) if overrides else base
        self.settings = settings
        self.topics = settings.topics
        self.group = self.topics.txn_checker_group()
        self._half, self._op = self.topics.half(), self.topics.op()
        self._parts: dict[int, _Partition] = {}
        self._stats = CheckerStats()
        self._stop = threading.Event()
        self._rebalance_now = threading.Event()
        self._state = "new"
        self._thread: threading.Thread | None = None
        self._opened = threading.Event()
        self._error: BaseException | None = None
        self._check_topics: set[str] = set()
        #: Prometheus series read from :meth:`stats` at scrape time (``metrics.serve(port)`` exposes them).
        self.metrics = CheckerMetrics(self)

    # -- lifecycle -------------------------------------------------------------------
    @property
    def instance_name(self) -> str:
        return self.options.instance_name

    def start(self) -> TransactionChecker:
        """Run in a background thread; returns once the checker has joined its group."""
        if self._state != "new":
            raise StateError(f"checker is {self._state}; start() works once")
        self._thread = threading.Thread(target=self.run, name="rk-txn-checker", daemon=True)
        self._thread.start()
        self._opened.wait(60)
        if self._error is not None:
            raise self._error
        return self

    def run(self) -> None:
        """Run in this thread until :meth:`stop` (the service's main loop)."""
        if self._state != "new":
            raise StateError(f"checker is {self._state}; run() works once")
        self._state = "running"
        try:
            self._open()
        except BaseException as exc:
            self._error = exc
            self._state = "closed"
            raise
        finally:
            self._opened.set()
        try:
            self._loop()
        finally:
            self._close()

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the step in progress, commit, release the partitions, leave the group."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self.metrics.close()

    def __enter__(self) -> TransactionChecker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def assignment(self) -> set[int]:
        """Half partitions this instance owns right now."""
        return set(self._parts)

    def stats(self) -> CheckerStats:
        """A snapshot of the counters and gauges."""
        snapshot = CheckerStats(**asdict(self._stats))
        parts = list(self._parts.values())
        snapshot.partitions_owned = len(parts)
        snapshot.buffered_halves = sum(len(p.halves) for p in parts)
        snapshot.waiting_ops = sum(p.ledger.waiting_ops for p in parts)
        locks = getattr(self, "_locks", None)
        snapshot.locks_lost = locks.lost_total if locks is not None else 0
        return snapshot

    @property
    def half_partitions(self) -> int:
        """Partitions of the half topic (0 until the checker has opened)."""
        return getattr(self, "_partitions", 0)

    # -- opening and closing -----------------------------------------------------------
    def _open(self) -> None:
        o, s = self.options, self.settings
        self._admin = TopicAdmin(s)
        self._partitions = provision(self._admin, self.topics, o.half_partitions, o.check_partitions)
        self._sender = Sender(s)
        self._markers = EndMarkers(s.require_redis(), s.keys, 1)
        self._kafka = Consumer(s.kafka_config(**{
            "group.id": self.group, "enable.auto.commit": False, "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest", "fetch.wait.max.ms": o.fetch_wait_ms,
            "isolation.level": "read_committed" if o.read_committed else "read_uncommitted"}))
        self._locks = LockTable(s.require_redis(), self.group, o.instance_name, s.keys, o.lock_settings())
        self._membership = Membership(s.require_redis(), self.group, Member(o.instance_name), s.keys,
                                      o.membership_settings(), on_change=self._rebalance_now.set)
        self._strategy = strategy_named(o.allocation)
        self._members = self._membership.join()
        log.info("transaction checker %s joined (%d half partitions)", o.instance_name, self._partitions)

    def _close(self) -> None:
        self._state = "closing"
        for part in list(self._parts.values()):
            try:
                self._release(part, graceful=True)
            except Exception:
                log.exception("releasing half partition %d failed", part.index)
        for close in (self._locks.close, self._membership.leave, self._kafka.close, self._sender.close,
                      self._markers.close):
            try:
                close()
            except Exception:
                log.exception("closing the checker failed")
        self._state = "closed"
        log.info("transaction checker %s stopped", self.instance_name)

    # -- the loop ----------------------------------------------------------------------
    def _loop(self) -> None:
        o = self.options
        now = time.monotonic()
        due = {"heartbeat": now + o.heartbeat_interval_ms / 1000, "rebalance": now, "commit": now + _IDLE_COMMIT_S}
        while not self._stop.is_set():
            try:
                now = time.monotonic()
                if now >= due["heartbeat"]:
                    due["heartbeat"] = now + o.heartbeat_interval_ms / 1000
                    self._heartbeat()
                if self._rebalance_now.is_set() or now >= due["rebalance"]:
                    self._rebalance_now.clear()
                    due["rebalance"] = now + o.rebalance_interval_ms / 1000
                    if not self._rebalance():
                        due["rebalance"] = now + _ACQUIRE_RETRY_S
                if self._locks.renew_due():
                    for tp in self._locks.renew_batch():
                        if tp[1] in self._parts:
                            log.warning("%s lost the lock of half partition %d", self.instance_name, tp[1])
                            self._release(self._parts[tp[1]], graceful=False)
                            self._rebalance_now.set()
                self._fetch()
                self._sender.kafka.poll(0)
                for part in list(self._parts.values()):
                    self._advance(part)
                if now >= due["commit"]:
                    due["commit"] = now + _IDLE_COMMIT_S
                    for part in list(self._parts.values()):
                        if part.scan is None:
                            self._commit(part)
            except Exception:  # a service never dies of one bad iteration
                log.exception("transaction checker iteration failed")
                self._stop.wait(0.5)

    def _heartbeat(self) -> None:
        members = self._membership.refresh(self._members)
        if members is not None:
            self._members = members
            self._rebalance_now.set()

    # -- ownership ---------------------------------------------------------------------
    def _rebalance(self) -> bool:
        """Release partitions no longer ours, lock new ones; False while some are still held elsewhere."""
        every = [(self._half, p) for p in range(self._partitions)]
        target = {tp[1] for tp in self._strategy.allocate(self.group, self.instance_name, every, self._members)}
        for p in [p for p in self._parts if p not in target]:
            self._release(self._parts[p], graceful=True)
        wanted = target - self._parts.keys()
        if not wanted:
            return True
        won = self._locks.lock_batch([(self._half, p) for p in sorted(wanted)])
        for tp in sorted(won):
            self._take(tp[1])
        return len(won) == len(wanted)

    def _take(self, p: int) -> None:
        half_tp, op_tp = TopicPartition(self._half, p), TopicPartition(self._op, p)
        committed = self._kafka.committed([half_tp, op_tp], timeout=10)
        half_off, op_off = (tp.offset if tp.offset >= 0 else self._low(tp) for tp in committed)
        self._kafka.incremental_assign([TopicPartition(self._half, p, half_off), TopicPartition(self._op, p, op_off)])
        self._parts[p] = _Partition(p, HalfOpLedger(half_off, op_off, self.options.closed_cache_size), (half_off, op_off))
        log.info("%s took half partition %d (half progress %d, op progress %d)", self.instance_name, p, half_off, op_off)

    def _low(self, tp: TopicPartition) -> int:
        return max(self._kafka.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10)[0], 0)

    def _release(self, part: _Partition, graceful: bool) -> None:
        """Stop working on ``part``: commit first when leaving gracefully (never after the lock was lost)."""
        if graceful:
            self._commit(part)
        self._parts.pop(part.index, None)
        self._kafka.incremental_unassign([TopicPartition(self._half, part.index), TopicPartition(self._op, part.index)])
        if graceful:
            self._locks.unlock_batch([(self._half, part.index)])
        log.info("%s released half partition %d", self.instance_name, part.index)

    # -- fetching ----------------------------------------------------------------------
    def _fetch(self) -> None:
        for record in self._kafka.consume(1000, 0.02 if self._parts else 0.1):
            if record.error() is not None:
                continue
            part = self._parts.get(record.partition())
            if part is None:
                continue
            if record.topic() == self._half:
                if record.offset() >= part.ledger.half_next and (not part.halves or record.offset() > part.halves[-1].offset()):
                    part.halves.append(record)
            else:
                op = OpRecord.parse(record)
                if op.half_offset is not None and op.offset >= part.ledger.op_read_next:  # not a re-read
                    if op.state == OP_COMMIT:
                        self._stats.ended_commit += 1
                    elif op.state == OP_ROLLBACK:
                        self._stats.ended_rollback += 1
                part.ledger.add_op(op.offset, op.half_offset, op.transaction_id)
        self._flow_control()

    def _flow_control(self) -> None:
        limit = self.options.max_buffered_halves
        total = 0
        for part in self._parts.values():
            n = len(part.halves)
            total += n
            if not part.paused and n >= limit:
                part.paused = True
                self._kafka.pause([TopicPartition(self._half, part.index)])
            elif part.paused and n <= limit // 2:
                part.paused = False
                self._kafka.resume([TopicPartition(self._half, part.index)])
        self._stats.peak_buffered_halves = max(self._stats.peak_buffered_halves, total)

    # -- scans -------------------------------------------------------------------------
    def _advance(self, part: _Partition) -> None:
        now = time.monotonic()
        scan = part.scan
        if scan is None:
            if part.halves and now >= part.next_scan:
                self._begin_scan(part)
            return
        if scan.probe_error is not None or (scan.probe_offset is None and now - scan.started > _PROBE_PATIENCE_S):
            log.warning("probe of op partition %d failed (%s); scanning later", part.index, scan.probe_error or "timeout")
            part.scan, part.next_scan = None, now + _ACQUIRE_RETRY_S
            return
        if scan.probe_offset is None or part.ledger.op_read_next <= scan.probe_offset:
            return  # ops not read up to the probe yet
        self._step(part)

    def _begin_scan(self, part: _Partition) -> None:
        scan = part.scan = _Scan(int(time.time() * 1000), time.monotonic())
        self._stats.scans += 1

        def probed(err: Any, msg: Any) -> None:
            if err is not None:
                scan.probe_error = err.str()
            else:
                scan.probe_offset = msg.offset()

        self._sender.produce(probe_record(self.topics, part.index), probed)

    def _step(self, part: _Partition) -> None:
        """Decide up to ``step_halves`` halves, write what they need, commit; end the scan when it stops."""
        o, scan = self.options, part.scan
        now_ms = int(time.time() * 1000)
        decided: list[tuple[int, Decision, HalfMessage | None, Any]] = []
        stopped = False
        while part.halves and len(decided) < o.step_halves:
            record = part.halves[0]
            try:
                half = HalfMessage.from_half_record(record)
            except MalformedRecordError as exc:
                log.error("moving a malformed half to the max-check topic: %s", exc, extra=record_fields(record))
                decided.append((record.offset(), Decision.MAX_CHECK, None, record))
                part.halves.popleft()
                continue
            decision = decide(part.ledger, half.half_offset, half.transaction_id, half.born_ms, half.stored_ms,
                              half.check_times, now_ms, scan.start_ms, o.transaction_timeout_ms, o.max_check_times)
            if decision is Decision.WAIT:
                stopped = True
                break
            part.halves.popleft()
            decided.append((half.half_offset, decision, half, record))
        if decided and not self._act(part, decided):
            return
        for offset, _, _, _ in decided:
            part.ledger.pass_half(offset)
        self._stats.steps += 1
        self._commit(part)
        if stopped or (not part.halves and self._at_end(part)):
            part.scan = None
            part.next_scan = scan.started + o.check_interval_ms / 1000

    def _act(self, part: _Partition, decided: list[tuple[int, Decision, HalfMessage | None, Any]]) -> bool:
        """Write the copies, max-check records and check requests ``decided`` needs; False after a reset."""
        due = [h for _, d, h, _ in decided if h is not None and d in (Decision.CHECK, Decision.MAX_CHECK)]
        ended = self._markers.lookup((h.producer_group, h.transaction_id) for h in due) if due else {}
        checks: list[HalfMessage] = []
        parked: list[Record] = []
        for _, decision, half, record in decided:
            if decision is Decision.DONE:
                self._stats.done_by_op += 1
            elif decision is Decision.CLOSED:
                self._stats.closed_by_transaction += 1
            elif half is None:
                self._stats.malformed += 1
                parked.append(_raw_copy(record, self.topics.max_check()))
            elif (half.producer_group, half.transaction_id) in ended:
                self._stats.closed_by_marker += 1
            elif decision is Decision.MAX_CHECK:
                log.warning("transaction %s of group %s checked %d times: moved to %s", half.transaction_id,
                            half.producer_group, half.check_times, self.topics.max_check(),
                            extra=_half_fields(half))
                self._stats.max_checked += 1
                parked.append(half.max_check_record(self.topics))
            else:
                checks.append(half)
        if not checks and not parked:
            return True
        timeout = self.options.transaction_timeout_ms / 1000 + 30
        written = produce_all(self._sender, [h.copy_record(self.topics) for h in checks] + parked, timeout)
        failed = [d.error for d in written if d.error is not None]
        if failed:
            log.warning("re-writing %d half(s) of partition %d failed (%s); resetting it to its committed progress",
                        len(failed), part.index, failed[0])
            self._reset(part)
            return False
        self._stats.rewritten += len(checks)
        self._ensure_check_topics({h.producer_group for h in checks})
        requests = [h.check_request(self.topics, d.partition, d.offset) for h, d in zip(checks, written)]
        lost = [d.error for d in produce_all(self._sender, requests, timeout) if d.error is not None]
        if lost:  # their copies are checked at the next scan, one check later
            log.warning("%d check request(s) not sent (%s)", len(lost), lost[0])
        self._stats.checks_sent += len(requests) - len(lost)
        if log.isEnabledFor(logging.DEBUG):  # one line per check-back: debugging only
            for h in checks:
                log.debug("checking back transaction %s (check %d)", h.transaction_id, h.check_times + 1,
                          extra=_half_fields(h))
        self._stats.check_requests_lost += len(lost)
        return True

    def _ensure_check_topics(self, groups: set[str]) -> None:
        missing = {self.topics.check_request(g) for g in groups} - self._check_topics
        if missing:
            self._admin.create_many({t: self.options.check_partitions for t in missing})
            self._check_topics |= missing

    def _at_end(self, part: _Partition) -> bool:
        """True when nothing after the half progress was fetched or is known to exist."""
        high = self._kafka.get_watermark_offsets(TopicPartition(self._half, part.index), cached=True)[1]
        return high < 0 or part.ledger.half_next >= high

    def _commit(self, part: _Partition) -> None:
        """Commit the half and op progress of ``part`` (only while its lock is held)."""
        progress = (part.ledger.half_next, part.ledger.op_commit_point())
        if progress == part.committed or not self._locks.is_held((self._half, part.index)):
            return
        try:
            self._kafka.commit(offsets=[TopicPartition(self._half, part.index, progress[0]),
                                        TopicPartition(self._op, part.index, progress[1])], asynchronous=False)
            part.committed = progress
            self._stats.commits += 1
        except Exception as exc:
            log.warning("committing partition %d failed (%s); retried later", part.index, exc)

    def _reset(self, part: _Partition) -> None:
        """Forget everything read since the last commit and read again from there."""
        self._stats.resets += 1
        half_off, op_off = part.committed
        tps = [TopicPartition(self._half, part.index), TopicPartition(self._op, part.index)]
        self._kafka.incremental_unassign(tps)
        self._kafka.incremental_assign([TopicPartition(self._half, part.index, half_off),
                                        TopicPartition(self._op, part.index, op_off)])
        self._parts[part.index] = _Partition(part.index, HalfOpLedger(half_off, op_off, self.options.closed_cache_size),
                                             part.committed, next_scan=time.monotonic() + _ACQUIRE_RETRY_S)


def _half_fields(half: HalfMessage) -> dict[str, Any]:
    """Log ``extra=`` fields naming a half."""
    return {"msg_id": half.msg_id, "transaction_id": half.transaction_id, "producer_group": half.producer_group,
            "topic": half.real_topic, "half_partition": half.half_partition, "half_offset": half.half_offset}


def _raw_copy(record: Any, topic: str) -> Record:
    headers = list(record.headers() or []) + [(Header.DLQ_REASON, b"malformed half message")]
    return Record(topic, -1, record.key(), record.value() or b"", headers,
                  f"{record.topic()}@{record.partition()}@{record.offset()}")
