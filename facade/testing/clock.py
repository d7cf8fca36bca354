"""A wall clock that jumps, for fault tests only: NTP stepping a host's clock, or an operator setting it.

A process started with ``ROCKETKAFKA_TEST_CLOCK_FILE=<path>`` calls :func:`install_from_env`;
from then on ``time.time()`` and ``time.time_ns()`` in that process read the true clock plus
the offset (seconds, a float) written in that file, re-read whenever the process gets
``SIGUSR2``. :func:`jump` writes the file and sends the signal. Monotonic clocks are left
alone, as a real wall-clock step leaves them: the point is to show that nothing in the
ownership engine measures leases or expiries with the wall clock.

Recorders that must stay truthful while the clock jumps (the test histories) use
:func:`true_time`, captured before any patch.

Never use this outside tests: it patches the :mod:`time` module of the whole process.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

#: The environment variable naming the offset file.
CLOCK_FILE_ENV = "ROCKETKAFKA_TEST_CLOCK_FILE"
#: The signal that makes a process re-read its offset file.
JUMP_SIGNAL = signal.SIGUSR2

_true_time = time.time
_true_time_ns = time.time_ns
_offset_s = 0.0


def true_time() -> float:
    """The real wall clock (epoch seconds), whatever offset is installed."""
    return _true_time()


def offset() -> float:
    """The offset (s) this process adds to its wall clock now."""
    return _offset_s


def _read(path: Path) -> float:
    try:
        return float(path.read_text().strip() or 0)
    except (OSError, ValueError) as exc:
        log.warning("test clock: cannot read offset from %s (%s); keeping %g s", path, exc, _offset_s)
        return _offset_s


def install_from_env() -> bool:
    """Patch ``time.time``/``time.time_ns`` when :data:`CLOCK_FILE_ENV` is set (main thread only); True if so."""
    global _offset_s
    path = os.environ.get(CLOCK_FILE_ENV)
    if not path:
        return False
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("install_from_env must run on the main thread (it installs a signal handler)")
    file = Path(path)
    _offset_s = _read(file) if file.exists() else 0.0

    def reread(*_: object) -> None:
        global _offset_s
        _offset_s = _read(file)
        log.warning("test clock: wall clock offset is now %+g s", _offset_s)

    time.time = lambda: _true_time() + _offset_s
    time.time_ns = lambda: _true_time_ns() + int(_offset_s * 1e9)
    signal.signal(JUMP_SIGNAL, reread)
    return True


def jump(pid: int, path: Path | str, offset_s: float) -> None:
    """Set the wall clock of process ``pid`` (started with :data:`CLOCK_FILE_ENV` = ``path``) to true + ``offset_s``."""
    Path(path).write_text(f"{offset_s!r}\n")
    os.kill(pid, JUMP_SIGNAL)
