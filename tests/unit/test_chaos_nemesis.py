"""The nemesis's rotation: the run keeps its traffic going until every planned fault kind has run once."""

from __future__ import annotations

import time

from rocketkafka.tools.chaos.nemesis import FaultEvent, Nemesis
from rocketkafka.tools.chaos.plan import ChaosPlan, Fault


def nemesis(faults: list[Fault], heal_s: float) -> tuple[Nemesis, list[str]]:
    """A nemesis whose faults only record themselves and take ``heal_s`` to heal."""
    plan = ChaosPlan(duration=1, fault_interval=0.01, faults=faults)
    n = Nemesis(plan, [], [], None, None, say=lambda _: None,  # type: ignore[arg-type]
                add_partitions=lambda topic, total: None, clock_files={"c0": "/dev/null"})
    done: list[str] = []

    def inject(fault: Fault) -> FaultEvent:
        time.sleep(heal_s)
        done.append(fault.value)
        return FaultEvent(fault.value, "x", [], time.time(), healed=time.time())

    n._inject = inject  # type: ignore[method-assign]
    return n, done


def test_rotated_is_set_only_after_every_planned_kind_has_run():
    n, done = nemesis([Fault.ADD_PARTITIONS, Fault.CLOCK_JUMP], heal_s=0.3)
    n.start()
    try:
        time.sleep(0.15)  # the first fault is healing: one kind has not run
        assert not n.rotated.is_set()
        assert n.rotated.wait(5)
        assert set(done[:2]) == {"add-partitions", "clock-jump"}
    finally:
        n.stop()


def test_rotated_is_set_at_once_when_every_planned_fault_is_skipped():
    n, _ = nemesis([Fault.KILL_BROKER], heal_s=0)  # no broker control: skipped, with the reason
    assert n.rotated.is_set() and "kill-broker" in n.skipped
