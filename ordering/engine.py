"""The ownership engine: the one poll loop of the code base, owning partitions and running a step on them.

Members of a group split the partitions of a step's topics by an allocation strategy
over the live members (Redis membership), take each partition's lock in the Redis lock
table before fetching it, and commit the offsets the step says are done. Kafka's group
coordinator assigns nothing: the engine ``assign()``s what it won. A partition leaving
is drained (the step finishes what it handed out), committed, then unlocked, so the
next owner's lock attempt succeeds only then and a graceful change re-delivers
nothing; a lock lost is revoked at once and never committed (the next owner may have
moved on, and our commit would rewind it).

Threads: the poll thread owns the Kafka client and the claims -- the engine's own
(:meth:`OwnershipEngine.run`) or the caller's (the drop-in consumer calls
:meth:`maintain` and the client itself); the keeper (:mod:`~rocketkafka.ordering.keeper`)
does the Redis side. The push consumer, the drop-in consumer, the delay forwarder and
the transaction checker all run on this engine with their own :class:`~rocketkafka.ordering.step.Step`.

Flow control: a partition stops fetching while its claim holds more than
``pull_threshold_per_partition`` records, and all of them stop while together they hold
more than ``pull_threshold_total`` (checked whenever a claim takes records), so memory is
bounded at any partition count and any handler speed.

A Kafka client that lost every broker is replaced (:mod:`~rocketkafka.ordering.clients` says
when, and why librdkafka needs it).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.errors import BrokerUnavailableError, StateError
from rocketkafka.ordering.allocation import AllocationStrategy, Member, strategy_named
from rocketkafka.ordering.clients import OwnClients
from rocketkafka.ordering.commits import commit_offsets, due_offsets, fenced, forget
from rocketkafka.ordering.flow_control import over_threshold, over_total, pauses_and_resumes
from rocketkafka.ordering.keeper import Keeper
from rocketkafka.ordering.lifecycle import Health, Lifecycle
from rocketkafka.ordering.locks import LockTable
from rocketkafka.ordering.membership import Membership
from rocketkafka.ordering.metrics import ConsumerMetrics, PartitionSample
from rocketkafka.ordering.options import KAFKA_CONSUMER_DEFAULTS, OwnershipOptions
from rocketkafka.ordering.owned import OwnedLock, PartitionState, shared_numbers
from rocketkafka.ordering.resets import OffsetResets
from rocketkafka.ordering.step import ClaimContext, Step
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
        kafka_config: extra confluent-kafka consumer settings (over :data:`KAFKA_CONSUMER_DEFAULTS`).
        offsets_group: the Kafka group id whose committed offsets are read and written (default ``group``).
        broadcasting: every member takes every partition, without membership or locks (each with its
            own ``offsets_group``).
        strategy: an allocation strategy object instead of ``options.allocation``.
        metrics: the consumer's Prometheus series, refreshed every commit interval (``None``: off).
        name: how logs and errors name the owner (``"consumer X of group G"``).
        kafka: a confluent-kafka consumer the caller made and keeps (the drop-in consumer is one): the
            engine uses it instead of making its own, never closes it, and the caller routes its commit
            results to :meth:`on_commit`.
        membership_group: the name members register and find each other under in Redis (default
            ``group``); a service whose topics depend on a prefix keys it by that prefix too, so
            deployments with different prefixes never split each other's partitions.
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
        self._kafka_config = {**KAFKA_CONSUMER_DEFAULTS, **(kafka_config or {})}
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
        self._next_look = 0.0  # maintain() does nothing before this, unless the keeper reported news
        self._step_wait: float | None = None  # how soon the step wants the loop back (its last tick said)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._poller: threading.Thread | None = None  # the thread that owns the client and the claims now
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
                                              on_change=self._rebalance_now.set, info=self._member_info())
                self._resets = OffsetResets(urls, self.group, self.settings.keys)
                self._members = self._membership.join()
            self.admin = TopicAdmin(self.settings)
            self.step.provision(self.admin)  # internal topics, only once Redis answered: a failed start leaves none
            for topic in self.step.topics():
                self.admin.partitions(topic)  # TopicNotFoundError before anything fetches
            if self._given_kafka is None:
                self._clients = self._own_clients()
                self._kafka = self._clients.new()
            else:
                self._kafka = self._given_kafka
            self._keeper = Keeper(self._membership, self._locks, self._progress, self._members_changed,
                                  self._lost.append, self.options.heartbeat_interval_ms / 1000,
                                  min(self.options.heartbeat_interval_ms, self.options.lock_renew_interval_ms) / 4000,
                                  self.options.instance_name)
            self._keeper.start(self._members)
        except BaseException:
            self._close_clients(leave=True)
            # dropped, not only closed: librdkafka's threads live as long as a client object does
            self.admin = self._kafka = self._keeper = self._locks = self._membership = None
            self.lifecycle.start_failed()
            traceback.clear_frames(sys.exc_info()[2])  # finished frames' locals would keep the clients alive
            raise
        self.lifecycle.running()

    def _member_info(self) -> dict[str, Any]:
        """What this member tells operators beside its heartbeat (``rocketkafka admin consumer-status``)."""
        return {"client": self.name, "allocation": getattr(self._strategy, "name", type(self._strategy).__name__),
                "topics": list(self.step.topics()), "host": socket.gethostname(), "pid": os.getpid(),
                "started_ms": int(time.time() * 1000)}

    def start(self) -> None:
        """:meth:`open`, then run the poll loop on a thread of the engine's own (:meth:`start_thread`)."""
        self.open()
        self.start_thread()

    def start_thread(self) -> None:
        """Run the poll loop on a thread of the engine's own (after :meth:`open`)."""
        self.take_over()

    def take_over(self) -> None:
        """A fresh thread takes over the poll loop (any thread).

        The scheduler calls it when the poll thread is stuck in a listener it ran itself: the
        stuck thread leaves the loop once the listener returns, and never touches the client again.
        """
        thread = threading.Thread(target=self.run, name=f"rk-poll-{self.group}", daemon=True)
        self._poller = self._thread = thread
        thread.start()

    def run(self) -> None:
        """The poll loop (the engine's thread): maintain, fetch, hand out, until :meth:`close` or a failure.

        A failure ends the loop: it is recorded (every later call raises it), logged, counted,
        and every lock is released so the group's other members take over at once.
        """
        me = threading.current_thread()
        self._poller = me
        try:
            while not self._stopping.is_set():
                self.maintain()
                self.fetch(self._fetch_timeout())
                wait = self.step.tick()
                if self._poller is not me:
                    return  # another thread took over polling while this one was in a listener
                self._step_wait = wait
            self.release_all()
            if self.metrics is not None:
                self.metrics.publish_retired()
        except BaseException as exc:  # never die silently
            self._died(exc)

    def close(self, timeout: float = RELEASE_PATIENCE_S) -> None:
        """Leave gracefully: drain, commit, unlock, leave the group, close the clients. Idempotent.

        Raises:
            StateError: never started.
        """
        if not self.lifecycle.closing():
            return
        if self._membership is not None:
            self._membership.leave()  # the others rebalance now and wait for our unlocks
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)  # the thread polling now (another may have taken over)
        elif self.lifecycle.error is None:
            self.release_all(timeout)  # caller-driven: the caller's thread is this one
        self._close_clients(leave=False)
        self.lifecycle.closed()
        log.info("%s closed", self.name)

    def _died(self, exc: BaseException) -> None:
        held = {**self._owned, **self._leaving}
        self._owned.clear()  # first, so the failure is never reported beside partitions still counted as owned
        self._by_tp.clear()
        self._leaving.clear()
        self.failures += 1
        self.lifecycle.fail(exc)
        log.critical("%s: poll thread failed; partitions released, consumption stopped", self.name, exc_info=exc)
        for owned in held.values():
            owned.claim.revoke()
        try:
            if self._locks is not None:
                self._locks.unlock_batch(list(held))
            if self._membership is not None:
                self._membership.leave()
        except Exception:
            log.warning("%s: releasing locks after the failure failed; they expire with their lease", self.name,
                        exc_info=True)

    def _close_clients(self, leave: bool) -> None:
        if self._keeper is not None:
            self._keeper.stop()
        if leave and self._membership is not None:
            self._membership.leave()
        own_kafka = self._kafka if self._given_kafka is None else None  # a client the caller made stays open
        # every client goes now, in this thread: the engine lives in reference cycles (bound callbacks), and
        # a librdkafka client freed by a later garbage collection blocks whatever thread runs that pass
        for close in (self.step.close, *(c.close for c in (self._locks, self._membership, self._resets, own_kafka,
                                                           self.admin) if c)):
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
        return OwnClients(self.name, self.settings.kafka_config(**{**self._kafka_config, "group.id": self._offsets_group,
                                                                   "on_commit": self.on_commit}))

    def _replace_client(self) -> None:
        """A new Kafka client takes over from one that lost every broker (:mod:`~rocketkafka.ordering.clients`).

        It is assigned every owned partition where the old one stopped fetching (paused ones stay
        paused), and every position is committed again: commits the old client held may never land.
        The old client is closed on a thread of its own, as closing a client without a broker may wait.
        """
        assert self._clients is not None  # only the engine's own clients are replaced
        old = self._kafka
        try:
            self._kafka = self._clients.new()
            log.warning("%s: the Kafka client reaches for no broker any more (it forgot them after a Metadata "
                        "answer that listed none, as while every broker is fenced); a new client goes on with its "
                        "%d partition(s)", self.name, len(self._by_tp))
            for owned in [*self._owned.values(), *self._leaving.values()]:
                owned.committed.clear()
            self._commit_soon()
            assignment = [TopicPartition(*tp, owned.fetch_from[tp]) for owned in self._owned.values()
                          for tp in owned.partitions]
            if assignment:
                self._kafka.incremental_assign(assignment)
            paused = [TopicPartition(*tp) for owned in self._owned.values() for tp in owned.paused]
            if paused:
                self._kafka.pause(paused)
        finally:  # the old client goes whatever happened here
            if old is not None and old is not self._kafka:
                self._clients.retire(old)

    # -- the loop's parts (poll thread) ------------------------------------------------------
    def maintain(self) -> None:
        """Everything but fetching, each when due: lost locks, rebalance, releases, commits, flow control.

        Cheap when nothing is due: it looks at most every ``MAINTAIN_EVERY_S`` unless the keeper
        reported lost locks or a membership change, so a caller may run it before every fetch.
        """
        now = time.monotonic()
        if now < self._next_look and not self._lost and not self._rebalance_now.is_set():
            return
        self._next_look = now + MAINTAIN_EVERY_S
        if self._clients is not None and self._clients.lost_every_broker:
            self._replace_client()
        while self._lost:
            self._on_lost(self._lost.popleft())
        o = self.options
        if self._rebalance_now.is_set() or now >= self._due["rebalance"] or (self._pending and now >= self._due["acquire"]):
            self._rebalance_now.clear()
            self._due["rebalance"] = now + o.rebalance_interval_ms / 1000
            self._due["acquire"] = now + o.acquire_retry_ms / 1000
            self._rebalance()
        if self._leaving:
            self._finish_releases()
        if now >= self._due["commit"]:
            self._due["commit"] = now + o.commit_interval_ms / 1000
            self.commit(list(self._owned.values()), asynchronous=True)
            if self.metrics is not None:
                self._publish_metrics()
        self._flow_control()

    def fetch(self, timeout: float) -> int:
        """Fetch what is ready (else wait up to ``timeout`` s for the first record) and hand it to the claims."""
        records = self.kafka.consume(self.options.pull_batch_size, 0)
        if not records:
            first = self.kafka.poll(timeout)
            if first is None:
                return 0
            records = [first, *self.kafka.consume(self.options.pull_batch_size - 1, 0)]
        self._route(records)
        return len(records)

    def _route(self, records: list[Any]) -> None:
        """Hand runs of one partition to their claim (fetches come in per-partition runs: few lookups).

        A run is told by the partition number alone, unless two covered topics share that number
        (then the topic is compared too): one call per record less on the hot path.
        """
        start, n = 0, len(records)
        ambiguous = self._ambiguous
        while start < n:
            first = records[start]
            if first.error() is not None:
                self._fetch_error(first)
                start += 1
                continue
            topic, partition = first.topic(), first.partition()
            end = start + 1
            if partition in ambiguous:
                while end < n and records[end].partition() == partition and records[end].topic() == topic \
                        and records[end].error() is None:
                    end += 1
            else:
                while end < n and records[end].partition() == partition and records[end].error() is None:
                    end += 1
            owned = self._by_tp.get((topic, partition))
            if owned is not None and not owned.leaving and not owned.revoked:
                owned.claim.take((topic, partition), records[start:end] if start or end < n else records)
                owned.fetch_from[(topic, partition)] = records[end - 1].offset() + 1
                self._throttle(owned)
            start = end

    def _fetch_error(self, record: Any) -> None:
        error = record.error()
        if error.code() == KafkaError._PARTITION_EOF:
            return
        if error.fatal():
            raise KafkaException(error)
        log.warning("%s: fetch error on %s[%s]: %s", self.name, record.topic(), record.partition(), error)

    def _fetch_timeout(self) -> float:
        if any(owned.paused for owned in self._owned.values()):
            return 0.005  # nothing wakes the loop when a paused partition's backlog drains: look often
        wait = 0.05 if self._owned else 0.1
        step_wait = self._step_wait  # nothing wakes the loop when a worker posts an outcome either
        return wait if step_wait is None or step_wait >= wait else step_wait

    def health(self) -> Health:
        """State, a dead poll thread's failure, and how many partitions are owned; never raises."""
        return Health(self.lifecycle.state, self.lifecycle.error, len(self.owned()))

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
        except BrokerUnavailableError as exc:
            # a broker restarting or a cluster without a leader for a while: keep what is held (the locks
            # are in Redis), fetch as librdkafka can, and look again soon
            log.warning("%s: rebalance put off, no topic metadata: %s", self.name, exc)
            self._due["rebalance"] = time.monotonic() + 1.0
            return
        for lock in [lock for lock in self._owned if lock not in target]:
            self._release(lock)
        if self._resets is not None and self._owned:
            self._apply_resets()
        wanted = target - self._owned.keys() - self._leaving.keys()
        self._pending = set()
        if not wanted:
            return
        if self._locks is None:
            won: dict[TP, int | None] = {tp: None for tp in wanted}
        else:
            won = {tp: held.fencing_token for tp, held in self._locks.lock_batch(wanted).items()}
        if won:
            try:
                self._take(won)
            except KafkaException as exc:
                # the broker cannot name committed offsets now (a coordinator moving, a broker restarting):
                # give the locks back and try again at the next round, as after a lost lock race
                log.warning("%s: could not take %s now, retrying at the next rebalance: %s", self.name, sorted(won),
                            exc)
                if self._locks is not None:
                    self._locks.unlock_batch(list(won))
                won = {}
        self._pending = wanted - won.keys()

    def _apply_resets(self) -> None:
        """Leave every owned partition an operator asked to reset (:mod:`~rocketkafka.ordering.resets`)."""
        assert self._resets is not None
        try:
            requests = self._resets.pending(self._by_tp)
        except Exception as exc:  # Redis trouble: the request waits for the next rebalance
            log.warning("%s: reading offset resets failed: %s", self.name, exc)
            return
        for tp, offset in requests.items():
            owned = self._by_tp.get(tp)
            if owned is None or owned.leaving or owned.lock not in self._owned:
                continue
            log.info("%s: resetting %s to offset %d (drain, commit, re-read)", self.name, tp, offset)
            owned.reset_to = {t: o for t, o in requests.items() if t in owned.partitions}
            self._release(owned.lock)

    def _take(self, won: dict[TP, int | None]) -> None:
        covered = {lock: self.step.partitions_of(lock) for lock in sorted(won)}
        every = [tp for partitions in covered.values() for tp in partitions]
        answer = self.kafka.committed([TopicPartition(*tp) for tp in every], timeout=10)
        failed = [tp.error for tp in answer if tp.error is not None]  # an error per partition, not for the request
        if failed:
            raise KafkaException(failed[0])
        committed = {(tp.topic, tp.partition): tp.offset for tp in answer}
        starts = {tp: committed[tp] if committed[tp] >= 0 else self.step.initial_offset(tp, self.kafka) for tp in every}
        assignment = []  # nothing changes above this line: a broker error leaves the engine as it was
        for lock, partitions in covered.items():
            offsets = {tp: starts[tp] for tp in partitions}
            context = ClaimContext(lock, partitions, won[lock], offsets, self._validity(lock), self._seek, self._commit_soon)
            owned = OwnedLock(lock, self.step.claim(context), partitions, won[lock],
                           committed={tp: committed[tp] for tp in partitions if committed[tp] >= 0},
                           fetch_from=dict(offsets))
            self._owned[lock] = owned
            for tp in partitions:
                self._by_tp[tp] = owned
                assignment.append(TopicPartition(*tp, offsets[tp]))
        self._ambiguous = shared_numbers(self._by_tp)
        self.kafka.incremental_assign(assignment)
        log.info("%s took %s", self.name, sorted(won))
        if self.on_assigned is not None:
            self.on_assigned(sorted(won))

    def _validity(self, lock: TP) -> Callable[[], float]:
        if self._locks is None:
            return lambda: float("inf")
        locks = self._locks
        return lambda: locks.valid_until(lock)

    def _commit_soon(self) -> None:
        self._due["commit"] = 0.0
        self._next_look = 0.0

    def _seek(self, tp: TP, offset: int) -> None:
        self.kafka.seek(TopicPartition(*tp, offset))
        owned = self._by_tp.get(tp)
        if owned is not None:
            owned.fetch_from[tp] = offset

    def _release(self, lock: TP) -> None:
        """Stop fetching ``lock``'s partitions; commit and unlock once its claim drained."""
        owned = self._owned.pop(lock)
        if self._locks is not None and not self._locks.is_held(lock):
            self._revoke(owned)  # expired while we stalled: the next owner may have moved on
            return
        owned.leaving = True
        owned.claim.leave()
        self._unassign(owned)
        self._leaving[lock] = owned

    def _finish_releases(self) -> None:
        for lock, owned in list(self._leaving.items()):
            if not owned.claim.drained():
                continue
            if owned.reset_to is not None and not owned.revoked:
                self._commit_reset(owned)
            elif not owned.revoked:
                self.commit([owned], asynchronous=False)
                if self._locks is not None:
                    self._locks.unlock_batch([lock])
            del self._leaving[lock]
            if owned.revoked:  # lost, not given away: ask for it again now, not at the next safety rebalance
                self._rebalance_now.set()
            if self.metrics is not None:
                self.metrics.retire(lock, owned.claim.finished())
            log.info("%s released %s", self.name, lock)

    def _commit_reset(self, owned: OwnedLock) -> None:
        """Commit an operator's reset offsets (the rest of the claim as usual) under the lock, then unlock."""
        assert owned.reset_to is not None and self._resets is not None
        if self._locks is not None and not self._locks.is_held(owned.lock):
            return  # lost while draining: the next owner applies the request
        positions = {**owned.claim.positions(), **owned.reset_to}
        try:
            commit_offsets(self.kafka, [fenced(tp, offset, owned.fencing_token) for tp, offset in positions.items()
                                        if offset >= 0], asynchronous=False)
        except KafkaException as exc:  # the request stays: applied again once the partition is taken back
            log.warning("%s: committing the offset reset of %s failed: %s", self.name, owned.lock, exc)
        else:
            self._resets.done(owned.reset_to, owned.reset_to)
        if self._locks is not None:
            self._locks.unlock_batch([owned.lock])
        self._rebalance_now.set()  # take it back now, from the new committed offset

    def _on_lost(self, lost: set[TP]) -> None:
        for lock in lost:
            log.warning("%s lost the lock of %s; stops consuming it", self.name, lock)
            if lock in self._owned:
                self._revoke(self._owned.pop(lock))
                self._rebalance_now.set()
            elif lock in self._leaving:  # lost while draining: stop, and never commit
                owned = self._leaving[lock]
                owned.revoked = True
                owned.claim.revoke()

    def _revoke(self, owned: OwnedLock) -> None:
        owned.revoked = True
        owned.claim.revoke()
        self._unassign(owned)
        self._leaving[owned.lock] = owned

    def _unassign(self, owned: OwnedLock) -> None:
        for tp in owned.partitions:
            self._by_tp.pop(tp, None)
        self._ambiguous = shared_numbers(self._by_tp)
        # librdkafka keeps a pause through unassign and assign: the next claim would never fetch. Only the engine's
        # own flow-control pauses are in ``paused`` (the drop-in's claims report no backlog: a user's pause stays).
        if owned.paused:
            self.kafka.resume([TopicPartition(*tp) for tp in owned.paused])
            owned.paused.clear()
        self.kafka.incremental_unassign([TopicPartition(*tp) for tp in owned.partitions])

    def release_all(self, timeout: float = RELEASE_PATIENCE_S) -> None:
        """Leave every partition gracefully and wait (up to ``timeout`` s) until all are drained and unlocked."""
        for lock in list(self._owned):
            self._release(lock)
        deadline = time.monotonic() + timeout
        while self._leaving and time.monotonic() < deadline:
            self.step.tick()
            self._finish_releases()
            time.sleep(0.005)
        if self._leaving:
            log.warning("%s: %d partition(s) did not drain within %g s; left to expire with their lease",
                        self.name, len(self._leaving), timeout)

    def _progress(self) -> dict[TP, tuple[int, int]]:
        """Transition state of every held lock (keeper thread: reads only)."""
        out = {}
        for lock, owned in [*list(self._owned.items()), *list(self._leaving.items())]:
            progress = owned.claim.progress()
            if progress is not None:
                out[lock] = progress
        return out

    # -- commits -----------------------------------------------------------------------
    def commit(self, owned: Iterable[OwnedLock], asynchronous: bool) -> None:
        """Commit what each claim says is done, while (and only while) its lock is held."""
        locks = self._locks
        offsets = due_offsets(owned, locks.is_held if locks is not None else lambda lock: True)
        if not offsets:
            return
        self.commits += 1
        try:
            commit_offsets(self.kafka, offsets, asynchronous)
        except KafkaException as exc:  # sent again at the next interval
            log.warning("%s: commit failed (%s); retrying", self.name, exc)
            forget(self._by_tp, offsets)

    def on_commit(self, err: Any, partitions: list[TopicPartition]) -> None:
        """Commit results (served on the poll thread): a failed commit is sent again at the next interval."""
        failed = [tp for tp in partitions if err is not None or tp.error is not None]
        if failed:
            log.warning("%s: commit of %d partition(s) failed (%s); retrying", self.name, len(failed),
                        err or failed[0].error)
            forget(self._by_tp, failed)

    # -- metrics -------------------------------------------------------------------------
    def _publish_metrics(self) -> None:
        """One sample per partition (poll thread: it alone reads the client and the claims)."""
        metrics, samples = self.metrics, {}
        assert metrics is not None
        for state in self.states():
            # the cached high watermark is the one the last fetch brought, which every broker gets right
            high = self.kafka.get_watermark_offsets(TopicPartition(*state.tp), cached=True)[1]
            position = state.position
            lag = max(0, high - position) if high >= 0 and position is not None and position >= 0 else None
            samples[state.tp] = PartitionSample(lag, state.backlog, state.held, metrics.retired(state.tp) + state.finished)
        for tp in self._pending:
            samples[tp] = PartitionSample(None, 0, False, metrics.retired(tp))
        metrics.publish(samples)

    # -- flow control (rocketkafka.ordering.flow_control) ---------------------------------
    def _throttle(self, owned: OwnedLock) -> None:
        """Pause partitions over their thresholds right after a claim took records: one fetch over at most."""
        per = self.options.pull_threshold_per_partition
        over = over_threshold(owned, per)
        if over:
            self.kafka.pause([TopicPartition(*tp) for tp in over])
        # the total cap is checked here too, not only at the next flow-control tick, where the partitions can
        # together exceed it while each sits under its own threshold
        if over_total(self._owned.values(), per, len(self._by_tp), self.options.pull_threshold_total):
            self._flow_control()

    def _flow_control(self) -> None:
        pause, resume = pauses_and_resumes(self._owned.values(), self.options.pull_threshold_per_partition,
                                           self.options.pull_threshold_total)
        if pause:
            self.kafka.pause([TopicPartition(*tp) for tp in pause])
        if resume:
            self.kafka.resume([TopicPartition(*tp) for tp in resume])
