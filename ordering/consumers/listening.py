"""The push consumer's handler: hands records to the subscribed listeners and acts on what they answer.

Per batch it finds the subscription (a retry copy belongs to its original topic),
skips records its selector leaves out (tag or SQL92, :mod:`~rocketkafka.ordering.consumers.selecting`;
their offsets still commit), wraps each record as a lazy :class:`~rocketkafka.message.MessageExt`
and calls the listener -- one message per call, or a whole
:class:`~rocketkafka.ordering.consumers.message_batch.MessageBatch` for a batch listener. Before each
record it checks that the partition's lock is still valid, so a process that stalled past
its lock stops at once. A failed message goes where the consumer's failure policy
(:mod:`~rocketkafka.ordering.work.failures`) sends it.

What a listener answers (returning ``None`` means success, raising means failure):

===========================================  ==========================================
concurrent listener                          orderly (partition or key) listener
===========================================  ==========================================
``CONSUME_SUCCESS``                          ``SUCCESS``
``RECONSUME_LATER``: a retry copy, later     ``SUSPEND_CURRENT_QUEUE_A_MOMENT`` (or
(the failure policy decides where)           ``RECONSUME_LATER``): retried in place after
                                             the suspend time, never skipped
--                                           :class:`~rocketkafka.message.Suspend`: pause
                                             (``failed=False``: "not yet", not counted)
--                                           a ``concurrent.futures.Future``: handled once
                                             it resolves; later records go on meanwhile
===========================================  ==========================================

An ``async def`` listener (or an object whose ``__call__`` is one) answers the same from its
coroutine, which runs on an event loop (:mod:`~rocketkafka.ordering.consumers.async_listening`);
the worker waits for it and acts on its answer here. Orderly, the next record of the queue (or
key) starts only once the coroutine before it finished -- a coroutine is awaited, not
pipelined as a returned future is. A coroutine cancelled (its partition's lock was lost, or
shutdown) answers nothing: its record is neither committed nor retried, but delivered again.

Anything else (``"garbage"``, ``True``, an orderly status from a concurrent listener,
a coroutine returned by a plain function) is a bug in the listener: it is logged as an error once per kind and
counts as a failure, so the message is retried and, in the end, dead-lettered -- never
silently committed. After ``max_reconsume_times`` failures a message goes to the
dead-letter topic and its partition (or key) moves on.

A record whose system headers cannot be read (:func:`~rocketkafka.headers.unreadable_header`:
an ``rk.*`` value that is not UTF-8, a reconsume count or born time that is not a
non-negative integer) never reaches a listener, in any mode: it is dead-lettered before
the listener would have seen it (broadcasting: logged and dropped), with the header named
in the reason, and the partition moves on. So no field of a message a listener gets
raises: a foreign producer's garbage is the consumer's to route, not user code's to catch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from rocketkafka.errors import MalformedRecordError
from rocketkafka.headers import unreadable_header
from rocketkafka.logs import message_fields
from rocketkafka.message import ConsumeOrderlyStatus, ConsumeStatus, MessageExt, Suspend
from rocketkafka.ordering.work.failures import FailurePolicy, malformed
from rocketkafka.ordering.consumers.async_listening import CANCELLED, ListenerLoop
from rocketkafka.ordering.consumers.futures import all_of, is_future
from rocketkafka.ordering.work.lanes import LOCK_RECHECK_MS, Outcome, Run
from rocketkafka.ordering.consumers.message_batch import BatchFailure, MessageBatch
from rocketkafka.ordering.consumers.selecting import RecordFilter, record_filter
from rocketkafka.ordering.consumers.subscriptions import Subscription, Subscriptions

log = logging.getLogger(__name__)

Listener = Callable[[MessageExt], Any]
BatchListener = Callable[["MessageBatch"], Any]

_CONSUME_SUCCESS, _SUCCESS = ConsumeStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS
_new_message = object.__new__


class ListenerHandler:
    """Runs a batch through its subscription's listener (see the module docstring).

    Parameters:
        subscriptions: what each topic's records go to.
        policy: what a failure means in this consumer's mode.
        orderly: partition or key order (statuses and futures as the table says).
        max_reconsume_times: failures after which a message is dead-lettered.
        suspend_ms: orderly: pause after a failure.
        runner: the event loop of ``async def`` listeners (``None``: none subscribed).
        in_flight: concurrent async listeners: coroutines of one partition running at once.
    """

    def __init__(self, subscriptions: Subscriptions, policy: FailurePolicy, *, orderly: bool,
                 max_reconsume_times: int, suspend_ms: int, runner: ListenerLoop | None = None,
                 in_flight: int = 64) -> None:
        self.subscriptions, self.policy, self.orderly = subscriptions, policy, orderly
        self.runner, self.in_flight = runner, in_flight
        #: The scheduler runs no lane of this handler on the poll thread: a worker waiting for a coroutine is fine,
        #: a poll thread waiting for one would stop fetching and renewing for as long as it awaits I/O.
        self.off_poll_thread = any(sub.asynchronous for sub in subscriptions.by_topic.values())
        self.max_reconsume_times, self.suspend_ms = max_reconsume_times, suspend_ms
        self._warned: set[tuple[int, str]] = set()
        self._filters: dict[str, RecordFilter | None] = {}

    def _filter(self, sub: Subscription) -> RecordFilter | None:
        """The record test of ``sub``'s selector (``None``: every record), made once per subscription."""
        try:
            return self._filters[sub.topic]
        except KeyError:
            made = self._filters[sub.topic] = record_filter(sub.selector, self.policy.dead_letter_raw)
            return made

    # -- the scheduler's BatchHandler --------------------------------------------------------
    def handle(self, run: Run) -> Outcome:
        return self.handle_from(run, run.start)

    def handle_from(self, run: Run, start: int) -> Outcome:
        """:meth:`handle` from ``run.records[start]`` on (a transaction skips what committed before)."""
        topic = run.work.topic
        if topic == self.subscriptions.retry_topic:
            end, futures, pause = self._retry_copies(run, start)
        else:
            sub = self.subscriptions.by_topic[topic]  # the engine fetches only subscribed topics
            through = self._batches if sub.batch_size else self._async_messages if sub.asynchronous \
                else self._messages
            end, futures, pause = through(run, sub, start, run.stop, None)
        return Outcome(end - start, all_of(futures), pause)

    def _messages(self, run: Run, sub: Subscription, i: int, n: int,
                  topic: str | None) -> tuple[int, list[Any] | None, int | None]:
        """The hot loop: ``records[i:n]`` one by one through a per-message listener.

        Returns where it stopped, the futures of pipelined records, and a pause (ms) or ``None``.
        """
        records = run.records
        listener, monotonic, new = sub.listener, time.monotonic, _new_message
        selects = self._filter(sub)
        retried = run.retried
        futures: list[Any] | None = None
        exact = run.exact  # ``done`` may follow every message (see BatchHandler)
        valid_until = run.valid_until
        for i in range(i, n):
            record = records[i]
            if selects is not None and not selects(record):
                continue
            msg = new(MessageExt)  # MessageExt.of(record, topic), inlined: the hot path
            msg._record = record
            if topic is not None:
                msg.topic = topic
            # A process that stalled past its lock stops before the next message. Checked as late as
            # possible: a pause that lands between this check and the call still runs that one call
            # after it resumes (no client-side check can close that window; README, Reliability).
            if monotonic() >= valid_until:
                if not run.still_ours():
                    return i, futures, LOCK_RECHECK_MS
                valid_until = run.valid_until
            if record.headers():  # decoded before the listener (no field of msg may raise there), and only once
                try:
                    msg.decode()
                except MalformedRecordError as garbled:
                    self.policy.dead_letter_raw(record, garbled)
                    if exact and futures is None:
                        run.done = i + 1
                    continue
            if retried and self._given_up(run, msg):
                continue
            try:
                status = listener(msg)
            except Exception as exc:
                status = exc
            if status is None or status is _CONSUME_SUCCESS or status is _SUCCESS:
                if exact and futures is None:
                    run.done = i + 1
                continue
            pause = self._answer(run, msg, status)
            if pause is _FUTURE:
                if futures is None:
                    futures = []
                futures.append(status)
            elif pause is not None:
                return i, futures, pause
            elif exact and futures is None:
                run.done = i + 1
        return n, futures, None

    def _retry_copies(self, run: Run, i: int) -> tuple[int, list[Any] | None, int | None]:
        """Records of the group's retry topic: each goes to the listener of its original topic.

        Retry copies are ours, so their system headers are checked before the listener runs: one
        whose count or id was forged or garbled is dead-lettered as it is (a rare path: no cost to
        the hot one).
        """
        records = run.records
        while i < run.stop:
            sub, topic = self.subscriptions.of_record(records[i])
            record = records[i]
            error = None if sub is None else malformed(MessageExt.of(record))
            if sub is None or error is not None:
                self.policy.dead_letter_raw(record, error or MalformedRecordError(
                    record.topic(), record.partition(), record.offset(),
                    f"retry copy of topic {topic!r}, which this group does not subscribe"))
                i += 1
                continue
            through = self._async_messages if sub.asynchronous else self._messages
            end, futures, pause = through(run, sub, i, i + 1, topic)
            if end == i or futures or pause is not None:
                return end, futures, pause
            i = end
        return i, None, None

    def _batches(self, run: Run, sub: Subscription, i: int, n: int,
                 topic: str | None) -> tuple[int, list[Any] | None, int | None]:
        """``records[i:n]`` through a batch listener, up to ``sub.batch_size`` messages a call."""
        records = run.records
        selects = self._filter(sub)
        while i < n:
            if not run.still_ours():
                return i, None, LOCK_RECHECK_MS
            chosen: list[Any] = []
            j = i
            while j < n and len(chosen) < sub.batch_size:
                record = records[j]
                garbled = unreadable_header(record)
                if garbled is not None and chosen:
                    # the batch ends before it: dead-lettered once it leads, so an in-place retry of
                    # the batch before it never dead-letters it twice
                    break
                if selects is None or selects(record):  # a tag test dead-letters a garbled tag itself
                    if garbled is None:
                        chosen.append(record)
                    else:  # never in a batch: no message a batch listener gets raises on a field
                        self.policy.dead_letter_raw(record, garbled)
                j += 1
            if not chosen:
                i = j
                continue
            if sub.asynchronous:
                answers = self._awaited(run, sub, [MessageBatch(chosen, topic)])
                status = answers[0] if answers else CANCELLED  # none: the lock's validity passed first
                if status is CANCELLED:  # the lock was lost, or shutdown: the batch runs again elsewhere
                    return i, None, LOCK_RECHECK_MS
            else:
                try:
                    status = sub.listener(MessageBatch(chosen, topic))
                except Exception as exc:
                    status = exc
            if status is None or status is _CONSUME_SUCCESS or status is _SUCCESS:
                i = j
                continue
            if isinstance(status, BatchFailure) and 0 <= status.index < len(chosen):
                failed, after = chosen[status.index], records.index(chosen[status.index])
                pause = self._answer(run, MessageExt.of(failed, topic), status)
                if pause is not None and pause is not _FUTURE:
                    return after, None, pause  # in place: the failed message runs again first
                i = after + 1  # disposed of; the messages after it go to the listener again
                continue
            reason = self._reason(status)
            if reason is None:  # a success spelled as an int
                i = j
                continue
            if self.policy.in_place:  # the whole batch failed: it runs again from its first message
                pause = self._answer(run, MessageExt.of(chosen[0], topic), status)
                if pause is not None and pause is not _FUTURE:
                    return records.index(chosen[0]), None, pause
                i = records.index(chosen[0]) + 1
                continue
            for record in chosen:  # concurrent: every message of the batch is retried later
                self.policy.failed(MessageExt.of(record, topic), reason)
            i = j
        return i, None, None

    def _async_messages(self, run: Run, sub: Subscription, i: int, n: int,
                        topic: str | None) -> tuple[int, list[Any] | None, int | None]:
        """``records[i:n]`` through an ``async def`` listener, a segment at a time: the records up to the next
        one to dead-letter go to the loop together (:meth:`ListenerLoop.submit`: orderly, each coroutine
        awaited before the next; concurrent, all at once), and their answers are acted on here, in order."""
        records, selects, new = run.records, self._filter(sub), _new_message
        while i < n:
            at: list[int] = []  # the segment: the records' indexes, and their messages
            msgs: list[MessageExt] = []
            j = i
            while j < n and not (at and run.retried):  # a retried partition: one record at a time
                record = records[j]
                if selects is not None and not selects(record):
                    j += 1
                    continue
                msg = new(MessageExt)  # MessageExt.of(record, topic), inlined as in _messages
                msg._record = record
                if topic is not None:
                    msg.topic = topic
                if record.headers():
                    try:
                        msg.decode()
                    except MalformedRecordError as garbled:
                        if at:  # dead-lettered once the records before it were handled
                            break
                        self.policy.dead_letter_raw(record, garbled)
                        j += 1
                        continue
                if run.retried and self._given_up(run, msg):
                    j += 1
                    continue
                at.append(j)
                msgs.append(msg)
                j += 1
            if not at:
                i = j
                continue
            if not run.still_ours():
                return at[0], None, LOCK_RECHECK_MS
            answers = self._awaited(run, sub, msgs)
            for x, status in enumerate(answers):
                if status is None or status is _CONSUME_SUCCESS or status is _SUCCESS:
                    continue
                if status is CANCELLED:  # not handled: neither committed nor retried here
                    return self._progress(run, at, x)
                if is_future(status):  # a coroutine answering with a future: its answer is the future's
                    status = _future_answer(run, status)
                    if status is CANCELLED:  # the lock's validity passed while it waited: handed again elsewhere
                        return self._progress(run, at, x)
                pause = self._answer(run, msgs[x], status)
                if pause is not None:
                    return self._progress(run, at, x, pause)
            # every answer came at once: progress moves once per segment (orderly stopped early after an answer
            # acted on above, or when the lock's validity passed: the rest is handed again)
            if run.exact:
                run.done = at[len(answers) - 1] + 1 if answers else run.done
            i = at[len(answers)] if len(answers) < len(at) else j
        return n, None, None

    @staticmethod
    def _progress(run: Run, at: list[int], x: int, pause: int = LOCK_RECHECK_MS) -> tuple[int, None, int]:
        """Stop at the segment's ``x``-th record, those before it handled."""
        if run.exact and x:
            run.done = at[x - 1] + 1
        return at[x], None, pause

    def _awaited(self, run: Run, sub: Subscription, args: list[Any]) -> list[Any]:
        """The answers of ``sub``'s coroutine listener for ``args`` (fewer when orderly stopped early)."""
        runner = self.runner
        assert runner is not None, "an async subscription needs the consumer's listener loop"
        future = runner.submit(sub.listener, args, ordered=self.orderly or bool(sub.batch_size),
                               valid_until=run.valid_until, gate=run.work.tp, gate_size=self.in_flight)
        return runner.answers(future, run.still_ours)

    # -- answers -----------------------------------------------------------------------------
    def _answer(self, run: Run, msg: MessageExt, status: Any) -> Any:
        """Act on a listener's answer other than success: ``None`` (go on), ``_FUTURE``, or a pause (ms)."""
        if self.orderly and is_future(status):
            return _FUTURE
        if is_future(status):  # a concurrent listener's future: wait for it here
            try:
                status = status.result()
            except Exception as exc:
                status = exc
            if status is None or status is _CONSUME_SUCCESS:
                return None
        if isinstance(status, Suspend) and self.orderly:
            if not status.failed:
                return status.millis
            return self._failed(run, msg, "listener asked to suspend", status.millis)
        reason = self._reason(status)
        if reason is None:
            return None  # a success spelled as an int or an enum of equal value
        return self._failed(run, msg, reason, self.suspend_ms)

    def _failed(self, run: Run, msg: MessageExt, reason: str, pause_ms: int) -> int | None:
        """A failed message: sent back (concurrent), or counted and retried in place after ``pause_ms``
        (orderly; the count goes to the poll thread in ``run.failure``), or dead-lettered."""
        if not self.policy.in_place:
            self.policy.failed(msg, reason)
            return None
        # retrying a forged record in place would block its partition
        if (error := malformed(msg)) is not None:
            self.policy.dead_letter_raw(msg.record, error)
            return None
        offset = msg.queue_offset
        tries = run.tries(offset)[0] + 1
        if tries > self.max_reconsume_times:
            self.policy.dead_letter(msg, f"max reconsume times {self.max_reconsume_times} reached: {reason}")
            return None
        run.failure = (offset, tries, reason)
        log.info("orderly listener failed on %s (try %d): %s", msg.id, tries, reason,
                 extra=message_fields(msg))
        return pause_ms

    def _given_up(self, run: Run, msg: MessageExt) -> bool:
        """In place: a message whose future failed too often is dead-lettered before it runs again."""
        tries, reason = run.tries(msg.queue_offset)
        if (error := malformed(msg)) is not None:  # a forged count cannot be added to
            self.policy.dead_letter_raw(msg.record, error)
            return True
        msg.reconsume_times = msg.reconsume_times + tries
        if tries <= self.max_reconsume_times:
            return False
        self.policy.dead_letter(msg, f"max reconsume times {self.max_reconsume_times} reached: {reason}")
        return True

    def _reason(self, status: Any) -> str | None:
        """Why ``status`` counts as a failure, or ``None`` when it means success."""
        if isinstance(status, BaseException):
            return f"{type(status).__name__}: {status}"
        if isinstance(status, ConsumeOrderlyStatus):
            if status is ConsumeOrderlyStatus.SUCCESS:
                return None
            if not self.orderly:
                self._warn(status, "returned an orderly status from a concurrent listener; counted as "
                                   "RECONSUME_LATER")
            return "listener asked to suspend"
        if isinstance(status, ConsumeStatus):
            return None if status is ConsumeStatus.CONSUME_SUCCESS else "listener returned RECONSUME_LATER"
        if isinstance(status, int) and not isinstance(status, bool) and status in (0, 1):
            return None if status == 0 else "listener returned RECONSUME_LATER"
        if hasattr(status, "__await__"):
            getattr(status, "close", lambda: None)()
            self._warn(status, "that is a plain function returned a coroutine, which is not awaited (subscribe "
                               "an async def, or an object whose __call__ is one); counted as a failure")
            return "listener returned a coroutine"
        self._warn(status, f"returned {status!r} ({type(status).__name__}), which is not a consume status; "
                           "counted as a failure (return None or CONSUME_SUCCESS for success)")
        return f"listener returned {type(status).__name__}"

    def _warn(self, status: Any, text: str) -> None:
        kind = (id(type(status)), type(status).__name__)
        if kind not in self._warned:
            self._warned.add(kind)
            log.error("a listener %s", text)


_FUTURE: Any = object()  # the orderly listener returned a future: pipelined


def _future_answer(run: Run, future: Any) -> Any:
    """The answer of a future an async listener returned, waited for in slices while the lock holds (a future
    that never resolves must not hold the worker past its lock); ``CANCELLED`` once the lock's validity passed."""
    while True:
        try:
            return future.result(timeout=LOCK_RECHECK_MS / 1000)
        except TimeoutError:
            if not run.still_ours():
                return CANCELLED
        except Exception as exc:  # noqa: BLE001 - a failure, as the listener raising
            return exc
