"""Flow control's decisions, without a client: which partitions pause and which fetch again."""

from __future__ import annotations

from rocketkafka.ordering.engine.flow_control import over_threshold, over_total, pauses_and_resumes
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
    assert over_total([a, b], 10, 2, 15)
    pause, resume = pauses_and_resumes([a, b], 10, 15)
    assert sorted(pause) == [("t", 0), ("t", 1)] and resume == []
    assert not over_total([a, b], 10, 1, 15)  # one partition cannot hold more than the total: not even added up
