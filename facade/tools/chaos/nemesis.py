"""The fault schedule: one fault every ``fault_interval`` seconds, kinds round robin, victims at random.

Faults run one at a time, so a slow heal (a broker restarted from its log on a loaded
machine takes half a minute) pushes the next one back: :attr:`Nemesis.rotated` is set once
every planned kind has run, and the run keeps its traffic going until then.

Every fault heals itself (the killed process is started again, the stopped one
continued, the Redis node restarted, the clock set back) before the next one starts, and
is recorded with its start and heal times so the verdict can measure recovery. A fault
the cluster cannot take (a given cluster's Redis nodes, a broker without CreatePartitions)
is left out of the rotation with the reason in :attr:`Nemesis.skipped`.
"""

from __future__ import annotations

import logging
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketkafka.testing.clock import jump
from rocketkafka.tools.chaos.plan import ChaosPlan, Fault, Kind
from rocketkafka.tools.chaos.processes import Managed

log = logging.getLogger(__name__)


@dataclass
class FaultEvent:
    """One injected fault; times are epoch seconds."""

    fault: str
    target: str
    affects: list[str]  # the traffic kinds it can delay
    started: float
    healed: float | None = None
    error: str | None = None


@dataclass
class RedisControl:
    """Stop, start, pause and continue one Redis node by index (the embedded stack can; a given cluster cannot)."""

    nodes: int
    stop: Callable[[int], None]
    start: Callable[[int], None]
    pause: Callable[[int], None] | None = None
    resume: Callable[[int], None] | None = None


@dataclass
class BrokerControl:
    """SIGSTOP and SIGCONT the broker; SIGKILL and restart one node where its log survives (Apache Kafka)."""

    pause: Callable[[], None]
    resume: Callable[[], None]
    kill: Callable[[int], None] | None = None
    start: Callable[[int], None] | None = None
    nodes: int = 1


#: Where a fault's victim is, and which traffic kinds it can delay.
ALL_KINDS = [k.value for k in Kind]
CONSUMER_FAULTS = (Fault.KILL_CONSUMER, Fault.PAUSE_CONSUMER, Fault.SLOW_HANDLER, Fault.CLOCK_JUMP)
PAUSES = (Fault.PAUSE_CONSUMER, Fault.PAUSE_FORWARDER, Fault.PAUSE_CHECKER)


