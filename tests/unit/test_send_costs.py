"""``rocketkafka bench send-costs`` times every step of a send without a broker, and leaves nothing queued."""

from __future__ import annotations

import pytest

from rocketkafka.tools.bench.send_costs import measure, table


def test_every_step_is_timed_and_tabled():
    costs = measure(count=300, repeat=1)
    steps = [c.step for c in costs]
    assert {"raw + same work", "Message(...)", "produce_message", "send_oneway", "send_async"} <= set(steps)
    assert all(c.micros > 0 for c in costs)
    assert table(costs).count("\n") == len(costs) + 1


def test_counts_below_one_are_refused():
    with pytest.raises(ValueError, match="count and repeat"):
        measure(count=0)
