"""Flow control's decisions, without a client: which partitions pause and which fetch again."""

from __future__ import annotations

from rocketkafka.ordering.engine.flow_control import FlowGauge, over_threshold, pause_and_resume, pauses_and_resumes
from rocketkafka.ordering.engine.owned import OwnedLock


class Backlog:
    """A claim that reports a fixed backlog per partition."""

    def __init__(self, **held: int) -> None:
        self.held = {("t", int(p[1:])): n for p, n in held.items()}

    def backlog(self):
        return dict(self.held)


def owned(**held: int) -> OwnedLock:
    claim = Backlog(**held)
    return OwnedLock(("t", 0), claim, tuple(claim.held), 1)  # type: ignore[arg-type]


def test_a_partition_over_its_threshold_pauses_once():
    o = owned(p0=11, p1=10)
    assert over_threshold(o, 10) == [("t", 0)]
    assert over_threshold(o, 10) == []  # already paused: not paused again
    assert o.paused == {("t", 0)}


def test_a_paused_partition_fetches_again_only_at_half_its_threshold():
    o = owned(p0=11)
    assert pauses_and_resumes([o], 10, 1000) == ([("t", 0)], [])
    o.claim.held[("t", 0)] = 6  # type: ignore[attr-defined]
    assert pauses_and_resumes([o], 10, 1000) == ([], [])
    o.claim.held[("t", 0)] = 5  # type: ignore[attr-defined]
    assert pauses_and_resumes([o], 10, 1000) == ([], [("t", 0)]) and not o.paused


def test_over_the_total_every_partition_pauses_even_under_its_own_threshold():
    a, b = owned(p0=8), owned(p1=8)
    gauge = FlowGauge()
    gauge.took(16)
    assert gauge.over([a, b], 15)
    pause, resume = pauses_and_resumes([a, b], 10, 15, gauge)
    assert sorted(pause) == [("t", 0), ("t", 1)] and resume == []


class Counted(Backlog):
    reads = 0

    def backlog(self):
        Counted.reads += 1
        return super().backlog()


def test_the_claims_are_added_up_only_when_what_was_taken_since_may_pass_the_total():
    claims = [OwnedLock(("t", p), Counted(**{f"p{p}": 1}), (("t", p),), 1) for p in range(100)]  # type: ignore[arg-type]
    gauge = FlowGauge()
    for _ in claims:  # one record each, as 100 one-record fetches: under the total, never added up
        gauge.took(1)
        assert not gauge.over(claims, 150)
    assert Counted.reads == 0
    gauge.took(60)  # the bound (160) passes the total: added up once, 100 held, so not over
    assert not gauge.over(claims, 150) and Counted.reads == 100
    gauge.took(10)  # 110 at most: no second count
    assert not gauge.over(claims, 150) and Counted.reads == 100
    pauses_and_resumes(claims, 10, 150, gauge)  # a full pass counts too
    gauge.took(45)
    assert not gauge.over(claims, 150) and Counted.reads == 200


class Kafka:
    def __init__(self) -> None:
        self.paused: list = []
        self.resumed: list = []

    def pause(self, tps):
        self.paused += [(tp.topic, tp.partition) for tp in tps]

    def resume(self, tps):
        self.resumed += [(tp.topic, tp.partition) for tp in tps]


def test_a_pass_over_every_claim_runs_only_while_a_partition_may_resume_or_the_total_may_be_passed():
    quiet, busy = owned(p0=3), owned(p1=3)
    kafka, gauge = Kafka(), FlowGauge()
    pause_and_resume(kafka, [quiet, busy], 10, 1000, gauge)  # nothing taken, nothing paused: no pass
    assert not gauge.pass_due(1000) and kafka.paused == kafka.resumed == []
    busy.claim.held[("t", 1)] = 11  # type: ignore[attr-defined]
    assert over_threshold(busy, 10, gauge) == [("t", 1)] and gauge.pass_due(1000)  # paused at its take
    pause_and_resume(kafka, [quiet, busy], 10, 1000, gauge)
    assert kafka.resumed == [] and gauge.pass_due(1000)  # still over half its threshold: stays paused
    busy.claim.held[("t", 1)] = 5  # type: ignore[attr-defined]
    pause_and_resume(kafka, [quiet, busy], 10, 1000, gauge)
    assert kafka.resumed == [("t", 1)] and not busy.paused and not gauge.pass_due(1000)  # resumed: passes stop