@dataclass
class Nemesis:
    """Runs the schedule in a thread until :meth:`stop`; ``events`` lists what it did.

    Parameters:
        redis: Redis node control (``None``: a given cluster; no Redis faults).
        broker: broker control (``None``: no broker pause).
        add_partitions: ``(topic, total)`` grows a topic, or ``None`` with ``skipped`` saying why not.
        clock_files: per consumer name, the offset file its clock reads (see :mod:`rocketkafka.testing.clock`).
    """

    plan: ChaosPlan
    consumers: list[Managed]
    forwarders: list[Managed]
    checker: Managed
    redis: RedisControl | None
    say: Callable[[str], None] = print
    broker: BrokerControl | None = None
    add_partitions: Callable[[str, int], None] | None = None
    clock_files: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    events: list[FaultEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.plan.seed)
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        #: Set once every fault kind of the rotation has run (at once when there is none).
        self.rotated = threading.Event()
        self._clock_sign = 1
        self._partitions = self.plan.partitions
        unable = {
            Fault.REDIS_DOWN: None if self.redis else "a given cluster's Redis nodes cannot be restarted from here",
            Fault.PAUSE_REDIS_QUORUM: None if self.redis and self.redis.pause and self.redis.resume and
            self.redis.nodes >= 2 else "needs 2 or more Redis nodes this run can SIGSTOP",
            Fault.PAUSE_BROKER: None if self.broker else "a given cluster's broker cannot be paused from here",
            Fault.KILL_BROKER: None if self.broker and self.broker.kill and self.broker.start else
            "needs an embedded Apache Kafka (--broker kafka): a given cluster cannot be killed from here, and "
            "Tansu keeps its log in memory (a killed Tansu loses every message)",
            Fault.CLOCK_JUMP: None if self.clock_files else "the consumers were started without clock files",
            Fault.ADD_PARTITIONS: None if self.add_partitions else "no way to add partitions given",
        }
        for fault, reason in unable.items():
            if reason is not None and fault in self.plan.faults:
                self.skipped.setdefault(fault.value, reason)
        self.faults = [f for f in self.plan.faults if f.value not in self.skipped]
        if not self.faults:
            self.rotated.set()

    def not_run(self) -> list[str]:
        """Fault kinds of the rotation that have not run yet, in rotation order."""
        done = {e.fault for e in list(self.events)}
        return [f.value for f in self.faults if f.value not in done]

    def start(self) -> Nemesis:
        for fault, reason in self.skipped.items():
            self.say(f"note: no {fault} faults: {reason}")
        self._thread.start()
        return self

    def stop(self) -> None:
        """No new faults; waits for the one under way to heal."""
        self._halt.set()
        self._thread.join()

    def _run(self) -> None:
        if not self.faults:
            return
        n = 0
        next_at = time.monotonic() + self.plan.fault_interval
        while not self._halt.wait(max(0.0, next_at - time.monotonic())):
            fault = self.faults[n % len(self.faults)]
            n += 1
            event = self._inject(fault)
            self.events.append(event)
            if n == len(self.faults):
                self.rotated.set()
            self.say(f"  fault {n}: {event.fault} {event.target} " +
                     (f"healed after {event.healed - event.started:.1f} s" if event.healed else f"FAILED: {event.error}"))
            next_at = max(next_at + self.plan.fault_interval, time.monotonic())

    def _inject(self, fault: Fault) -> FaultEvent:
        victim, target, affects = self._victim(fault)
        event = FaultEvent(fault.value, target, affects, time.time())
        try:
            self._do(fault, victim, event)
            event.healed = time.time()
        except Exception as exc:  # a fault that cannot heal is a finding, not a crash of the run
            event.error = f"{type(exc).__name__}: {exc}"
            log.exception("fault %s on %s", fault.value, event.target)
        return event

    def _victim(self, fault: Fault) -> tuple[Managed | None, str, list[str]]:
        """The process a fault hits (``None``: the cluster), its name, and the traffic kinds it can delay."""
        if fault in CONSUMER_FAULTS:
            victim = self._rng.choice(self.consumers)
            return victim, victim.name, [victim.role.split(":", 1)[1]]
        if fault in (Fault.KILL_FORWARDER, Fault.PAUSE_FORWARDER):
            victim = self._rng.choice(self.forwarders)
            return victim, victim.name, [Kind.DELAYED.value]
        if fault in (Fault.KILL_CHECKER, Fault.PAUSE_CHECKER):
            return self.checker, self.checker.name, [Kind.TXN.value]
        if fault is Fault.REDIS_DOWN:
            self._down = [self._rng.randrange(self.redis.nodes)]
            return None, f"redis-{self._down[0]}", ALL_KINDS
        if fault is Fault.PAUSE_REDIS_QUORUM:
            self._down = sorted(self._rng.sample(range(self.redis.nodes), self.redis.nodes // 2 + 1))
            return None, "redis-" + "+".join(map(str, self._down)), ALL_KINDS
        if fault is Fault.PAUSE_BROKER:
            return None, "broker", ALL_KINDS
        if fault is Fault.KILL_BROKER:
            self._down = [self._rng.randrange(self.broker.nodes)]
            return None, f"broker-{self._down[0]}", ALL_KINDS
        return None, self.plan.topic(Kind.DELAYED), [Kind.DELAYED.value]  # ADD_PARTITIONS

    def _do(self, fault: Fault, victim: Managed | None, event: FaultEvent) -> None:
        p = self.plan
        if fault in PAUSES:
            victim.pause()
            time.sleep(p.pause_s)
            victim.resume()
        elif fault in (Fault.KILL_CONSUMER, Fault.KILL_FORWARDER, Fault.KILL_CHECKER):
            victim.kill()
            time.sleep(p.restart_after_s)
            victim.start().wait_ready()
        elif fault is Fault.REDIS_DOWN:
            self.redis.stop(self._down[0])
            time.sleep(p.redis_down_s)
            self.redis.start(self._down[0])
        elif fault is Fault.PAUSE_REDIS_QUORUM:
            self._paused(self.redis.pause, self.redis.resume, self._down, p.redis_quorum_pause_s)
        elif fault is Fault.PAUSE_BROKER:
            self.broker.pause()
            try:
                time.sleep(p.broker_pause_s)
            finally:
                self.broker.resume()
        elif fault is Fault.KILL_BROKER:
            self.broker.kill(self._down[0])
            time.sleep(p.broker_down_s)
            self.broker.start(self._down[0])
        elif fault is Fault.SLOW_HANDLER:
            victim.signal(signal.SIGUSR1)  # its next handler call takes slow_handler_ms
            time.sleep(p.slow_handler_ms / 1000)
        elif fault is Fault.CLOCK_JUMP:
            self._jump_clock(victim, event)
        else:
            self._partitions += p.partitions_added
            self.add_partitions(self.plan.topic(Kind.DELAYED), self._partitions)
            event.target += f" -> {self._partitions} partitions"

    @staticmethod
    def _paused(pause: Callable[[int], None], resume: Callable[[int], None], nodes: list[int], seconds: float) -> None:
        """SIGSTOP ``nodes`` for ``seconds``; every one is continued, whatever happens."""
        try:
            for index in nodes:
                pause(index)
            time.sleep(seconds)
        finally:
            for index in nodes:
                resume(index)

    def _jump_clock(self, victim: Managed, event: FaultEvent) -> None:
        """Jump the victim's wall clock ahead or behind (alternately), hold, then set it back."""
        offset = self._clock_sign * self.plan.clock_jump_s
        self._clock_sign = -self._clock_sign
        path = self.clock_files[victim.name]
        event.target += f" {offset:+g} s"
        jump(victim.proc.pid, path, offset)
        try:
            time.sleep(self.plan.clock_hold_s)
        finally:
            if victim.alive():
                jump(victim.proc.pid, path, 0.0)
