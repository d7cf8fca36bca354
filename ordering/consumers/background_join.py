"""Joining a group off the caller's thread, retried while Redis or the broker is away.

Why: a confluent-kafka ``subscribe`` never fails or stalls because the cluster is down --
librdkafka joins in the background and reports what goes wrong through ``error_cb``. The
drop-in consumer's join (Redis membership, lock table, the topics' partition counts) is
:meth:`OwnershipEngine.open`; this runs it on a thread of its own, again and again with a
growing pause, until it succeeds or is cancelled, and keeps the failures for the caller's
``poll()`` to report. The engine's ``open`` touches none of the caller's client, so it may
run on any thread; everything after it (``maintain``) runs on the caller's.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from rocketkafka.ordering.engine.engine import OwnershipEngine

#: The pause after the first failed join (s); it doubles after every failure up to :data:`MAX_RETRY_S`.
FIRST_RETRY_S = 0.5
#: The longest pause between two join attempts (s), librdkafka's ``reconnect.backoff.max.ms`` default.
MAX_RETRY_S = 10.0


class BackgroundJoin:
    """Opens engines made by ``make_engine`` on a daemon thread until one opens (or :meth:`cancel`)."""

    def __init__(self, make_engine: Callable[[], OwnershipEngine], name: str) -> None:
        self._make_engine = make_engine
        self._lock = threading.Lock()
        self._opened: OwnershipEngine | None = None
        self._failures: deque[BaseException] = deque()
        self.first_failure: BaseException | None = None  # the first attempt's error, if it failed
        self._cancelled = threading.Event()
        self._first_done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rk-join-{name}", daemon=True)
        self._thread.start()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the first attempt's outcome; ``True`` when it is known."""
        return self._first_done.wait(timeout)

    def take(self) -> OwnershipEngine | None:
        """The opened engine (once; the caller owns it from now on), or ``None`` while joining."""
        with self._lock:
            engine, self._opened = self._opened, None
        return engine

    def failures(self) -> list[BaseException]:
        """The attempts' errors not yet asked for, oldest first."""
        taken = []
        while self._failures:
            taken.append(self._failures.popleft())
        return taken

    def cancel(self) -> None:
        """Stop retrying; an engine opened meanwhile (or later, by an attempt under way) is closed."""
        self._cancelled.set()
        engine = self.take()
        if engine is not None:
            engine.close()

    def _run(self) -> None:
        pause = FIRST_RETRY_S
        while not self._cancelled.is_set():
            engine = self._make_engine()
            try:
                engine.open()
            except Exception as exc:  # every failure is the caller's to hear about, and to retry
                self.first_failure = self.first_failure or exc
                self._failures.append(exc)
                self._first_done.set()
                if self._cancelled.wait(pause):
                    return
                pause = min(pause * 2, MAX_RETRY_S)
                continue
            with self._lock:
                wanted = not self._cancelled.is_set()
                if wanted:
                    self._opened = engine
            self._first_done.set()
            if not wanted:
                engine.close()  # cancelled while it opened
            return
