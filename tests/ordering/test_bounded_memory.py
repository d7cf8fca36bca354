"""Bounded memory: a consumer behind a backlog far larger than its caps holds at most its caps, and its RSS
stays flat (the ``bench memory`` code, at a small scale: the full 1,000,000-record run is the benchmark)."""

from __future__ import annotations

import pytest

from rocketkafka.tools.bench.memory import GROWTH_LIMIT_MIB, run

pytestmark = pytest.mark.integration

CAPS = {"pull_threshold_per_partition": 200, "pull_threshold_total": 1000, "pull_batch_size": 100}


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrent", "orderly"])
def test_a_slow_consumer_behind_a_large_backlog_holds_only_its_caps(rk_settings, orderly):
    # 6 s from the first handled record: 20 threads of a 5 ms handler take at most 24,000 of the 40,000
    rows = {r.figure.split(" (")[0]: r for r in run(rk_settings, records=40_000, partitions=8, handler_ms=5,
                                                    seconds=6, sample_s=1, orderly=orderly, options=CAPS)}
    held = rows["most records held by the consumer"].value
    handled = rows["records handled during the run"].value
    growth = rows["RSS growth over the run"].value
    print(f"held at most {held}, handled {handled}, RSS growth {growth} MiB")
    assert 0 < handled < 40_000, "the backlog outlived the run (the handler is the bottleneck)"
    # every record taken and not finished counts, wherever it waits; one fetch may land past the total
    assert held <= CAPS["pull_threshold_total"] + CAPS["pull_batch_size"], held
    assert growth < GROWTH_LIMIT_MIB
