"""Waiting for a condition in tests, with a deadline instead of a sleep."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(predicate: Callable[[], object], timeout: float = 30.0, interval: float = 0.05) -> bool:
    """True as soon as ``predicate()`` is truthy; False when ``timeout`` seconds passed first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False
