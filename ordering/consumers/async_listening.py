"""``async def`` listeners of a push consumer: where their coroutines run, and how a worker waits for them.

A coroutine listener runs on an event loop -- by default one the consumer owns (one daemon
thread, started by ``start()`` and stopped by ``shutdown()``), or the caller's
(``PushConsumer(..., loop=asyncio.get_running_loop())``). The engine is unchanged: a worker
thread still runs each batch through the :class:`~rocketkafka.ordering.consumers.listening.ListenerHandler`,
which hands an async subscription's records to :class:`ListenerLoop` and *waits* for their
coroutines before it answers the batch. So a coroutine's answer is read, and acted on, on the
worker thread exactly as a sync listener's is (same statuses, retry and dead letters; the loop
thread writes no engine state), and a record's offset commits only after its coroutine finished.

- the worker hands the loop a whole segment of its run at once (the records up to the next one to
  dead-letter): one thread switch per run, not per message, which costs far more than a no-op
  coroutine.
- orderly (partition or key): one task awaits the segment's calls in turn, and stops after the
  first answer the worker must act on (a failure, a suspend) or once the lock's validity passed, so
  a queue never has two messages in flight and nothing starts after a failure before the worker
  acted on it; queues (keys) overlap up to ``consume_thread_max``, each waiting worker holding a
  thread. A future an orderly *sync* listener returns is pipelined instead (later records go on):
  not so here.
- concurrent: the segment's calls at once, through up to ``min(async_max_in_flight, segment)``
  worker coroutines that each await calls in turn from a shared iterator (the submission's task is
  the first; a helper task starts only once a call gave the loop a turn, so calls that never wait
  cost no task each); a worker holds one place of its partition's :class:`asyncio.Semaphore` (on
  the loop), so at most ``async_max_in_flight`` calls of one partition run at a time, however many
  batches of it the workers hold; the worker takes the answers in offset order once all ended.
- a partition whose lock is lost (its validity passed, or it was revoked) while coroutines of it
  run: they are cancelled -- another member may own the queue already, and one more await is
  one more chance to act on a message someone else now handles; their records are not
  committed and are delivered again to the owner. A graceful handover waits for them, as it
  waits for sync listeners.
- ``shutdown(timeout)``: coroutines in flight are awaited, as sync listeners are, up to ``timeout``
  (RocketMQ's shutdown lets the consume threads finish what they hold). Cancelling them sooner
  would not make it faster: a leaving partition drains only once what its lanes hold is handled,
  so a cancelled coroutine turns a graceful handover into a wait for the lease. What still runs
  after ``timeout`` is cancelled (its partition then expires with its lease, as one whose sync
  listener hangs). Every task this module made is done when ``shutdown()`` returns and the
  consumer's own loop is closed (async generators shut down first), so no "Task was destroyed but
  it is pending" and no "coroutine was never awaited": a coroutine is made on the loop, by the task
  that awaits it, never before, and a submission after shutdown makes none.
- ``shutdown()`` called on the listeners' loop would wait for that loop: it raises
  :class:`~rocketkafka.errors.StateError`; ``await consumer.aclose()`` (or ``async with``) runs it
  on a worker thread instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from operator import length_hint
from typing import Any

from typing_extensions import Self

from rocketkafka.errors import ConfigError, StateError
from rocketkafka.message import ConsumeOrderlyStatus, ConsumeStatus
from rocketkafka.ordering.consumers.subscriptions import Subscriptions

log = logging.getLogger(__name__)

#: A worker waiting for coroutines looks at its partition's lock at least this often (s).
WAIT_SLICE_S = 0.1
#: A coroutine cancelled must end this soon (s); one that swallows its CancelledError is logged, not awaited.
CANCEL_PATIENCE_S = 5.0
_CONSUME_SUCCESS, _SUCCESS = ConsumeStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS
#: What a coroutine that was cancelled (or never began: shutdown) answers; the handler stops before its record.
CANCELLED: Any = object()


def is_async_listener(listener: Any) -> bool:
    """Whether ``listener`` is a coroutine function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(getattr(listener, "__call__", None))


