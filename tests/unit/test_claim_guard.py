"""The batch step's claim guard: a lock claimed again while its earlier claim is live stops the earlier one."""

from __future__ import annotations

import logging

from rocketkafka.message import ConsumeFromWhere
from rocketkafka.ordering.consumers.batch_step import BatchStep
from rocketkafka.ordering.work.partition import Serial
from rocketkafka.ordering.work.step import ClaimContext


class _Work:
    """The scheduler as a claim sees it: batches are only collected."""

    def __init__(self) -> None:
        self.submitted: list = []

    def submit(self, batch) -> None:
        self.submitted.append(batch)

    def recall(self, work) -> None:
        pass


def _context(start: int) -> ClaimContext:
    return ClaimContext(("t", 0), (("t", 0),), 1, {("t", 0): start}, lambda: float("inf"), lambda tp, o: None)


def _step() -> BatchStep:
    return BatchStep(["t"], None, {}, _Work(), Serial(4), ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET)  # type: ignore[arg-type]


def test_a_second_claim_of_a_live_lock_revokes_the_first_loudly(caplog):
    step = _step()
    first = step.claim(_context(0))
    with caplog.at_level(logging.ERROR):
        second = step.claim(_context(0))
    assert first.revoked and not second.revoked
    assert "claim guard" in caplog.text


def test_a_lock_claimed_again_after_its_claim_left_and_drained_is_no_error(caplog):
    step = _step()
    first = step.claim(_context(0))
    first.leave()
    assert first.drained()
    with caplog.at_level(logging.ERROR):
        step.claim(_context(0))
    assert not first.revoked and "claim guard" not in caplog.text
