"""The nemesis's rotation: the run keeps its traffic going until every planned fault kind has run once."""

from __future__ import annotations

import threading
import time

from rocketkafka.tools.chaos.nemesis import FaultEvent, Nemesis
from rocketkafka.tools.chaos.plan import ChaosPlan, Fault


def nemesis(faults: list[Fault], heal: threading.Event) -> tuple[Nemesis, list[str]]:
    """A nemesis whose faults only record themselves, each healing once ``heal`` is set."""
    plan = ChaosPlan(duration=1, fault_interval=0.01, faults=faults)
    n = Nemesis(plan, [], [], None, None, say=lambda _: None,  # type: ignore[arg-type]
                add_partitions=lambda topic, total: None, clock_files={"c0": "/dev/null"})
    started: list[str] = []

    def inject(fault: Fault) -> FaultEvent:
        started.append(fault.value)
        heal.wait()
        return FaultEvent(fault.value, "x", [], time.time(), healed=time.time())

    n._inject = inject  # type: ignore[method-assign]
    return n, started


def test_rotated_is_set_only_after_every_planned_kind_has_run():
    heal = threading.Event()
    n, started = nemesis([Fault.ADD_PARTITIONS, Fault.CLOCK_JUMP], heal)
    n.start()
    try:
        deadline = time.monotonic() + 5
        while not started and time.monotonic() < deadline:
            time.sleep(0.01)
        assert started == ["add-partitions"]  # the first fault is healing: the second has not run
        assert not n.rotated.is_set() and n.not_run() == ["add-partitions", "clock-jump"]
        heal.set()
        assert n.rotated.wait(5)
        assert n.not_run() == []
    finally:
        heal.set()
        n.stop()


def test_rotated_is_set_at_once_when_every_planned_fault_is_skipped():
    n, _ = nemesis([Fault.KILL_BROKER], threading.Event())  # no broker control: skipped, with the reason
    assert n.rotated.is_set() and "kill-broker" in n.skipped and n.not_run() == []
