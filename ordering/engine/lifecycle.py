"""The life of a client or service: one state enum, the transitions that are allowed, and the failure
that ended it.

Shared by the push consumer, the drop-in consumer, the delay forwarder and the
transaction checker::

    NEW --start()--> STARTING --> RUNNING --shutdown()--> CLOSING --> CLOSED
                        |             |
                        |             +--(the poll thread died)--> FAILED --shutdown()--> CLOSED
                        +--(start failed: everything opened is closed again)--> CLOSED

A failure of the poll thread is never silent: :meth:`Lifecycle.fail` records it, the
owner releases its partitions, and every later API call raises :class:`ConsumerFailedError`
with the original exception as its cause (``health()`` reports it without raising).
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass
from typing import Protocol

from rocketkafka.errors import ConsumerFailedError, StateError


class State(enum.Enum):
    """Where a client or service is in its life."""

    NEW = "new"
    STARTING = "starting"
    RUNNING = "running"
    CLOSING = "closing"
    CLOSED = "closed"
    FAILED = "failed"


@dataclass(frozen=True)
class Health:
    """A snapshot for probes and dashboards: the state, the failure if any, what is owned, and the refusals
    the process is waiting out (``refused``: a write or read no ACL allows any more, retried where it is;
    :data:`rocketkafka.refusals.REFUSALS`, one per process: each component's health lists every component's,
    each naming its component and principal)."""

    state: State
    error: BaseException | None
    partitions: int
    refused: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True while running without a failure."""
        return self.state is State.RUNNING and self.error is None


class Lifecycle:
    """The state of one client or service, changed only through the allowed transitions.

    Parameters:
        name: how errors name the thing (``"consumer host@123@ab12 of group orders"``).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._state = State.NEW
        self._error: BaseException | None = None
        self._lock = threading.Lock()

    @property
    def state(self) -> State:
        return self._state

    @property
    def error(self) -> BaseException | None:
        """The exception that made it FAILED, else ``None``."""
        return self._error

    def starting(self) -> None:
        """NEW -> STARTING.

        Raises:
            StateError: it was started before (``start()`` works once).
        """
        with self._lock:
            if self._state is not State.NEW:
                raise StateError(f"{self.name} is {self._state.value}; start() works once")
            self._state = State.STARTING

    def running(self) -> None:
        """STARTING -> RUNNING."""
        with self._lock:
            if self._state is State.STARTING:
                self._state = State.RUNNING

    def start_failed(self) -> None:
        """STARTING -> CLOSED (the caller closed what it had opened)."""
        with self._lock:
            self._state = State.CLOSED

    def fail(self, error: BaseException) -> None:
        """The poll thread died of ``error``: RUNNING (or STARTING, CLOSING) -> FAILED."""
        with self._lock:
            if self._state is not State.CLOSED:
                self._error = error
                self._state = State.FAILED

    def closing(self) -> bool:
        """RUNNING or FAILED -> CLOSING; False when it is closing or closed already (close is idempotent).

        Raises:
            StateError: it was never started.
        """
        with self._lock:
            if self._state is State.NEW:
                raise StateError(f"{self.name} was never started; there is nothing to shut down")
            if self._state in (State.CLOSING, State.CLOSED):
                return False
            self._state = State.CLOSING
            return True

    def closed(self) -> None:
        """CLOSING -> CLOSED."""
        with self._lock:
            self._state = State.CLOSED

    def check(self, action: str = "this call") -> None:
        """Raise unless RUNNING: the failure of a dead poll thread, or a misuse.

        Raises:
            ConsumerFailedError: the poll thread died (its exception is the cause).
            StateError: not started yet, or closed.
        """
        state, error = self._state, self._error
        if state is State.RUNNING:
            return
        if error is not None:
            raise ConsumerFailedError(self.name, error) from error
        if state in (State.NEW, State.STARTING):
            raise StateError(f"{self.name} is not started: call start() before {action}")
        raise StateError(f"{self.name} is {state.value}: {action} needs a running one")


class _Engine(Protocol):
    lifecycle: Lifecycle

    def health(self) -> Health: ...


class EngineStatus:
    """``state`` and ``health()`` for an owner that makes its ownership engine in ``start()``.

    Before ``start()`` there is no engine (NEW); a ``start()`` that failed drops it again and
    sets ``_start_failed`` (CLOSED); otherwise the engine's lifecycle says.
    """

    _engine: _Engine | None
    _start_failed: bool

    @property
    def state(self) -> State:
        """Where it is in its life (CLOSED after a start() that failed)."""
        if self._engine is not None:
            return self._engine.lifecycle.state
        return State.CLOSED if self._start_failed else State.NEW

    def health(self) -> Health:
        """State, the failure of a dead poll thread (if any) and how many partitions are owned; never
        raises."""
        engine = self._engine
        if engine is None:
            return Health(self.state, None, 0)
        return engine.health()
