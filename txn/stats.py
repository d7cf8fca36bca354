"""What the transaction checker counts (read by :meth:`TransactionChecker.stats` and its metrics)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CheckerStats:
    """Counters since start (and, in :meth:`TransactionChecker.stats`, gauges of the moment)."""

    scans: int = 0
    """Scans of half partitions begun."""
    steps: int = 0
    """Steps of a scan that decided halves (each asks for a commit of the progress)."""
    done_by_op: int = 0
    """Halves an op record closed."""
    closed_by_transaction: int = 0
    """Halves closed because their transaction was ended through another copy of it."""
    closed_by_marker: int = 0
    """Halves closed by an end marker."""
    checks_sent: int = 0
    """Check requests sent to producer groups."""
    check_requests_lost: int = 0
    """Check requests that could not be written."""
    rewritten: int = 0
    """Halves re-written with one more check (each then checked back)."""
    max_checked: int = 0
    """Halves moved to the max-check topic (the checker's dead letters)."""
    malformed: int = 0
    """Half records the checker could not read (moved to the max-check topic)."""
    ended_commit: int = 0
    """Op records read that commit a transaction."""
    ended_rollback: int = 0
    """Op records read that roll one back."""
    locks_lost: int = 0
    """Partition locks lost because a renewal failed or came too late (the engine's count)."""
    resets: int = 0
    """Partitions reset to their committed progress after a failed write."""
    commits: int = 0
    """Half/op progress commits (the engine's count)."""
    partitions_owned: int = 0
    """Half partitions this instance holds now (a gauge)."""
    buffered_halves: int = 0
    """Halves fetched and not decided yet (a gauge)."""
    peak_buffered_halves: int = 0
    """The most halves buffered at once since start."""
    waiting_ops: int = 0
    """Op records read whose halves lie ahead (a gauge)."""
