"""``rocketkafka bench latency``: produce->handler latency at a steady rate, default settings, beside raw.

Each contender process owns the partitions first, then a paced producer sends
``rate`` msg/s (default 1,000) for ``seconds``; the figures are p50 and p99 of handler
time minus send time. References in the same rounds: raw confluent-kafka with
librdkafka's defaults, and raw tuned for latency (``fetch.wait.max.ms=5``). Issue
12's targets: PushConsumer with *its default settings* within raw-tuned p50 + 5 ms and
p99 + 20 ms.
"""

from __future__ import annotations

import statistics
import uuid
from typing import Any

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.tools.bench.contenders import LATENCY_MODES
from rocketkafka.tools.bench.rounds import Log, figure, interleave, run_contender
from rocketkafka.tools.bench.rows import BenchRow, Target

PARTITIONS = 8
P50_SLACK_MS, P99_SLACK_MS = 5.0, 20.0


def bench_latency(settings: Settings, rate: int = 1000, seconds: float = 10.0, rounds: int = 3,
                  log: Log = print) -> list[BenchRow]:
    """Latency of every mode of :data:`LATENCY_MODES` over ``rounds`` interleaved rounds; the rows."""
    topic = f"bench-latency-{uuid.uuid4().hex[:8]}"
    TopicAdmin(settings).create(topic, partitions=PARTITIONS)

    def run_one(mode: str) -> dict[str, Any]:
        return run_contender(settings, {"kind": "latency", "mode": mode, "topic": topic, "partitions": PARTITIONS,
                                        "rate": rate, "seconds": seconds})

    results = interleave(list(LATENCY_MODES), run_one, rounds, log)
    tuned_p50 = statistics.median(r["p50_ms"] for r in results["raw-tuned"])
    tuned_p99 = statistics.median(r["p99_ms"] for r in results["raw-tuned"])
    detail = f"{rate:,} msg/s for {seconds:g} s, {PARTITIONS} partitions, median of {rounds} rounds"
    titles = {"raw-default": "raw confluent-kafka, default settings", "raw-tuned": "raw, tuned (fetch.wait.max.ms=5)",
              "push-concurrent": "PushConsumer concurrent, defaults", "push-orderly": "PushConsumer orderly, defaults"}
    rows = []
    for mode in LATENCY_MODES:
        ours = mode.startswith("push-")
        for pct, tuned, slack in (("p50", tuned_p50, P50_SLACK_MS), ("p99", tuned_p99, P99_SLACK_MS)):
            f = figure(results, mode, f"{pct}_ms")
            target = Target("<=", round(tuned + slack, 1), "value", f"raw tuned {pct} + {slack:g} ms") if ours else None
            rows.append(BenchRow("latency", f"{titles[mode]}: {pct}", f.median, "ms", target=target, spread=f.spread,
                                 detail=detail if mode == "raw-default" and pct == "p50" else ""))
    return rows
