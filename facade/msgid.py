"""Unique, sortable message ids (RocketMQ's ``UNIQ_KEY``).

32 upper-case hex digits: 12 of epoch milliseconds, 4 of the pid, 6 random per
process, 10 of a per-process counter. Ids sort by creation time across processes
(to the millisecond) and strictly within one process.
"""

from __future__ import annotations

import itertools
import os
import secrets
import threading
import time

_lock = threading.Lock()
_counter = itertools.count()
_state = {"pid": -1, "salt": ""}


def new_msg_id() -> str:
    """A fresh message id, e.g. ``'0193A1B2C3D4' '1F2A' 'ABCDEF' '0000000001'`` (joined)."""
    pid = os.getpid()
    with _lock:
        if _state["pid"] != pid:  # forked: a new salt so children never collide with the parent
            _state["pid"], _state["salt"] = pid, secrets.token_hex(3)
        n = next(_counter)
    return f"{int(time.time() * 1000):012X}{pid & 0xFFFF:04X}{_state['salt'].upper()}{n & 0xFFFFFFFFFF:010X}"


def msg_id_timestamp_ms(msg_id: str) -> int:
    """Epoch ms at which ``msg_id`` was made."""
    return int(msg_id[:12], 16)
