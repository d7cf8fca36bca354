"""The ownership engine: the one poll loop of the code base, owning partitions and running a step on them.

Members of a group split the partitions of a step's topics by an allocation strategy
over the live members (Redis membership), take each partition's lock in the Redis lock
table before fetching it, and commit the offsets the step says are done. Kafka's group
coordinator assigns nothing: the engine ``assign()``s what it won. A partition leaving
is drained, committed, then unlocked; a lock lost is revoked at once and never committed
(:mod:`~rocketkafka.ordering.engine.holdings` says why).

Threads: the poll thread owns the Kafka client and the claims -- the engine's own
(:mod:`~rocketkafka.ordering.engine.poll_loop`) or the caller's (the drop-in consumer calls
:meth:`maintain` and the client itself); the keeper (:mod:`~rocketkafka.ordering.engine.keeper`)
does the Redis side. The push consumer, the drop-in consumer, the delay forwarder and
the transaction checker all run on this engine with their own :class:`~rocketkafka.ordering.work.step.Step`.

Flow control bounds memory (:mod:`~rocketkafka.ordering.engine.flow_control`); a Kafka client that lost
every broker is replaced (:mod:`~rocketkafka.ordering.engine.clients` says when, and why librdkafka needs it).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.errors import AuthorizationError, BrokerUnavailableError, StateError
from rocketkafka.refusals import REFUSALS
from rocketkafka.ordering.engine import holdings
from rocketkafka.ordering.engine.access import check_start_access, commit_failed, fetch_error
from rocketkafka.ordering.group.allocation import AllocationStrategy, Member, strategy_named
from rocketkafka.ordering.engine.clients import OwnClients
from rocketkafka.ordering.engine.commits import commit_offsets, due_offsets, forget
from rocketkafka.ordering.engine.flow_control import FlowGauge, pause_and_resume, throttle
from rocketkafka.ordering.engine.keeper import Keeper
from rocketkafka.ordering.engine.lifecycle import Health, Lifecycle
from rocketkafka.ordering.locks import LockTable
from rocketkafka.ordering.group.membership import Membership, member_info
from rocketkafka.ordering.engine.metrics import ConsumerMetrics, publish_states
from rocketkafka.ordering.engine.options import KAFKA_CONSUMER_DEFAULTS, OwnershipOptions
from rocketkafka.ordering.engine.owned import OwnedLock, PartitionState
from rocketkafka.ordering.engine.poll_loop import PollLoop, fetch_records, route
from rocketkafka.ordering.engine.resets import OffsetResets, leave_for_resets
from rocketkafka.ordering.work.step import Step
from rocketkafka.topic_partition import TP

log = logging.getLogger(__name__)

#: How long a graceful shutdown waits for claims to drain before it gives up on them (s).
RELEASE_PATIENCE_S = 30.0
#: How often :meth:`OwnershipEngine.maintain` looks for due work when nothing woke it (s).
MAINTAIN_EVERY_S = 0.005


class OwnershipEngine:
    """Owns partitions of ``step``'s topics for one member of ``group`` and feeds them to the step.

    Parameters:
        group: the group whose members split the partitions (membership and lock names).
        settings: broker, Redis nodes, key and topic prefixes.
        options: ownership settings (timings, allocation, flow control).
        step: what runs on owned partitions.
        kafka_config: extra confluent-kafka consumer settings (over :data:`KAFKA_CONSUMER_DEFAULTS`, fetch wait).
        offsets_group: the Kafka group id whose committed offsets are read and written (default ``group``).
        broadcasting: every member takes every partition, without membership or locks (each with its
            own ``offsets_group``).
        strategy: an allocation strategy object instead of ``options.allocation``.
        metrics: the consumer's Prometheus series, refreshed every commit interval (``None``: off).
        name: how logs and errors name the owner (``"consumer X of group G"``).
        kafka: a confluent-kafka consumer the caller made and keeps (the drop-in's): used instead of one of
            the engine's own, never closed; the caller routes its commit results to :meth:`on_commit`.
        membership_group: the name members find each other under in Redis (default ``group``); keyed by a
            service's topic prefix too, deployments with different prefixes never split each other's partitions.
    """

    def __init__(self, group: str, settings: Settings, options: OwnershipOptions, step: Step, *,
                 kafka_config: Mapping[str, Any] | None = None, offsets_group: str | None = None,
                 broadcasting: bool = False, strategy: AllocationStrategy | None = None,
                 metrics: ConsumerMetrics | None = None, name: str = "", kafka: Any = None,
                 membership_group: str | None = None) -> None:
        self.group, self.settings, self.options, self.step = group, settings, options, step
        self._given_kafka = kafka
        self.membership_group = membership_group or group
        self.broadcasting = broadcasting
        self.name = name or f"{options.instance_name} of group {group}"
        self.lifecycle = Lifecycle(self.name)
        fetch_wait = {"fetch.wait.max.ms": settings.engine_fetch_wait_ms}
        self._kafka_config = {**KAFKA_CONSUMER_DEFAULTS, **fetch_wait, **(kafka_config or {})}
        self._offsets_group = offsets_group or group
        self._strategy = strategy or strategy_named(options.allocation)
        self.metrics = metrics
        self._owned: dict[TP, OwnedLock] = {}  # lock -> owned
        self._by_tp: dict[TP, OwnedLock] = {}  # every covered partition -> owned
        self._ambiguous: set[int] = set()  # partition numbers that more than one covered topic has
        self._leaving: dict[TP, OwnedLock] = {}  # lock -> owned, draining
        self._pending: set[TP] = set()  # wanted, still held by another member
        self._members: list[Member] = []
        self._rebalance_now = threading.Event()
        self._lost: deque[set[TP]] = deque()  # from the keeper
        self._due = {"rebalance": 0.0, "acquire": 0.0, "commit": 0.0}
        self._flow = FlowGauge()  # flow control's view of all claims (when a pass over them is due)
        self._next_look = 0.0  # maintain() does nothing before this, unless the keeper reported news
        self._loop = PollLoop(self)
        self._kafka: Consumer | None = None
        self._locks: LockTable | None = None
        self._membership: Membership | None = None
        self._keeper: Keeper | None = None
        self._resets: OffsetResets | None = None
        self.admin: TopicAdmin | None = None
        self.failures = 0  # poll threads that died (0 or 1: a dead engine stays dead)
        self.commits = 0  # commit requests sent
        self._clients: OwnClients | None = None  # None: the caller's client (given_kafka), never replaced
        self.on_assigned: Callable[[list[TP]], None] | None = None  # poll thread, after claims were created
        self._fetch_error = partial(fetch_error, self.name, self._offsets_group, settings.kafka)

    # -- lifecycle -----------------------------------------------------------------------
    @property
    def kafka(self) -> Consumer:
        """The Kafka consumer (poll thread only)."""
        if self._kafka is None:
            raise StateError(f"{self.name} is not started")
        return self._kafka

    def open(self) -> None:
        """Connect everything, join the group; nothing is fetched before the first :meth:`maintain`.

        Redis is asked first: no topic is created, no Kafka consumer made and no thread started
        before a node took this member's heartbeat. On failure everything opened so far is closed
        and dropped again (no client, thread or member entry stays behind), the state is CLOSED,
        and the error raised.

        Raises:
            RedisAuthError: no Redis node took the heartbeat, and some refused the credentials.
            RedisUnavailableError: no Redis node answered.
            TopicNotFoundError, InvalidTopicNameError: a topic of the step does not exist, or cannot.
            ConfigError: no Redis nodes (clustering), or a bad setting.
        """
        self.lifecycle.starting()
        try:
            if not self.broadcasting:
                urls = self.settings.require_redis()  # before any client: ConfigError costs nothing
                self._locks = LockTable(urls, self.group, self.options.instance_name, self.settings.keys,
                                        self.options.lock_settings())
                self._membership = Membership(urls, self.membership_group, Member(self.options.instance_name,
                                                                       self.options.machine_room),
                                              self.settings.keys, self.options.membership_settings(),
                                              on_change=self._member_news,
                                              info=member_info(self.name, self._strategy, self.step.topics()))
                self._resets = OffsetResets(urls, self.group, self.settings.keys)
                self._members = self._membership.join()
            self.admin = TopicAdmin(self.settings)
            # internal topics, only once Redis answered: a failed start leaves none
            self.step.provision(self.admin)
            for topic in self.step.topics():
                self.admin.partitions(topic)  # TopicNotFoundError before anything fetches
            covered = [tp[0] for t in self.step.topics() for tp in self.step.partitions_of((t, 0))]
            check_start_access(self.admin, covered, self._offsets_group, self.settings, self._locks)  # secured only
            if self._given_kafka is None:
                self._clients = self._own_clients()
                self._kafka = self._clients.new()
            else:
                self._kafka = self._given_kafka
            o = self.options
            self._keeper = Keeper(self._membership, self._locks, partial(holdings.progress, self),
                                  self._members_changed, self._lost.append, o.heartbeat_interval_ms / 1000,
                                  min(o.heartbeat_interval_ms, o.lock_renew_interval_ms) / 4000,
                                  o.instance_name)
            self._keeper.start(self._members)
        except BaseException:
            self._close_clients(leave=True)
            # dropped, not only closed: librdkafka's threads live as long as a client object does
            self.admin = self._kafka = self._keeper = self._locks = self._membership = None
            self.lifecycle.start_failed()
            traceback.clear_frames(sys.exc_info()[2])  # finished frames' locals would keep the clients alive
            raise
        self.lifecycle.running()

    def start(self) -> None:
        """:meth:`open`, then run the poll loop on a thread of the engine's own (:meth:`start_thread`)."""
        self.open()
        self.start_thread()

    def start_thread(self) -> None:
        """Run the poll loop on a thread of the engine's own (after :meth:`open`)."""
        self.take_over()

    def take_over(self) -> None:
        """A fresh thread takes over the poll loop (any thread): the scheduler calls it when the poll thread is
        stuck in a listener it ran itself; that thread leaves the loop once the listener returns."""
        self._loop.take_over()

    def run(self) -> None:
        """The poll loop (the engine's thread): maintain, fetch, hand out, until :meth:`close` or a failure.

        A failure ends the loop: it is recorded (every later call raises it), logged, counted,
        and every lock is released so the group's other members take over at once.
        """
        self._loop.run()

    def close(self, timeout: float = RELEASE_PATIENCE_S) -> None:
        """Leave gracefully: drain, commit, unlock, leave the group, close the clients. Idempotent.

        Raises:
            StateError: never started.
        """
        if not self.lifecycle.closing():
            return
        if self._membership is not None:
            self._membership.leave()  # the others rebalance now and wait for our unlocks
        if not self._loop.stop(timeout) and self.lifecycle.error is None:
            self.release_all(timeout)  # caller-driven: the caller's thread is this one
        self._close_clients(leave=False)
        self.lifecycle.closed()
        log.info("%s closed", self.name)

    def _close_clients(self, leave: bool) -> None:
        if self._keeper is not None:
            self._keeper.stop()
        if leave and self._membership is not None:
            self._membership.leave()
        own_kafka = self._kafka if self._given_kafka is None else None  # a client the caller made stays open
        # every client goes now, in this thread: the engine lives in reference cycles (bound callbacks), and
        # a librdkafka client freed by a later garbage collection blocks whatever thread runs that pass
        opened = (self._locks, self._membership, self._resets, own_kafka, self.admin)
        for close in (self.step.close, *(c.close for c in opened if c)):
            try:
                close()
            except Exception:
                log.warning("%s: closing failed", self.name, exc_info=True)
        if self._clients is not None:
            self._clients.join_retired()  # closing one without a broker may take a while

    # -- the Kafka client --------------------------------------------------------------------
    @property
    def clients_replaced(self) -> int:
        """Kafka clients of the engine's own replaced after they lost every broker."""
        return self._clients.replaced if self._clients is not None else 0

    def _own_clients(self) -> OwnClients:
        config = {**self._kafka_config, "group.id": self._offsets_group, "on_commit": self.on_commit}
        return OwnClients(self.name, self.settings.kafka_config(**config))

    def _replace_client(self) -> None:
        """A new Kafka client takes over from one that lost every broker (:meth:`OwnClients.replace`)."""
        assert self._clients is not None  # only the engine's own clients are replaced
        try:
            self._clients.replace(self._owned.values(), self._leaving.values(), len(self._by_tp))
        finally:
            self._kafka = self._clients.current
        self._commit_soon()  # every position again, through the new client

    # -- the loop's parts (poll thread) ------------------------------------------------------
    def maintain(self) -> None:
        """Everything but fetching, each when due: lost locks, rebalance, releases, commits, flow control. Cheap
        when nothing is due (it looks every ``MAINTAIN_EVERY_S`` unless the keeper reported news)."""
        now = time.monotonic()
        if now < self._next_look and not self._lost and not self._rebalance_now.is_set():
            return
        self._next_look = now + MAINTAIN_EVERY_S
        if self._clients is not None and self._clients.lost_every_broker:
            self._replace_client()
        self._apply_lost()
        o, due = self.options, self._due
        rebalance = self._rebalance_now.is_set() or now >= due["rebalance"]
        if rebalance or (self._pending and now >= due["acquire"]):
            self._rebalance_now.clear()
            due["rebalance"] = now + o.rebalance_interval_ms / 1000
            due["acquire"] = now + o.acquire_retry_ms / 1000
            self._rebalance()
        if self._leaving:
            holdings.finish_releases(self)
        if now >= due["commit"]:
            due["commit"] = now + o.commit_interval_ms / 1000
            self.commit(list(self._owned.values()), asynchronous=True)
            if self.metrics is not None:
                publish_states(self.metrics, self.states(), self.kafka, self._pending)
        pause_and_resume(self.kafka, self._owned.values(), o.pull_threshold_per_partition,
                         o.pull_threshold_total, self._flow)

    def fetch(self, timeout: float) -> int:
        """Fetch what is ready (else wait up to ``timeout`` s for the first) and hand it to the claims (locks
        reported lost while it waited are revoked first: none of their records is handed out)."""
        records = fetch_records(self.kafka, self.options.pull_batch_size, timeout)
        if records:
            self._apply_lost()
            route(records, self._by_tp, self._ambiguous, self._throttle, self._fetch_error)
        return len(records)

    def _apply_lost(self) -> None:
        while self._lost:
            self._on_lost(self._lost.popleft())

    def _throttle(self, owned: OwnedLock, taken: int) -> None:
        """Pause partitions over their thresholds right after a claim took ``taken`` records (:mod:`.flow_control`)."""
        o = self.options
        throttle(self.kafka, owned, taken, self._owned.values(), self._flow, o.pull_threshold_per_partition,
                 o.pull_threshold_total)

    def health(self) -> Health:
        """State, a dead poll thread's failure, how many partitions are owned, standing refusals; never raises."""
        return Health(self.lifecycle.state, self.lifecycle.error, len(self.owned()), REFUSALS.standing())

    # -- ownership ---------------------------------------------------------------------
    def owned(self) -> list[TP]:
        """Locks held and worked on now (poll thread; other threads get a snapshot)."""
        return list(self._owned)

    def states(self) -> list[PartitionState]:
        """Every covered partition of the owned claims (poll thread: other threads read ``metrics``)."""
        out = []
        for owned in list(self._owned.values()):
            positions, backlog = owned.claim.positions(), owned.claim.backlog()
            held = self._locks.is_held(owned.lock) if self._locks else True
            for tp in owned.partitions:
                out.append(PartitionState(owned.lock, tp, positions.get(tp), backlog.get(tp, 0), held,
                                          owned.claim.finished() if tp == owned.lock else 0))
        return out

    def fencing_token(self, lock: TP) -> int | None:
        """The fencing token ``lock`` was won with, while it is owned; ``None`` otherwise (any thread)."""
        owned = self._owned.get(lock)
        return owned.fencing_token if owned is not None else None

    def committed(self, lock: TP) -> dict[TP, int]:
        """What the engine last committed for ``lock``'s partitions (poll thread)."""
        owned = self._owned.get(lock) or self._leaving.get(lock)
        return dict(owned.committed) if owned is not None else {}

    @property
    def locks_lost(self) -> int:
        """Held locks lost since start: a renewal failed or came too late (any thread)."""
        return self._locks.lost_total if self._locks is not None else 0

    def _member_news(self) -> None:
        """A join or leave was announced (a listener thread): the keeper reads the members now."""
        if self._keeper is not None:
            self._keeper.beat_now()
        self._rebalance_now.set()

    @property
    def pending(self) -> bool:
        """Whether partitions allotted to this member are still held by another (asked for again soon)."""
        return bool(self._pending)

    def _members_changed(self, members: list[Member]) -> None:
        self._members = members
        self._rebalance_now.set()

    def _target(self) -> set[TP]:
        assert self.admin is not None
        target: set[TP] = set()
        for topic in self.step.topics():
            partitions = [(topic, p) for p in range(self.admin.partitions(topic))]
            if self.broadcasting:
                target.update(partitions)
            else:
                target.update(self._strategy.allocate(self.group, self.options.instance_name, partitions,
                                                      self._members))
        return target

    def _rebalance(self) -> None:
        try:
            target = self._target()
        except (BrokerUnavailableError, AuthorizationError) as exc:
            # a broker restarting or a cluster without a leader for a while (or a DESCRIBE grant gone): keep what
            # is held (the locks are in Redis), fetch as librdkafka can, and look again soon
            if isinstance(exc, AuthorizationError):
                REFUSALS.note(exc, f"{self.name}: rebalance")
            else:
                log.warning("%s: rebalance put off, no topic metadata: %s", self.name, exc)
            self._due["rebalance"] = time.monotonic() + 1.0
            return
        self._release([lock for lock in self._owned if lock not in target])
        if self._resets is not None and self._owned:
            leave_for_resets(self._resets, self._by_tp, self._owned, self._release, self.name)
        wanted = target - self._owned.keys() - self._leaving.keys()
        self._pending = set()
        if not wanted:
            return
        won = holdings.lock(self, wanted)
        if won is None:  # Redis refused our user the lock table's keys: ask again in a second, not every 50 ms
            self._due["rebalance"] = self._due["acquire"] = time.monotonic() + 1.0
            self._pending = wanted
            return
        if won:
            try:
                holdings.take(self, won)
            except KafkaException as exc:
                # the broker cannot name committed offsets now (a coordinator moving, a broker restarting):
                # give the locks back and try again at the next round, as after a lost lock race
                log.warning("%s: could not take %s now, retrying at the next rebalance: %s", self.name,
                            sorted(won), exc)
                if self._locks is not None:
                    self._locks.unlock_batch(list(won))
                won = {}
        self._pending = wanted - won.keys()

    def _commit_soon(self) -> None:
        self._due["commit"] = self._next_look = 0.0

    def _on_lost(self, lost: set[TP]) -> None:
        holdings.lose(self, lost)

    def _release(self, locks: list[TP]) -> None:
        holdings.release(self, locks)

    def release_all(self, timeout: float = RELEASE_PATIENCE_S) -> None:
        """Leave every partition gracefully; wait (up to ``timeout`` s) until all are drained and unlocked."""
        holdings.release_all(self, timeout)

    # -- commits -----------------------------------------------------------------------
    def commit(self, owned: Iterable[OwnedLock], asynchronous: bool) -> bool:
        """Commit what each claim says is done, while (and only while) its lock is held.

        Returns ``False`` when a synchronous commit failed: what it sent is sent again later.
        """
        owned = list(owned)
        locks = self._locks
        offsets = due_offsets(owned, locks.is_held if locks is not None else lambda lock: True)
        if not offsets:
            return True
        self.commits += 1
        reason: object = None
        try:
            refused = commit_offsets(self.kafka, offsets, asynchronous)
        except KafkaException as exc:
            refused, reason = offsets, exc
        else:
            reason = refused[0].error if refused else None
        if refused:
            commit_failed(reason, refused, self._offsets_group, self.settings.kafka, self.name)
            forget(owned, refused)
        return not refused

    def on_commit(self, err: Any, partitions: list[TopicPartition]) -> None:
        """Commit results (served on the poll thread): a failed commit is sent again at the next interval."""
        failed = [tp for tp in partitions if err is not None or tp.error is not None]
        if failed:
            commit_failed(err or failed[0].error, failed, self._offsets_group, self.settings.kafka, self.name)
            forget([*self._owned.values(), *self._leaving.values()], failed)