class ListenerLoop:
    """The event loop async listeners run on: the consumer's own (``loop=None``) or the caller's.

    Worker threads call :meth:`submit` and :meth:`cancel`; everything else this object keeps (its
    tasks, the per-partition gates) is the loop thread's alone.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None, name: str = "rk-listeners") -> None:
        if loop is not None and not isinstance(loop, asyncio.AbstractEventLoop):
            raise TypeError(f"loop must be an asyncio event loop, got {type(loop).__name__}")
        self.loop, self.owned, self.name = loop, loop is None, name
        self._thread: threading.Thread | None = None
        self._thread_id: int | None = None  # the loop's thread, once known (own loop: at start)
        self._tasks: dict[concurrent.futures.Future[Any], asyncio.Task[Any]] = {}  # a task per submission; loop only
        self._gates: dict[Hashable, asyncio.Semaphore] = {}  # loop thread only
        self._open = False  # submissions accepted (written under _lock by start/closing)
        self._lock = threading.Lock()
        self._drained: concurrent.futures.Future[Any] | None = None
        self._said_closed = False

    # -- lifecycle (the consumer's thread) ---------------------------------------------------
    def start_for(self, subscriptions: Subscriptions, *, otel: bool) -> None:
        """:meth:`start` when one of ``subscriptions`` has an ``async def`` listener (no thread otherwise).

        Raises:
            ConfigError: OpenTelemetry tracing is on: its process span wraps the call, which for a
                coroutine function ends before the coroutine ran (not supported yet).
        """
        if not any(sub.asynchronous for sub in subscriptions.by_topic.values()):
            return
        if otel:
            raise ConfigError("OpenTelemetry tracing (otel) does not trace async def listeners yet: turn it off "
                              "for this consumer (otel=False) or use a plain listener")
        self.start()

    def start(self) -> None:
        """Accept coroutines; the consumer's own loop starts on its thread now."""
        if self.owned and self._thread is None:
            self.loop = asyncio.new_event_loop()
            ready = threading.Event()
            self._thread = threading.Thread(target=self._serve, args=(ready,), name=self.name, daemon=True)
            self._thread.start()
            ready.wait()
        with self._lock:
            self._open = True

    def _serve(self, ready: threading.Event) -> None:
        loop = self.loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        self._thread_id = threading.get_ident()
        ready.set()
        try:
            loop.run_forever()
        finally:  # the loop is closed only once nothing is left on it
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    def on_loop(self) -> bool:
        """Whether the caller runs on the listeners' loop (its shutdown would wait for itself)."""
        if self.loop is None:
            return False
        if self.owned:
            return threading.get_ident() == self._thread_id
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    def refuse_on_loop(self) -> None:
        """Raise :class:`StateError` when called on the listeners' loop: a shutdown there would wait for itself."""
        if self.on_loop():
            raise StateError(f"{self.name}: shutdown() on the event loop its async listeners run on would wait "
                             "for itself; await consumer.aclose() (or leave `async with`) instead, or call it "
                             "from another thread")

    def closing(self, grace_s: float) -> None:
        """Start no coroutine any more; cancel those still running after ``grace_s``."""
        self.refuse_on_loop()
        with self._lock:
            was_open, self._open = self._open, False
        if was_open and self.loop is not None and not self.loop.is_closed():
            self._drained = asyncio.run_coroutine_threadsafe(self._drain(grace_s), self.loop)

    def close(self, grace_s: float = 0.0) -> None:
        """Cancel what still runs after ``grace_s``, wait until every task made here is done; stop and close the
        own loop."""
        self.closing(grace_s)
        if self._drained is not None:
            try:
                self._drained.result(grace_s + 2 * CANCEL_PATIENCE_S)
            except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                log.error("%s: async listeners did not end after cancellation", self.name)
        if self._thread is not None and self.loop is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(CANCEL_PATIENCE_S)
            self._thread = self._thread_id = None  # a later thread may be given the same ident

    async def _drain(self, grace_s: float) -> None:
        """Await the tasks in flight up to ``grace_s``, then cancel and await what is left."""
        pending = set(self._tasks.values())
        if pending:
            _, pending = await asyncio.wait(pending, timeout=grace_s)
        if pending:
            log.warning("%s: cancelling %d async listener(s) still running at shutdown", self.name, len(pending))
            for task in pending:
                task.cancel()
            _, stuck = await asyncio.wait(pending, timeout=CANCEL_PATIENCE_S)
            if stuck:
                log.error("%s: %d async listener(s) ignored their cancellation", self.name, len(stuck))

    # -- worker side ---------------------------------------------------------------------------
    def submit(self, listener: Callable[[Any], Any], args: Sequence[Any], *, ordered: bool,
               valid_until: float = float("inf"), gate: Hashable | None = None,
               gate_size: int = 0) -> concurrent.futures.Future[list[Any]]:
        """Run ``listener(arg)`` for ``args`` on the loop; the future gives their answers, in the order of ``args``.

        ``ordered``: one after the other, stopping after the first answer that is not a plain success
        (the worker acts on it before anything later starts) or once ``valid_until`` (monotonic s, the
        lock's validity) passed; else all at once, at most ``gate_size`` of those sharing ``gate``
        running together. A call that raised answers its exception; one cancelled (or never begun:
        shutdown) answers :data:`CANCELLED`. One wake-up of the loop per run of records, not per
        message: the handoff costs more than a no-op coroutine.
        """
        future: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()
        with self._lock:
            accepted = self._open and self.loop is not None
            if accepted:
                try:
                    self.loop.call_soon_threadsafe(  # type: ignore[union-attr]
                        self._begin, listener, args, ordered, valid_until, gate, gate_size, future)
                except RuntimeError:  # the caller's loop was closed under us: its partitions wait, said once
                    accepted = False
                    if not self._said_closed:
                        self._said_closed = True
                        log.error("%s: the event loop of the async listeners is closed: no message is handled "
                                  "until the consumer shuts down (shut it down before its loop ends)", self.name)
        if not accepted:
            future.set_result([CANCELLED])  # no coroutine was made, so none is left un-awaited
        return future

    def cancel(self, future: concurrent.futures.Future[Any]) -> None:
        """Cancel the calls of a submission that are still running (their partition's lock was lost)."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._cancel, future)
            except RuntimeError:
                pass  # closed meanwhile: its drain ended every task

    def answers(self, future: concurrent.futures.Future[list[Any]], still_ours: Callable[[], bool]) -> list[Any]:
        """The answers of a submission once it finished; once ``still_ours()`` says the lock is gone, it is
        cancelled first. A listener raising a BaseException that is no Exception raises it here."""
        while True:
            try:
                return future.result(WAIT_SLICE_S)
            except concurrent.futures.TimeoutError:
                if still_ours():
                    continue
            self.cancel(future)
            try:
                return future.result(CANCEL_PATIENCE_S)
            except concurrent.futures.TimeoutError:
                log.error("%s: an async listener ignored its cancellation; its records come again", self.name)
                return [CANCELLED]

    # -- loop side -----------------------------------------------------------------------------
    def _begin(self, listener: Callable[[Any], Any], args: Sequence[Any], ordered: bool, valid_until: float,
               gate: Hashable | None, gate_size: int, future: concurrent.futures.Future[list[Any]]) -> None:
        # a submission accepted before shutdown began runs: its _begin is on the loop's queue ahead of the drain,
        # which then awaits it like any task in flight
        loop = self.loop
        assert loop is not None
        if ordered:
            coroutine = _in_order(listener, args, valid_until, future)
        else:
            semaphore = None
            if gate is not None:
                semaphore = self._gates.get(gate)
                if semaphore is None:
                    semaphore = self._gates[gate] = asyncio.Semaphore(gate_size)
            coroutine = _together(listener, args, semaphore, gate_size or len(args), future)
        task = loop.create_task(coroutine)
        self._tasks[future] = task
        task.add_done_callback(functools.partial(self._finish, future=future))

    def _finish(self, task: asyncio.Task[list[Any]], future: concurrent.futures.Future[list[Any]]) -> None:
        del self._tasks[future]
        if future.done():  # answered by the coroutine itself as its last step
            pass
        elif task.cancelled():  # cancelled before its first step: nothing of it ran
            future.set_result([CANCELLED])
        elif (error := task.exception()) is not None:
            future.set_exception(error)
        else:
            future.set_result(task.result())

    def _cancel(self, future: concurrent.futures.Future[Any]) -> None:
        task = self._tasks.get(future)
        if task is not None:
            task.cancel()


def _plain_success(answer: Any) -> bool:
    return answer is None or answer is _CONSUME_SUCCESS or answer is _SUCCESS


async def _in_order(listener: Callable[[Any], Any], args: Sequence[Any], valid_until: float,
                    future: concurrent.futures.Future[list[Any]]) -> list[Any]:
    """Orderly: each call awaited before the next; stop after an answer the worker must act on first."""
    answers: list[Any] = []
    monotonic = time.monotonic
    try:
        for arg in args:
            if monotonic() >= valid_until:  # the worker asks the lock table, then hands the rest again
                break
            try:
                answer = await listener(arg)  # the coroutine is made here, by the task that awaits it
            except Exception as exc:  # noqa: BLE001 - a failure, as a sync listener raising
                answer = exc
            answers.append(answer)
            if not _plain_success(answer):
                break
    except asyncio.CancelledError:  # the lock was lost, or shutdown: this record is not handled
        answers.append(CANCELLED)
    future.set_result(answers)  # the worker goes on now, not a loop turn later (the task's done callback)
    return answers


async def _together(listener: Callable[[Any], Any], args: Sequence[Any], gate: asyncio.Semaphore | None,
                    width: int, future: concurrent.futures.Future[list[Any]]) -> list[Any]:
    """Concurrent: the calls at once, up to ``width`` (``gate`` bounds those of one partition); the answers in order.

    Not a task per call (~7 us each, more than a no-op coroutine): this task and at most ``width - 1`` helper
    tasks each await calls one after the other, taking the next record from a shared iterator. A helper
    starts only once a worker gave the loop a turn (its call suspended), so calls that never suspend run
    in this task alone; calls that wait spread over up to ``width`` workers, one more each loop turn.
    """
    answers: list[Any] = [CANCELLED] * len(args)  # a call cancelled, or never begun, answers CANCELLED
    todo = iter(range(len(args)))
    helpers: list[asyncio.Task[None]] = []
    width = max(1, min(width, len(args)))
    loop = asyncio.get_running_loop()

    def more() -> None:  # a worker gave the loop a turn: one more, while records wait
        if len(helpers) + 1 < width and length_hint(todo):
            helpers.append(loop.create_task(work()))

    async def work() -> None:
        loop.call_soon(more)
        if gate is None:
            await _calls(listener, args, todo, answers)
        else:
            async with gate:  # a worker holds one of its partition's places while it takes records
                await _calls(listener, args, todo, answers)

    try:
        await work()
        if helpers:
            await asyncio.wait(helpers)
    except BaseException as exc:  # cancelled (the lock was lost, or shutdown): what runs is cancelled too
        for _ in todo:  # nothing more starts
            pass
        for task in helpers:
            task.cancel()
        if helpers:
            await asyncio.wait(helpers)  # every one ended before the worker hears of it: none is left pending
        if not isinstance(exc, asyncio.CancelledError):
            raise
    for task in helpers:  # a BaseException that is no Exception (nor a cancellation) raises, as before
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    future.set_result(answers)  # the worker goes on now, not a loop turn later (the task's done callback)
    return answers


async def _calls(listener: Callable[[Any], Any], args: Sequence[Any], todo: Any, answers: list[Any]) -> None:
    """A worker of :func:`_together`: ``listener(args[x])`` for each ``x`` it takes, awaited in turn."""
    for x in todo:
        try:
            answers[x] = await listener(args[x])  # the coroutine is made here, by the task that awaits it
        except Exception as exc:  # noqa: BLE001 - a failure, as a sync listener raising
            answers[x] = exc
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # cancelled: this call and the rest answer CANCELLED
                raise
            # the listener raised CancelledError itself: its record answers CANCELLED, the others go on


class AsyncShutdown:
    """Mixin: ``await consumer.aclose()`` and ``async with consumer`` -- start and shutdown off the loop."""

    def start(self) -> Any:
        raise NotImplementedError

    def shutdown(self, timeout: float = 30.0) -> Any:
        raise NotImplementedError

    async def aclose(self, timeout: float = 30.0) -> None:
        """:meth:`shutdown` on a worker thread, so a coroutine (even a listener's loop) may await it."""
        await asyncio.to_thread(self.shutdown, timeout)

    async def __aenter__(self) -> Self:
        await asyncio.to_thread(self.start)  # joining the group and the first locks take a while
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

