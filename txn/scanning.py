"""One owned half partition of the transaction checker, and the scans that decide its halves.

The checker owns half partition ``p`` under its lock and reads op partition ``p`` with
it (a claim over both). Every ``check_interval_ms`` while halves wait, a *scan*::

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
    5. the half progress moves past everything decided; the op progress stays at the
       first op still waiting for its half (the engine commits both)

Steps 2-5 repeat in steps of ``step_halves`` until the scan stops, so a long backlog
commits as it goes; check requests are fire-and-forget (a slow or dead producer never
stalls a scan). A failed write of a copy resets the partition to its committed progress
(its halves are decided again; duplicates of copies are closed by transaction id), and so
does a check-request topic this principal may neither see nor create (told once a minute).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rocketkafka.errors import AuthorizationError, ConfigError, MalformedRecordError, SendError
from rocketkafka.logs import record_fields
from rocketkafka.names import Header, TopicNames, group_name_problem, is_valid_topic_name
from rocketkafka.ordering.work.step import ClaimContext
from rocketkafka.record import Record
from rocketkafka.refusals import REFUSALS, kafka_refusal
from rocketkafka.sender import Sender
from rocketkafka.topic_partition import TP
from rocketkafka.txn.end import produce_all
from rocketkafka.txn.markers import EndMarkers
from rocketkafka.txn.matching import Decision, HalfOpLedger, decide
from rocketkafka.txn.options import CheckerOptions
from rocketkafka.txn.records import OP_COMMIT, OP_ROLLBACK, HalfMessage, OpRecord, probe_record
from rocketkafka.txn.stats import CheckerStats

log = logging.getLogger(__name__)

#: A scan whose probe failed (or a partition reset) is tried again this much later (s).
RETRY_S = 0.5
#: How long a scan waits for its probe to be acknowledged (s).
PROBE_PATIENCE_S = 30.0


@dataclass(eq=False)
class _Scan:
    start_ms: int
    started: float  # monotonic
    probe_offset: int | None = None
    probe_error: str | None = None
    probe_refusal: AuthorizationError | None = None  # no ACL allowed the probe's write


class HalfPartition:
    """The checker's claim on half partition ``p`` and op partition ``p`` (see the module docstring).

    Parameters:
        context: what the engine gave the claim (both partitions, their start offsets, seek).
        scanner: what scans run with (producer, end markers, options, counters).
    """

    def __init__(self, context: ClaimContext, scanner: Scanner) -> None:
        self.context, self.scanner = context, scanner
        (self.half_tp, self.op_tp) = context.partitions
        self.index = self.half_tp[1]
        half, op = context.offsets[self.half_tp], context.offsets[self.op_tp]
        self._begin(half, op, next_scan=0.0)
        self.stopped = False

    def _begin(self, half: int, op: int, next_scan: float) -> None:
        self.ledger = HalfOpLedger(half, op, self.scanner.options.closed_cache_size)
        self.halves: deque[Any] = deque()
        self.scan: _Scan | None = None
        self.next_scan = next_scan
        self.decided = 0

    # -- Claim protocol (poll thread) ------------------------------------------------------
    def take(self, tp: TP, records: Sequence[Any]) -> None:
        if tp == self.half_tp:
            halves, nxt = self.halves, self.ledger.half_next
            for record in records:
                if record.offset() >= nxt and (not halves or record.offset() > halves[-1].offset()):
                    halves.append(record)
            return
        stats = self.scanner.stats
        for record in records:
            op = OpRecord.parse(record)
            if op.half_offset is not None and op.offset >= self.ledger.op_read_next:  # not a re-read
                if op.state == OP_COMMIT:
                    stats.ended_commit += 1
                elif op.state == OP_ROLLBACK:
                    stats.ended_rollback += 1
            self.ledger.add_op(op.offset, op.half_offset, op.transaction_id)

    def positions(self) -> Mapping[TP, int]:
        return {self.half_tp: self.ledger.half_next, self.op_tp: self.ledger.op_commit_point()}

    def progress(self) -> tuple[int, int] | None:
        return None  # a checker's progress is its commit; it hands nothing out

    def backlog(self) -> Mapping[TP, int]:
        return {self.half_tp: len(self.halves)}  # only halves pause: the op partition must reach the probe

    def finished(self) -> int:
        return self.decided

    def leave(self) -> None:
        self.stopped = True  # the scan in progress ends here; the progress so far is committed

    def revoke(self) -> None:
        self.stopped = True

    def drained(self) -> bool:
        return True  # scans run on the poll thread: nothing is in flight between loops

    # -- scans (poll thread) ---------------------------------------------------------------
    def advance(self) -> None:
        """Begin a scan when due, or take its next step once the ops are read up to its probe."""
        if self.stopped:
            return
        now = time.monotonic()
        scan = self.scan
        if scan is None:
            if self.halves and now >= self.next_scan:
                self.scan = self.scanner.begin(self.index)
            return
        if scan.probe_error is not None or (scan.probe_offset is None and now - scan.started > PROBE_PATIENCE_S):
            if scan.probe_refusal is not None:  # no half is decided without its probe: said once a minute, retried
                REFUSALS.note(scan.probe_refusal, f"transaction checker: probe of op partition {self.index}")
            else:
                log.warning("probe of op partition %d failed (%s); scanning later", self.index,
                            scan.probe_error or "timeout")
            self.scan, self.next_scan = None, now + RETRY_S
            return
        if scan.probe_offset is None or self.ledger.op_read_next <= scan.probe_offset:
            return  # ops not read up to the probe yet
        self.scanner.step(self, scan)

    def end_scan(self, scan: _Scan) -> None:
        self.scan = None
        self.next_scan = scan.started + self.scanner.options.check_interval_ms / 1000

    def reset(self, committed: Mapping[TP, int]) -> None:
        """Forget everything read since the last commit and read again from there (a write failed)."""
        half, op = committed.get(self.half_tp, self.ledger.half_next), committed.get(self.op_tp, 0)
        self.context.seek(self.half_tp, half)
        self.context.seek(self.op_tp, op)
        self._begin(half, op, next_scan=time.monotonic() + RETRY_S)


class Scanner:
    """Runs the scans of every owned half partition (poll thread).

    Parameters:
        topics: internal topic names.
        sender: writes copies, max-check records, probes and check requests.
        markers: transaction end markers in Redis.
        options: the checker's options.
        stats: the counters to bump.
        committed: ``half partition -> {tp: offset}`` last committed (for resets).
        ensure_check_topics: creates check-request topics of producer groups not seen yet.
        otel: each check-back is an OpenTelemetry ``check`` span (:func:`rocketkafka.otel.checking`), child of the
            half's context; the re-written half and the check request carry it.
    """

    def __init__(self, topics: TopicNames, sender: Sender, markers: EndMarkers, options: CheckerOptions,
                 stats: CheckerStats, committed: Callable[[TP], Mapping[TP, int]],
                 ensure_check_topics: Callable[[set[str]], None], otel: bool = False) -> None:
        self.topics, self.sender, self.markers, self.options, self.stats = topics, sender, markers, options, stats
        self._committed, self._ensure_check_topics = committed, ensure_check_topics
        self._spans: Callable[[list[HalfMessage]], list[HalfMessage]] | None = None
        if otel:  # chosen once: off, OpenTelemetry is never imported
            from rocketkafka.otel import checking

            self._spans = lambda halves: [dataclasses.replace(h, headers=tuple(
                (k, v) for k, v in checking(h.headers, h.real_topic, h.producer_group) if v is not None))
                for h in halves]

    def begin(self, index: int) -> _Scan:
        """Write the probe of a new scan of half partition ``index``."""
        scan = _Scan(int(time.time() * 1000), time.monotonic())
        self.stats.scans += 1

        def probed(err: Any, msg: Any) -> None:
            if err is not None:
                refusal = kafka_refusal(err, self.topics.op(), "WRITE", self.sender.principal)
                scan.probe_error, scan.probe_refusal = (str(refusal) if refusal else err.str()), refusal
            else:
                scan.probe_offset = msg.offset()

        try:
            self.sender.produce(probe_record(self.topics, index), probed)
        except SendError as exc:  # refused at once (librdkafka knows the op topic is not ours to write)
            scan.probe_error = str(exc)
            scan.probe_refusal = exc if isinstance(exc, AuthorizationError) else None
        return scan

    def step(self, part: HalfPartition, scan: _Scan) -> None:
        """Decide up to ``step_halves`` halves, write what they need; end the scan when it stops."""
        o = self.options
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
        part.decided += len(decided)
        self.stats.steps += 1
        part.context.commit_soon()  # a long backlog commits as it goes
        if stopped or not part.halves:
            part.end_scan(scan)

    def _act(self, part: HalfPartition, decided: list[tuple[int, Decision, HalfMessage | None, Any]]) -> bool:
        """Write the copies, max-check records and check requests ``decided`` needs; False after a reset."""
        due = [h for _, d, h, _ in decided if h is not None and d in (Decision.CHECK, Decision.MAX_CHECK)]
        ended = self.markers.lookup((h.producer_group, h.transaction_id) for h in due) if due else {}
        checks: list[HalfMessage] = []
        parked: list[Record] = []
        for _, decision, half, record in decided:
            if decision is Decision.DONE:
                self.stats.done_by_op += 1
            elif decision is Decision.CLOSED:
                self.stats.closed_by_transaction += 1
            elif half is None:
                self.stats.malformed += 1
                parked.append(_raw_copy(record, self.topics.max_check(), "malformed half message"))
            elif (half.producer_group, half.transaction_id) in ended:
                self.stats.closed_by_marker += 1
            elif decision is Decision.MAX_CHECK:
                log.warning("transaction %s of group %s checked %d times: moved to %s", half.transaction_id,
                            half.producer_group, half.check_times, self.topics.max_check(), extra=half_fields(half))
                self.stats.max_checked += 1
                parked.append(half.max_check_record(self.topics))
            elif (reason := self._unanswerable(half)) is not None:  # never checkable: park it once, with why
                log.error("transaction %s cannot be checked back: %s; moved to %s", half.transaction_id, reason,
                          self.topics.max_check(), extra=half_fields(half))
                self.stats.max_checked += 1
                parked.append(_raw_copy(record, self.topics.max_check(), reason))
            else:
                checks.append(half)
        if not checks and not parked:
            return True
        if checks:  # first: a check topic this principal may neither see nor create decides nothing (said, retried)
            try:
                self._ensure_check_topics({h.producer_group for h in checks})
            except ConfigError as exc:
                REFUSALS.note(exc, "transaction checker: the check-request topics")
                self.stats.resets += 1
                part.reset(self._committed(part.half_tp))
                return False
        timeout = self.options.transaction_timeout_ms / 1000 + 30
        if self._spans is not None and checks:
            checks = self._spans(checks)
        written = produce_all(self.sender, [h.copy_record(self.topics) for h in checks] + parked, timeout)
        failed = [d.error for d in written if d.error is not None]
        refused = [d.refusal for d in written if d.refusal is not None]
        if refused:  # nothing decided is passed: said once a minute, retried from the committed progress
            REFUSALS.note(refused[0], f"transaction checker: re-writing halves of partition {part.index}")
        elif failed:
            log.warning("re-writing %d half(s) of partition %d failed (%s); resetting it to its committed progress",
                        len(failed), part.index, failed[0])
        if failed:
            self.stats.resets += 1
            part.reset(self._committed(part.half_tp))
            return False
        self.stats.rewritten += len(checks)
        requests = [h.check_request(self.topics, d.partition, d.offset) for h, d in zip(checks, written)]
        unsent = [d for d in produce_all(self.sender, requests, timeout) if d.error is not None]
        lost = [d.error for d in unsent]
        if unsent and unsent[0].refusal is not None:  # checked again at the next scan; said once a minute
            REFUSALS.note(unsent[0].refusal, "transaction checker: sending check requests")
        elif lost:  # their copies are checked at the next scan, one check later
            log.warning("%d check request(s) not sent (%s)", len(lost), lost[0])
        self.stats.checks_sent += len(requests) - len(lost)
        self.stats.check_requests_lost += len(lost)
        if log.isEnabledFor(logging.DEBUG):  # one line per check-back: debugging only
            for h in checks:
                log.debug("checking back transaction %s (check %d)", h.transaction_id, h.check_times + 1,
                          extra=half_fields(h))
        return True

    def _unanswerable(self, half: HalfMessage) -> str | None:
        """Why no producer can ever answer ``half``'s check (its group names no valid check topic), else ``None``."""
        problem = group_name_problem(half.producer_group)
        if problem is not None:
            return f"its producer group {half.producer_group[:80]!r} is not a valid group name: {problem}"
        try:
            topic = self.topics.check_request(half.producer_group)
        except ValueError as exc:
            return f"producer group {half.producer_group[:80]!r} names no valid check topic ({exc})"
        if not is_valid_topic_name(topic):
            return f"producer group {half.producer_group[:80]!r} gives no valid check topic name ({len(topic)} chars)"
        return None


def half_fields(half: HalfMessage) -> dict[str, Any]:
    """Log ``extra=`` fields naming a half."""
    return {"msg_id": half.msg_id, "transaction_id": half.transaction_id, "producer_group": half.producer_group,
            "topic": half.real_topic, "half_partition": half.half_partition, "half_offset": half.half_offset}


def _raw_copy(record: Any, topic: str, reason: str) -> Record:
    headers = list(record.headers() or []) + [(Header.DLQ_REASON, reason.encode())]
    return Record(topic, -1, record.key(), record.value() or b"", headers,
                  f"{record.topic()}@{record.partition()}@{record.offset()}")
