"""Interleaved rounds and the figures made of them (pure logic: no broker)."""

from __future__ import annotations

import pytest

from rocketkafka.tools.bench.report import table_lines
from rocketkafka.tools.bench.rounds import figure, interleave, percentile
from rocketkafka.tools.bench.rows import BenchRow, Target


def test_every_round_runs_every_contender_and_the_order_rotates_and_turns():
    calls: list[str] = []
    results = interleave(["a", "b", "c"], lambda name: calls.append(name) or {"rate": len(calls)}, 3, log=lambda _: None)
    assert calls == ["a", "b", "c", "a", "c", "b", "c", "a", "b"]  # round 2: b c a, reversed
    assert [r["rate"] for r in results["a"]] == [1, 4, 8]


def test_ratios_are_taken_within_a_round_then_their_median():
    results = {"raw": [{"rate": 100}, {"rate": 300}, {"rate": 200}], "ours": [{"rate": 90}, {"rate": 150}, {"rate": 190}]}
    f = figure(results, "ours", "rate", "raw")
    assert f.ratios == (0.9, 0.5, 0.95) and f.median == 150 and f.spread == (90, 190)
    row = BenchRow("consume", "ours", f.median, "msg/s", 200, ratios=f.ratios, target=Target(">=", 0.7, "ratio"))
    assert row.ratio == 0.9 and row.ratio_spread == (0.5, 0.95) and row.met is True


def test_a_floor_target_must_hold_too():
    row = BenchRow("produce", "send_async", 50, "msg/s", 100, ratios=(0.5,), target=Target(">=", 0.5, "ratio"),
                   floor_name="raw + same work", floor_ratios=(0.8,), floor_target=Target(">=", 0.85, "ratio"))
    assert row.floor_ratio == 0.8 and row.met is False
    assert row.target_text == ">= 0.5x raw, >= 0.85x raw + same work"
    assert BenchRow.from_dict(row.to_dict()) == row


def test_the_table_shows_the_spread_of_values_and_ratios():
    row = BenchRow("consume", "ours", 150_000, "msg/s", 200_000, spread=(90_000, 190_000), ratios=(0.9, 0.5, 0.95),
                   floor_name="floor", floor_ratios=(1.0,))
    line = table_lines([row])[-1]
    assert "150,000 (90,000-190,000)" in line and "0.90x raw (0.50-0.95), 1.00x floor" in line


@pytest.mark.parametrize(("p", "expected"), [(50, 5), (99, 10), (100, 10), (1, 1)])
def test_nearest_rank_percentiles(p, expected):
    assert percentile(list(range(1, 11)), p) == expected


def test_a_push_consumers_latency_is_judged_against_the_raw_reader_beside_it():
    """Not against raw-tuned's own turn: Tansu's hop drifts between turns (bench latency's docstring)."""
    from rocketkafka.tools.bench.latency import latency_rows

    def raw(p50, p99):
        return {"p50_ms": p50, "p99_ms": p99}

    def push(p50, p99, beside_p50, beside_p99):
        return {**raw(p50, p99), "beside_p50_ms": beside_p50, "beside_p99_ms": beside_p99,
                "added_p1_ms": -5, "added_p50_ms": p50 - beside_p50, "added_p99_ms": p99 - beside_p99}

    results = {"raw-default": [raw(130, 260)] * 3, "raw-tuned": [raw(7, 14)] * 3,  # a quiet turn of raw-tuned alone
               "push-concurrent": [push(60, 120, 58, 110), push(9, 40, 8, 30), push(10, 300, 9, 290)],
               "push-orderly": [push(9, 90, 8, 30)] * 3}
    rows = {r.figure: r for r in latency_rows(results, 1000, 10, 3)}
    p99 = rows["PushConsumer concurrent, defaults: p99"]
    assert p99.value == 120 and p99.target.threshold == 130 and p99.met is True  # beside median 110 + 20
    assert "per record ours - raw: p1 -5 ms, p99 10 ms" in p99.detail
    assert rows["PushConsumer orderly, defaults: p99"].met is False  # 90 > 30 + 20: it added 60 ms
    assert rows["raw, tuned (fetch.wait.max.ms=5): p99"].target is None
