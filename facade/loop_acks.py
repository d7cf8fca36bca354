"""A librdkafka producer's delivery reports, handed to the asyncio loops that await them.

Both asyncio producers (:class:`rocketkafka.AsyncProducer`, :class:`rocketkafka.kafka.aio.AIOProducer`)
hand records to librdkafka on the event loop's thread and get one future per record back. One
thread per producer polls librdkafka only while records are in flight, gathers each poll's reports
per loop, and hands them to that loop in one ``call_soon_threadsafe`` (one wake-up of the loop per
poll, not per record). The loop then resolves the futures (the producer's ``settle``: what a
result is differs between the two doors).

Records in flight are bounded (:attr:`LoopAcks.window`, 90% of librdkafka's queue): a producer
asks :meth:`LoopAcks.full` before it sends on the loop, and a send past it awaits
:meth:`LoopAcks.room` instead of blocking the loop in librdkafka's full queue.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: How long the thread's poll of librdkafka waits while records are in flight (s).
ACK_POLL_S = 0.05
#: librdkafka's default ``queue.buffering.max.messages``; 90% of it (or of the config's) is the most in flight.
DEFAULT_QUEUE = 100_000

#: What a loop gets: ``(future, tag, err, msg)`` per record, librdkafka's delivery report (``err`` None: written).
Report = tuple["asyncio.Future[Any]", Any, Any, Any]
#: Resolves a loop's reports, on that loop.
Settle = Callable[[list[Report]], None]


class LoopAcks:
    """Delivery reports of one librdkafka producer, served to asyncio loops (see the module docstring).

    Parameters:
        kafka: the confluent-kafka producer whose reports are served (its ``poll``).
        settle: resolves one loop's reports on that loop.
        queue: librdkafka's ``queue.buffering.max.messages``.
        name: names the thread and the log lines.
    """

    def __init__(self, kafka: Any, settle: Settle, queue: int = DEFAULT_QUEUE, name: str = "") -> None:
        self._kafka, self._settle, self.name = kafka, settle, name
        #: records in flight at most: a tenth of the queue spare, since sends on several loops or topics may
        #: pass a full window at once
        self.window = max(1, queue * 9 // 10)
        self.in_flight = 0
        self._count = threading.Lock()  # guards in_flight and _reports
        self._reports: dict[asyncio.AbstractEventLoop, list[Report]] = {}  # not yet handed to their loop
        self._room: dict[asyncio.AbstractEventLoop, asyncio.Event] = {}  # per loop: set as reports come in
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name=f"rk-aio-acks-{name}", daemon=True)
        self._thread.start()

    def track(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], tag: Any = None) -> \
            Callable[[Any, Any], None]:
        """One more record in flight; returns its ``on_delivery(err, msg)`` (call :meth:`untrack` if the produce
        raised). ``tag`` travels to ``settle`` with the report.

        Raises:
            RuntimeError: the producer is closing (nothing would serve the record's report).
        """
        def delivered(err: Any, msg: Any) -> None:  # the thread's poll (or the loop's, librdkafka's queue full)
            with self._count:  # as little as can be here: the result is made on the loop
                self.in_flight -= 1
                reports = self._reports  # not one captured earlier: hand_over() swaps it for a new one
                batch = reports.get(loop)
                if batch is None:
                    batch = reports[loop] = []
                batch.append((future, tag, err, msg))

        with self._count:
            if self._stopping:
                raise RuntimeError("Producer closed")
            self.in_flight += 1
            first = self.in_flight == 1
        if first:  # the thread may be asleep
            self._wake.set()
        return delivered

    def untrack(self) -> None:
        """The produce a :meth:`track` was for raised: nothing is in flight for it."""
        with self._count:
            self.in_flight -= 1

    def full(self) -> bool:
        """Whether a send now would pass :attr:`window`."""
        return self.in_flight >= self.window

    async def room(self) -> None:
        """Wait until records in flight are below :attr:`window` (or the producer stops)."""
        loop = asyncio.get_running_loop()
        while self.in_flight >= self.window and not self._stopping:
            room = self._room.get(loop)
            if room is None:
                room = self._room[loop] = asyncio.Event()
            room.clear()
            await room.wait()

    def stop(self, flush: Callable[[float], int], timeout: float) -> int:
        """Stop serving; ``flush(timeout)`` (on this thread) serves the last reports, and what is not
        acknowledged by then is purged, so its future fails rather than waiting forever. Returns how many were
        purged."""
        self._stopping = True
        self._wake.set()
        for loop, room in list(self._room.items()):  # sends waiting for room: they see the stop
            _call_soon(loop, room.set)
        if self._thread is not threading.current_thread():
            self._thread.join()
        left = flush(timeout)
        if left:
            self._kafka.purge()
            self._kafka.flush(1.0)  # the purged records' reports, failed
            log.warning("%s: %d records not acknowledged within %.1f s of closing; their futures fail", self.name,
                        left, timeout)
        if self.in_flight > 0:  # tracked before the stop, produced after the flush (a produce on an executor)
            self._kafka.flush(1.0)
            self._kafka.purge()
            self._kafka.flush(1.0)
        self.hand_over()
        return left

    def _serve(self) -> None:
        """Poll librdkafka while records are in flight, handing each poll's reports to their loops; sleep on the
        wake event otherwise."""
        kafka = self._kafka
        while not self._stopping:
            if not self.in_flight:
                self._wake.wait(1.0)
                self._wake.clear()
                self.hand_over()  # reports served on a loop's own thread (a full queue) while none was in flight
                continue
            try:
                kafka.poll(ACK_POLL_S)
            except Exception:  # a fatal producer error: its records' reports still come (failed), so keep serving
                log.exception("%s: serving delivery reports failed", self.name)
                time.sleep(ACK_POLL_S)
            self.hand_over()

    def hand_over(self) -> None:
        """The reports gathered so far, to their loops: one wake-up each, in the order the reports came (the
        batches are scheduled under the lock, so two threads handing over cannot swap them)."""
        with self._count:
            if not self._reports:
                return
            reports, self._reports = self._reports, {}
            for loop, batch in reports.items():
                _call_soon(loop, self._settle_on_loop, batch, self._room.get(loop))
            if len(self._room) > len(reports) and self.in_flight < self.window:
                # a loop waiting for room that had no report here (a copy: another loop may add its event meanwhile)
                for loop, room in list(self._room.items()):
                    if loop not in reports:
                        _call_soon(loop, room.set)

    def _settle_on_loop(self, batch: list[Report], room: asyncio.Event | None) -> None:
        if room is not None:
            room.set()
        self._settle(batch)


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> None:
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:  # the loop was closed before its reports came: nobody awaits them
        pass
