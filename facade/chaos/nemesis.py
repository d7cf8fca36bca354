"""The fault schedule: one fault every ``fault_interval`` seconds, kinds round robin, victims at random.

Every fault heals itself (the killed process is started again, the stopped one
continued, the Redis node restarted) before the next one starts, and is recorded with
its start and heal times so the verdict can measure recovery.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from facade.chaos.plan import ChaosPlan, Fault
from facade.chaos.processes import Managed

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
    """Stop and start one Redis node by index (the embedded stack can; a given cluster cannot)."""

    nodes: int
    stop: Callable[[int], None]
    start: Callable[[int], None]


@dataclass
class Nemesis:
    """Runs the schedule in a thread until :meth:`stop`; ``events`` lists what it did."""

    plan: ChaosPlan
    consumers: list[Managed]
    forwarders: list[Managed]
    checker: Managed
    redis: RedisControl | None
    say: Callable[[str], None] = print
    events: list[FaultEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.plan.seed)
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self.faults = [f for f in self.plan.faults if f is not Fault.REDIS_DOWN or self.redis is not None]

    def start(self) -> Nemesis:
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
            self.say(f"  fault {n}: {event.fault} {event.target} " +
                     (f"healed after {event.healed - event.started:.1f} s" if event.healed else f"FAILED: {event.error}"))
            next_at += self.plan.fault_interval

    def _inject(self, fault: Fault) -> FaultEvent:
        p = self.plan
        if fault in (Fault.KILL_CONSUMER, Fault.PAUSE_CONSUMER):
            victim = self._rng.choice(self.consumers)
            affects = [victim.role.split(":", 1)[1]]
        elif fault in (Fault.KILL_FORWARDER, Fault.PAUSE_FORWARDER):
            victim, affects = self._rng.choice(self.forwarders), ["delayed"]
        elif fault in (Fault.KILL_CHECKER, Fault.PAUSE_CHECKER):
            victim, affects = self.checker, ["txn"]
        else:
            victim, affects = None, ["orderly", "keyed", "delayed", "txn"]
        index = self._rng.randrange(self.redis.nodes) if victim is None else -1
        event = FaultEvent(fault.value, victim.name if victim else f"redis-{index}", affects, time.time())
        try:
            if fault in (Fault.PAUSE_CONSUMER, Fault.PAUSE_FORWARDER, Fault.PAUSE_CHECKER):
                victim.pause()
                time.sleep(p.pause_s)
                victim.resume()
            elif victim is not None:  # a kill
                victim.kill()
                time.sleep(p.restart_after_s)
                victim.start().wait_ready()
            else:
                self.redis.stop(index)
                time.sleep(p.redis_down_s)
                self.redis.start(index)
            event.healed = time.time()
        except Exception as exc:  # a fault that cannot heal is a finding, not a crash of the run
            event.error = f"{type(exc).__name__}: {exc}"
            log.exception("fault %s on %s", fault.value, event.target)
        return event
