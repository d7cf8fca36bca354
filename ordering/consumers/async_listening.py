"""``async def`` listeners of a push consumer: where their coroutines run, and how a worker waits for them.

A coroutine listener runs on an event loop -- by default one the consumer owns (one daemon
thread, started by ``start()`` and stopped by ``shutdown()``), or the caller's
(``PushConsumer(..., loop=asyncio.get_running_loop())``). The engine is unchanged: a worker
thread still runs each batch through the :class:`~rocketkafka.ordering.consumers.listening.ListenerHandler`,
which hands an async subscription's records to :class:`ListenerLoop` and *waits* for their
coroutines before it answers the batch. So a coroutine's answer is read, and acted on, on the
worker thread exactly as a sync listener's is (same statuses, retry and dead letters; the loop
thread writes no engine state), and a record's offset commits only after its coroutine finished.

- orderly (partition or key): the worker starts one coroutine and waits for it before the next
  record of that queue (or key), so a queue never has two messages in flight; queues (keys)
  overlap up to ``consume_thread_max``, each waiting worker holding one thread. A future an
  orderly *sync* listener returns is pipelined instead (later records go on): not so here.
- concurrent: the worker starts the coroutines of its whole batch (``consume_batch_size``) at once
  and waits for them all; at most ``async_max_in_flight`` coroutines of one partition run their
  body at a time (an :class:`asyncio.Semaphore` per partition, on the loop), however many batches
  of it the workers hold.
- a partition whose lock is lost (its validity passed, or it was revoked) while coroutines of it
  run: they are cancelled -- another member may own the queue already, and one more await is
  one more chance to act on a message someone else now handles; their records are not
  committed and are delivered again to the owner. A graceful handover waits for them, as it
  waits for sync listeners.
- ``shutdown(timeout)``: coroutines in flight are awaited for half of ``timeout`` (RocketMQ's
  shutdown lets the consume threads finish what they hold), then cancelled; the rest is for commits
  and unlocks. No new coroutine starts once shutdown began. Every task this module made is done
  when ``shutdown()`` returns, and the consumer's own loop is closed (async generators shut down
  first), so no "Task was destroyed but it is pending" and no "coroutine was never awaited": a
  coroutine is made on the loop, by the task that awaits it, never before.
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
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from typing_extensions import Self

from rocketkafka.errors import StateError

log = logging.getLogger(__name__)

#: A worker waiting for coroutines looks at its partition's lock at least this often (s).
WAIT_SLICE_S = 0.1
#: A coroutine cancelled must end this soon (s); one that swallows its CancelledError is logged, not awaited.
CANCEL_PATIENCE_S = 5.0
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
        self._tasks: dict[concurrent.futures.Future[Any], asyncio.Task[Any]] = {}  # loop thread only
        self._gates: dict[Hashable, asyncio.Semaphore] = {}  # loop thread only
        self._open = False  # submissions accepted (written under _lock by start/closing)
        self._lock = threading.Lock()
        self._drained: concurrent.futures.Future[Any] | None = None

    # -- lifecycle (the consumer's thread) ---------------------------------------------------
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

    def closing(self, grace_s: float) -> None:
        """Shutdown begins: start no coroutine any more; cancel those still running after ``grace_s``.

        Raises:
            StateError: called on the listeners' loop, which it would wait for.
        """
        if self.on_loop():
            raise StateError(f"{self.name}: shutdown() on the event loop its async listeners run on would wait "
                             "for itself; await consumer.aclose() (or leave `async with`) instead, or call it "
                             "from another thread")
        with self._lock:
            was_open, self._open = self._open, False
        if was_open and self.loop is not None and not self.loop.is_closed():
            self._drained = asyncio.run_coroutine_threadsafe(self._drain(grace_s), self.loop)

    def close(self, timeout: float) -> None:
        """Wait (up to ``timeout``) until every task made here is done; stop and close the own loop."""
        if not self.on_loop():
            self.closing(timeout)
        if self._drained is not None:
            try:
                self._drained.result(timeout + CANCEL_PATIENCE_S)
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
    def submit(self, listener: Callable[[Any], Any], args: Sequence[Any], gate: Hashable | None = None,
               gate_size: int = 0) -> list[concurrent.futures.Future[Any]]:
        """Run ``listener(arg)`` for each of ``args`` on the loop; a future per call gives its answer.

        With ``gate``, at most ``gate_size`` of the calls sharing that key run at once. A call that
        cannot begin (shutdown) or was cancelled answers :data:`CANCELLED`.
        """
        futures: list[concurrent.futures.Future[Any]] = [concurrent.futures.Future() for _ in args]
        with self._lock:
            accepted = self._open and self.loop is not None
            if accepted:
                try:  # one wake-up of the loop per batch, not per message
                    self.loop.call_soon_threadsafe(self._begin, listener, args, futures, gate, gate_size)  # type: ignore[union-attr]
                except RuntimeError:  # the caller's loop was closed under us
                    accepted = False
        if not accepted:
            for f in futures:
                f.set_result(CANCELLED)  # no coroutine was made, so none is left un-awaited
        return futures

    def cancel(self, futures: Sequence[concurrent.futures.Future[Any]]) -> None:
        """Cancel those calls that are not done (their partition's lock was lost)."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._cancel, list(futures))
            except RuntimeError:
                pass  # closed meanwhile: its drain ended every task

    def wait(self, futures: Sequence[concurrent.futures.Future[Any]], still_ours: Callable[[], bool]) -> None:
        """Wait until every one of ``futures`` is done; once ``still_ours()`` says the lock is gone, cancel them."""
        left = [f for f in futures if not f.done()]
        while left:
            concurrent.futures.wait(left, timeout=WAIT_SLICE_S)
            left = [f for f in left if not f.done()]
            if left and not still_ours():
                self.cancel(left)
                _, stuck = concurrent.futures.wait(left, timeout=CANCEL_PATIENCE_S)
                if stuck:
                    log.error("%s: %d async listener(s) ignored their cancellation", self.name, len(stuck))
                    return
                left = []

    # -- loop side -----------------------------------------------------------------------------
    def _begin(self, listener: Callable[[Any], Any], args: Sequence[Any],
               futures: list[concurrent.futures.Future[Any]], gate: Hashable | None, gate_size: int) -> None:
        loop = self.loop
        assert loop is not None
        semaphore = None
        if gate is not None:
            semaphore = self._gates.get(gate)
            if semaphore is None:
                semaphore = self._gates[gate] = asyncio.Semaphore(gate_size)
        # a submission accepted before shutdown began runs: its _begin is on the loop's queue ahead of the drain,
        # which then awaits it like any task in flight
        for arg, future in zip(args, futures):
            task = loop.create_task(_call(listener, arg, semaphore))
            self._tasks[future] = task
            task.add_done_callback(functools.partial(self._finish, future=future))

    def _finish(self, task: asyncio.Task[Any], future: concurrent.futures.Future[Any]) -> None:
        del self._tasks[future]
        if task.cancelled():
            future.set_result(CANCELLED)
        elif (error := task.exception()) is not None:
            future.set_exception(error)  # the handler reads it as a failure, as a sync listener raising
        else:
            future.set_result(task.result())

    def _cancel(self, futures: list[concurrent.futures.Future[Any]]) -> None:
        for future in futures:
            task = self._tasks.get(future)
            if task is not None:
                task.cancel()


async def _call(listener: Callable[[Any], Any], arg: Any, gate: asyncio.Semaphore | None) -> Any:
    """One listener call on the loop (the coroutine is made here, by the task awaiting it)."""
    if gate is None:
        return await listener(arg)
    async with gate:
        return await listener(arg)


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


def waited(runner: ListenerLoop, futures: list[concurrent.futures.Future[Any]],
           still_ours: Callable[[], bool]) -> list[Any]:
    """The answers of ``futures`` once all are done (an exception for a coroutine that raised)."""
    runner.wait(futures, still_ours)
    answers = []
    for f in futures:
        if not f.done():
            answers.append(CANCELLED)  # a coroutine that ignored its cancellation: its record stays
        elif (error := f.exception()) is not None:
            answers.append(error)
        else:
            answers.append(f.result())
    return answers

