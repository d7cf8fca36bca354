"""Futures an orderly listener may return: telling one apart, and waiting for several as one."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any


def is_future(value: Any) -> bool:
    """A :class:`~concurrent.futures.Future`, or an object with its ``add_done_callback`` and
    ``exception``."""
    return isinstance(value, Future) or (hasattr(value, "add_done_callback") and hasattr(value, "exception"))


def all_of(futures: list[Any] | None) -> Any:
    """One future resolving when all of ``futures`` did (the first failure fails it); ``None`` for none."""
    if not futures:
        return None
    if len(futures) == 1:
        return futures[0]
    combined: Future = Future()
    remaining = [len(futures)]

    def done(f: Any) -> None:
        error = f.exception()
        if error is not None and not combined.done():
            combined.set_exception(error)
            return
        remaining[0] -= 1
        if remaining[0] == 0 and not combined.done():
            combined.set_result(None)

    for f in futures:
        f.add_done_callback(done)
    return combined
