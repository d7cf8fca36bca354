"""The engine's own Kafka consumers: each made with a statistics callback, replaced once it loses
every broker.

librdkafka (2.10 and later) forgets the brokers a Metadata answer leaves out, and an answer
listing none -- a cluster whose every broker is fenced for a moment, as a single-node KRaft
broker is after a stall longer than ``broker.session.timeout.ms`` -- leaves the client
without any broker for good (librdkafka issue 5301): no fetch, no commit, while the keeper
still renews the locks, so no other member takes the partitions either (the forgotten
broker lingers in the client's statistics in state ``INIT``, its thread ended; the group
coordinator has no address). :class:`OwnClients` reads the current client's statistics
every :data:`CLIENT_CHECK_MS`; after two in a row in which no broker is connected or trying
to be, :attr:`OwnClients.lost_every_broker` tells the engine to build a new client,
assign it what the claims own, and let the old one go (:meth:`OwnClients.replace`). A
broker that is down keeps its entry trying to reconnect, so an outage replaces nothing.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from rocketkafka.config import kafka_client
from rocketkafka.ordering.engine.owned import OwnedLock

log = logging.getLogger(__name__)

#: How often librdkafka reports its statistics, which say whether the client still knows a broker (ms).
CLIENT_CHECK_MS = 5000
#: Statistics in a row without a broker in reach before the client is replaced (one may fall
#: between two states).
BROKERLESS_REPORTS = 2
#: Seconds closing waits for each replaced client's close to finish.
CLOSE_REPLACED_S = 5.0


class OwnClients:
    """Makes an engine's Kafka consumers and tells when the current one must be replaced (poll thread).

    Parameters:
        name: how logs name the owner.
        config: the confluent-kafka consumer configuration; a ``stats_cb`` in it still gets every
            report, and its own ``statistics.interval.ms`` (``0``: never replace) stands.
    """

    def __init__(self, name: str, config: Mapping[str, Any]) -> None:
        self.name = name
        self._config = dict(config)
        self.current: Consumer | None = None
        self.brokerless = 0  # statistics of the current client in a row that named no broker
        self.replaced = 0  # clients replaced after they lost every broker
        self._closers: list[threading.Thread] = []  # threads closing replaced clients

    @property
    def lost_every_broker(self) -> bool:
        """Whether the current client's last reports showed no broker connected or trying to be."""
        return self.brokerless >= BROKERLESS_REPORTS

    def new(self) -> Consumer:
        """A new current client; reports of the ones before it no longer count."""
        made: list[Consumer] = []

        def on_stats(stats: str) -> None:
            # a replaced client, closing on its own thread, may still report
            if made and made[0] is self.current:
                self._on_stats(stats)

        config = dict(self._config)
        config.setdefault("statistics.interval.ms", CLIENT_CHECK_MS)
        if not int(config["statistics.interval.ms"]):
            log.info("%s: statistics.interval.ms=0, so a Kafka client that loses every broker is not "
                     "replaced", self.name)
        theirs = config.get("stats_cb")
        config["stats_cb"] = on_stats if theirs is None else _both(on_stats, theirs)
        client = kafka_client(Consumer, config)
        made.append(client)
        if self.current is not None:
            self.replaced += 1
        self.current, self.brokerless = client, 0
        return client

    def replace(self, owned: Collection[OwnedLock], leaving: Iterable[OwnedLock], partitions: int) -> None:
        """A new current client goes on where the old one stopped fetching; the old one is retired.

        It is assigned every ``owned`` partition at its :attr:`OwnedLock.fetch_from` (paused ones
        stay paused), and nothing counts as committed any more, of ``owned`` or ``leaving`` locks:
        commits the old client held may never land, so every position is committed again.
        ``partitions`` is how many partitions it goes on with (the engine's count, for the log).
        """
        old = self.current
        try:
            new = self.new()
            log.warning("%s: the Kafka client reaches for no broker any more (it forgot them after a "
                        "Metadata answer that listed none, as while every broker is fenced); a new client "
                        "goes on with its %d partition(s)", self.name, partitions)
            for o in [*owned, *leaving]:
                o.committed.clear()
            assignment = [TopicPartition(*tp, o.fetch_from[tp]) for o in owned for tp in o.partitions]
            if assignment:
                new.incremental_assign(assignment)
            paused = [TopicPartition(*tp) for o in owned for tp in o.paused]
            if paused:
                new.pause(paused)
        finally:  # the old client goes whatever happened here
            if old is not None and old is not self.current:
                self.retire(old)

    def retire(self, old: Consumer) -> None:
        """Close a replaced client on a thread of its own: without a broker, closing may wait."""
        closer = threading.Thread(target=_close_quietly, args=(old, self.name), name="rk-client-close",
                                  daemon=True)
        closer.start()
        self._closers.append(closer)

    def join_retired(self) -> None:
        """Wait up to :data:`CLOSE_REPLACED_S` for each replaced client's close."""
        for closer in self._closers:
            closer.join(CLOSE_REPLACED_S)
            if closer.is_alive():
                log.warning("%s: a replaced Kafka client is still closing after %g s", self.name,
                            CLOSE_REPLACED_S)
        self._closers.clear()

    def _on_stats(self, stats: str) -> None:
        """librdkafka's statistics (JSON, served on the poll thread): does the client still reach for a
        broker?"""
        self.brokerless = 0 if reaches_a_broker(stats) else self.brokerless + 1


def reaches_a_broker(stats: str) -> bool:
    """Whether librdkafka's statistics show the client connected to a broker or trying to connect to one.

    False when every broker it learned or was configured with sits in ``INIT`` (a broker thread
    that ended: librdkafka forgot it) or there is none, and the group coordinator is not up.
    Statistics that cannot be read count as reaching one: only a clear picture replaces a client.
    """
    try:
        brokers = json.loads(stats).get("brokers", {})
    except (ValueError, AttributeError):
        return True
    for broker in brokers.values():
        source, state = broker.get("source"), broker.get("state")
        if (source in ("learned", "configured") and state != "INIT") or (source == "logical"
                                                                         and state == "UP"):
            return True
    return False


def _both(first: Callable[[str], None], second: Callable[[str], None]) -> Callable[[str], None]:
    """A statistics callback calling ``first``, then the caller's own ``second``."""
    def both(stats: str) -> None:
        first(stats)
        second(stats)
    return both


def _close_quietly(client: Any, name: str) -> None:
    """Close a replaced Kafka client (its own thread: without a broker, closing may wait)."""
    try:
        client.close()
    except Exception:
        log.warning("%s: closing the replaced Kafka client failed", name, exc_info=True)
