"""Delivery reports as futures: what a handler hands the scheduler when its records are durable only later.

:class:`Ack` is one delivery (or anything that resolves once), :class:`BatchAck` many:
it resolves when it is closed and every delivery it tracked is in, failing with the
first error. They behave as :class:`concurrent.futures.Future` where the settlement
looks (``done``, ``exception``, ``add_done_callback``, ``result``; never cancelled) and cost less: a
forwarder makes one per batch of produces on its hot path.

>>> ack = BatchAck(); done = ack.track(); ack = ack.close(); done(None, None); ack.done()
True
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from rocketkafka.refusals import send_error


class Ack:
    """A light future of one delivery report: what the orderly consumer needs of a listener's future.

    ``done()``, ``exception()``, ``add_done_callback(fn)`` and ``result(timeout)`` behave as
    :class:`concurrent.futures.Future`'s; creating and resolving one takes no lock (the GIL makes
    ``list.pop`` atomic, so each callback runs exactly once, in whichever thread gets it).
    """

    __slots__ = ("_done", "_error", "_callbacks")

    def __init__(self) -> None:
        self._done = False
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Ack], Any]] = []

    def resolve(self, error: BaseException | None = None) -> None:
        self._error = error
        self._done = True
        self._run_callbacks()

    def done(self) -> bool:
        return self._done

    def failed_so_far(self) -> BaseException | None:
        """The first failure reported so far, even while other deliveries are still out (no waiting)."""
        return self._error

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._error

    def result(self, timeout: float | None = None) -> None:
        self._wait(timeout)
        if self._error is not None:
            raise self._error

    def add_done_callback(self, fn: Callable[[Ack], Any]) -> None:
        self._callbacks.append(fn)
        if self._done:
            self._run_callbacks()

    def _run_callbacks(self) -> None:
        callbacks = self._callbacks
        while callbacks:
            try:
                fn = callbacks.pop()
            except IndexError:
                return
            fn(self)

    def _wait(self, timeout: float | None) -> None:
        if not self._done:
            event = threading.Event()
            self.add_done_callback(lambda _ack: event.set())
            if not event.wait(timeout):
                raise TimeoutError("delivery report not in yet")


class BatchAck(Ack):
    """The ack of several deliveries: resolves once it is closed and every tracked delivery is in.

    The first failure becomes its error; a write no ACL allows names ``principal``
    (:func:`rocketkafka.refusals.send_error`). A delivery tracked with the index of the first record it
    covers (``track(first)``, ``track_many(first)``, ``follow(ack, first)``) lets the consumer rewind to
    the first failed record rather than the first of the batch (:attr:`failed_from`): what was delivered
    before it is not written twice.
    """

    __slots__ = ("_pending", "_tracked", "_closed", "_lock", "_trackers", "_principal", "failed_topics",
                 "failed_from")

    def __init__(self, principal: str | None = None) -> None:
        super().__init__()
        self._principal = principal
        self._pending = self._tracked = 0  # _pending may dip below 0 before close(): reports can beat the count
        self._closed = False
        self._lock = threading.Lock()
        self._trackers: list[_Tracker] = []
        #: topics of failed deliveries (a few): a transaction's refused commit names none, its purged records do
        self.failed_topics: set[str] = set()
        #: once a delivery failed: the lowest ``first`` index of the failed deliveries (-1 when one was
        #: tracked without an index), so every record before it was delivered; ``None`` while none failed
        self.failed_from: int | None = None

    def track(self, first: int | None = None) -> Callable[[Any, Any], None]:
        """One more delivery to wait for; returns its ``on_delivery(err, msg)`` callback. ``first``: the
        index of the record it writes (see the class docstring)."""
        with self._lock:
            self._pending += 1
            self._tracked += 1
        return self._one_done if first is None else partial(self._one_done, first=first)

    def track_many(self, first: int | None = None) -> _Tracker:
        """A delivery callback for many deliveries: call ``add()`` before each produce (cheaper than track()).
        ``first``: the index of the first record it writes, or ``None``."""
        tracker = _Tracker(self, first)
        with self._lock:
            self._trackers.append(tracker)
        return tracker

    def follow(self, other: Ack, first: int | None = None) -> None:
        """Wait for ``other`` too (``first``: the index of the first record it writes, or ``None``)."""
        done = self.track(first)
        other.add_done_callback(lambda ack: done(ack.exception(), None))

    def close(self) -> BatchAck | None:
        """No more deliveries will be tracked; None when there were none (nothing to wait for)."""
        with self._lock:
            for tracker in self._trackers:
                self._pending += tracker.added
                self._tracked += tracker.added
            self._closed = True
            if self._pending:
                return self
        if self._tracked:
            self.resolve(self._error)
            return self
        return None

    def _one_done(self, err: Any, _msg: Any, first: int | None = None) -> None:
        with self._lock:
            self._pending -= 1
            if err is not None:
                at = -1 if first is None else first
                self.failed_from = at if self.failed_from is None else min(self.failed_from, at)
                if len(self.failed_topics) < 8:
                    self.failed_topics.add(_topic_of(_msg))
                if self._error is None:
                    self._error = err if isinstance(err, BaseException) else send_error(_topic_of(_msg), err,
                                                                                         self._principal)
            fire = self._closed and not self._pending
        if fire:
            self.resolve(self._error)


class _Tracker:
    """``on_delivery`` for many produces of one :class:`BatchAck`: counts without a lock on the produce side.

    ``add()`` runs on the worker before each produce; the count moves into the ack at
    :meth:`BatchAck.close` time and with each report (both under the ack's lock).
    """

    __slots__ = ("ack", "added", "first")

    def __init__(self, ack: BatchAck, first: int | None = None) -> None:
        self.ack = ack
        self.added = 0
        self.first = first

    def add(self) -> None:
        self.added += 1

    def cancel(self) -> None:
        self.added -= 1

    def __call__(self, err: Any, msg: Any) -> None:
        self.ack._one_done(err, msg, self.first)


def _topic_of(msg: Any) -> str:
    try:
        return msg.topic() or "?"
    except Exception:
        return "?"
