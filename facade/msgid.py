"""Unique, sortable message ids (RocketMQ's ``UNIQ_KEY``).

32 upper-case hex digits: 12 of epoch milliseconds, 4 of the pid, 6 random per
process, 10 of a per-process counter. Ids sort by creation time across processes
(to the millisecond) and strictly within one process. This sits on every send,
so it is written for speed: the process part is fixed once (and again after a
fork), the counter is lock-free (``itertools.count`` is atomic under the GIL).
"""

from __future__ import annotations

import itertools
import os
import secrets
import time


def _process_part() -> str:
    return f"{os.getpid() & 0xFFFF:04X}{secrets.token_hex(3).upper()}"


_process = _process_part()
_process_bytes = _process.encode()
_counter = itertools.count()


#: (epoch ms, id prefix of that ms, the ms as decimal ASCII): made once per millisecond, not per message
_stamp: tuple[int, bytes, bytes] = (-1, b"", b"")


def _after_fork() -> None:
    global _process, _process_bytes, _counter, _stamp
    _process, _counter = _process_part(), itertools.count()
    _process_bytes = _process.encode()
    _stamp = (-1, b"", b"")


os.register_at_fork(after_in_child=_after_fork)


def new_msg_id_at(now_ms: int) -> str:
    """A fresh message id stamped with ``now_ms`` (callers that also need the time pass it in)."""
    return f"{now_ms:012X}{_process}{next(_counter) & 0xFFFFFFFFFF:010X}"


def new_msg_id_bytes(_time_ns=time.time_ns) -> bytes:
    """A fresh message id as ASCII bytes, ready for a header (the producer's hot path)."""
    return b"%012X%b%010X" % (_time_ns() // 1_000_000, _process_bytes, next(_counter) & 0xFFFFFFFFFF)


def new_msg_id_and_born(_time_ns=time.time_ns) -> tuple[bytes, bytes]:
    """``(message id, born time)`` as header-ready ASCII bytes (the send hot path).

    The time part of the id and the born time are formatted once per millisecond; only the
    counter is formatted per message.
    """
    global _stamp
    now_ms = _time_ns() // 1_000_000
    stamp = _stamp
    if stamp[0] != now_ms:
        stamp = _stamp = (now_ms, b"%012X%b" % (now_ms, _process_bytes), b"%d" % now_ms)
    return stamp[1] + b"%010X" % (next(_counter) & 0xFFFFFFFFFF), stamp[2]


def new_msg_id() -> str:
    """A fresh message id, e.g. ``'0193A1B2C3D4' '1F2A' 'ABCDEF' '0000000001'`` (joined)."""
    return new_msg_id_at(time.time_ns() // 1_000_000)


def msg_id_timestamp_ms(msg_id: str) -> int:
    """Epoch ms at which ``msg_id`` was made."""
    return int(msg_id[:12], 16)
