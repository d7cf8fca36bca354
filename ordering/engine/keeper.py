"""The engine's keeper: the Redis side of ownership, on a thread of its own.

Membership heartbeats and lock renewals (with each partition's transition state)
run here, never on the thread that owns the Kafka client: a slow Redis node delays
neither fetching nor handlers, and a drop-in consumer whose application is busy
between ``poll()`` calls keeps its locks, as Kafka's heartbeat thread keeps its
membership. What the keeper learns -- members changed, locks lost -- goes to the
poll thread, which alone acts on the Kafka client.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from rocketkafka.ordering.group.allocation import Member
from rocketkafka.ordering.locks import LockTable
from rocketkafka.ordering.group.membership import Membership
from rocketkafka.topic_partition import TP

log = logging.getLogger(__name__)

#: Least time between heartbeats asked for by announcements (s): every node delivers each announcement, and
#: the first beat after it already reads the new member list from all of them.
BEAT_GAP_S = 0.1


class Keeper:
    """Heartbeats and renewals on a daemon thread.

    Parameters:
        membership: the group's membership (``None``: no heartbeats, e.g. broadcasting).
        locks: the lock table (``None``: no locks).
        progress: ``() -> {lock: (delivered, acked)}`` read before each renewal.
        on_members: called with the live members when they changed.
        on_lost: called with the locks a renewal reported lost.
        heartbeat_s, tick_s: heartbeat interval, and how often to look whether something is due.
    """

    def __init__(self, membership: Membership | None, locks: LockTable | None,
                 progress: Callable[[], dict[TP, tuple[int, int]]],
                 on_members: Callable[[list[Member]], None], on_lost: Callable[[set[TP]], None],
                 heartbeat_s: float, tick_s: float, name: str) -> None:
        self._membership, self._locks, self._progress = membership, locks, progress
        self._on_members, self._on_lost = on_members, on_lost
        self._heartbeat_s, self._tick_s = heartbeat_s, tick_s
        self._members: list[Member] = []
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by stop() and beat_now(): the loop looks at once
        self._beat_now = False
        self._thread = threading.Thread(target=self._run, name=f"rk-keeper-{name}", daemon=True)
        self.failures = 0  # iterations that raised (logged; the keeper carries on)

    def start(self, members: list[Member]) -> None:
        self._members = members
        self._thread.start()

    def beat_now(self) -> None:
        """Heartbeat at once (any thread): a join or leave was announced, and only a heartbeat reads the new
        member list (waiting for the next one delayed every split by up to the heartbeat interval)."""
        self._beat_now = True
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(10)

    def _run(self) -> None:
        next_beat, last_beat = time.monotonic() + self._heartbeat_s, float("-inf")
        while True:
            wait = self._tick_s
            if self._beat_now:
                wait = max(0.0, min(wait, last_beat + BEAT_GAP_S - time.monotonic()))
            self._wake.wait(wait)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                now = time.monotonic()
                if self._membership is not None and (now >= next_beat or
                                                     (self._beat_now and now >= last_beat + BEAT_GAP_S)):
                    self._beat_now = False
                    last_beat, next_beat = now, now + self._heartbeat_s
                    self._heartbeat()
                if self._locks is not None and self._locks.renew_due():
                    self._renew()
            except Exception:  # a keeper never dies of one bad round: the next one may succeed
                self.failures += 1
                log.exception("ownership keeper round failed")

    def _heartbeat(self) -> None:
        assert self._membership is not None
        members = self._membership.refresh(self._members)
        if members is not None:
            self._members = members
            self._on_members(members)

    def _renew(self) -> None:
        assert self._locks is not None
        for tp, (delivered, acked) in self._progress().items():
            self._locks.record_progress(tp, delivered, acked)
        lost = self._locks.renew_batch()
        if lost:
            self._on_lost(lost)
