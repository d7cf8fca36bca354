"""What the transaction checker counts (read by :meth:`TransactionChecker.stats` and its metrics)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CheckerStats:
    """Counters since start (and, in :meth:`TransactionChecker.stats`, gauges of the moment)."""

    scans: int = 0
    steps: int = 0
    done_by_op: int = 0
    closed_by_transaction: int = 0
    closed_by_marker: int = 0
    checks_sent: int = 0
    check_requests_lost: int = 0
    rewritten: int = 0  # halves re-written with one more check (each then checked back)
    max_checked: int = 0
    malformed: int = 0
    ended_commit: int = 0  # op records read that commit a transaction
    ended_rollback: int = 0  # op records read that roll one back
    locks_lost: int = 0
    resets: int = 0
    commits: int = 0
    partitions_owned: int = 0
    buffered_halves: int = 0
    peak_buffered_halves: int = 0
    waiting_ops: int = 0
