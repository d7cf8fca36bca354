"""``rocketkafka bench consume``: every consumer of the façade beside raw confluent-kafka, round by round.

One topic is filled once (``count`` records of 100 B, 8 partitions, 256 message keys);
then each round every contender reads all of it from the start in a fresh process
(:mod:`~rocketkafka.tools.bench.contenders`), in a rotated order. References run in
the same rounds: ``raw`` (a ``consume(1000)`` loop), ``raw+call`` (the same loop
calling a Python no-op per record: the floor of any per-message Python API) and, for
the drop-in's ``poll()``, ``raw-poll`` (confluent's own ``poll()`` loop: one record per
call costs the same in both). Each figure is the median over rounds of the
steady-state rate, with its min-max, and the median of its per-round ratios to its
raw reference and to the floor.

``raw`` runs with librdkafka's defaults, as the issue defines it; the PushConsumer does not:
its engine sets ``fetch.queue.backoff.ms=10`` (and the broker's ``fetch_wait_ms``), where
librdkafka's 1 s back-off stalls a loop whose prefetch queue filled up (on Tansu the
raw loop measured either ~210k or ~350k msg/s, and ~1.2M msg/s with the engine's
settings). So ``raw-engine`` and ``raw+call-engine`` run the same two loops with the
engine's fetch settings, and each PushConsumer row is judged against the latter: the floor
at equal settings (its ratio to raw at the defaults is in its detail). The drop-in keeps
librdkafka's defaults, and is judged against raw at them.
"""

from __future__ import annotations

import statistics
import uuid
from typing import Any

from confluent_kafka import Producer

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.tools.bench.contenders import fetch_text
from rocketkafka.tools.bench.rounds import Log, figure, interleave, run_contender
from rocketkafka.tools.bench.rows import BenchRow, Target

#: Issue 34's goals, as ratios to a raw reference (the last field) in the same round, at equal settings: a
#: PushConsumer against raw + call at the engine's fetch settings (against raw at librdkafka's defaults it read
#: 1.9x to 2.3x only because that raw loop stalls on a full prefetch queue), the drop-in against raw at the
#: defaults it keeps.
TARGETS: dict[str, tuple[str, Target, str]] = {
    "push-concurrent": ("PushConsumer concurrent, no-op listener", Target(">=", 0.9, "ratio"), "raw+call-engine"),
    "push-orderly": ("PushConsumer orderly (partition), no-op", Target(">=", 0.9, "ratio"), "raw+call-engine"),
    "push-keyed": ("PushConsumer key-ordered, no-op", Target(">=", 0.8, "ratio"), "raw+call-engine"),
    "push-batch": ("PushConsumer batch listener (32), no-op", Target(">=", 1.0, "ratio"), "raw+call-engine"),
    # issue 35: an async def listener beside the same consumer with a plain one, in the same rounds
    "push-async-concurrent": ("PushConsumer concurrent, async def no-op", Target(">=", 0.8, "ratio"),
                              "push-concurrent"),
    "push-async-orderly": ("PushConsumer orderly (partition), async def no-op", Target(">=", 0.8, "ratio"),
                           "push-orderly"),
    "dropin-poll": ("drop-in Consumer.poll()", Target(">=", 0.95, "ratio"), "raw-poll"),
    "dropin-consume": ("drop-in Consumer.consume(1000)", Target(">=", 0.9, "ratio"), "raw"),
}
PARTITIONS, KEYS, SIZE = 8, 256, 100
#: How a row names its reference.
REFERENCE_NAMES = {"raw": "raw", "raw-poll": "raw-poll", "raw+call-engine": "raw + call, engine's fetch",
                   "push-concurrent": "the same, plain def", "push-orderly": "the same, plain def"}


def fill(settings: Settings, count: int, partitions: int = PARTITIONS, keys: int = KEYS) -> str:
    """A new topic holding ``count`` keyed records; its name."""
    topic = f"bench-consume-{uuid.uuid4().hex[:8]}"
    TopicAdmin(settings).create(topic, partitions=partitions)
    p = Producer(settings.kafka_config(**{"linger.ms": 20, "batch.num.messages": 10_000}))
    body = b"x" * SIZE
    for i in range(count):
        key = b"key-%d" % (i % keys)
        while True:
            try:
                p.produce(topic, body, key)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)
    return topic


def bench_consume(settings: Settings, count: int = 500_000, rounds: int = 3,
                  modes: tuple[str, ...] = tuple(TARGETS), log: Log = print) -> list[BenchRow]:
    """Fill a topic, read it with every mode and both references for ``rounds`` rounds; the rows."""
    log(f"filling a topic with {count:,} records")
    topic = fill(settings, count)
    pushed = any(m.startswith("push-") for m in modes)
    # an async row is judged against its sync twin: that one runs in the same rounds, chosen or not
    modes = (*modes, *(r for r in dict.fromkeys(TARGETS[m][2] for m in modes) if r in TARGETS and r not in modes))
    names = ["raw", "raw+call", *(["raw-poll"] if "dropin-poll" in modes else []),
             *(["raw-engine", "raw+call-engine"] if pushed else []), *modes]

    def run_one(mode: str) -> dict[str, Any]:
        return run_contender(settings, {"kind": "consume", "mode": mode, "topic": topic, "partitions": PARTITIONS,
                                        "count": count})

    return consume_rows(interleave(names, run_one, rounds, log), modes, count, rounds, fetch_text(settings))


def consume_rows(results: dict[str, list[dict[str, Any]]], modes: tuple[str, ...], count: int,
                 rounds: int, fetch: str = "") -> list[BenchRow]:
    """The rows of ``bench consume`` from each contender's per-round results (``rate``, ``first_s``); ``fetch``
    names the engine's fetch settings (:func:`~rocketkafka.tools.bench.contenders.fetch_text`)."""
    names = set(results)
    pushed = "raw+call-engine" in names
    raw = figure(results, "raw", "rate")
    floor = figure(results, "raw+call", "rate", "raw")
    detail = f"{count:,} x {SIZE} B, {PARTITIONS} partitions, median of {rounds} rounds"
    rows = [BenchRow("consume", "raw confluent-kafka consume(1000) loop", raw.median, "msg/s", spread=raw.spread,
                     detail=detail),
            BenchRow("consume", "raw + a Python call per record (the floor)", floor.median, "msg/s", raw.median,
                     spread=floor.spread, ratios=floor.ratios)]
    if "raw-poll" in names:
        polled = figure(results, "raw-poll", "rate", "raw")
        rows.append(BenchRow("consume", "raw confluent-kafka poll() loop", polled.median, "msg/s", raw.median,
                             spread=polled.spread, ratios=polled.ratios))
    if pushed:
        for name, title in (("raw-engine", "raw consume(1000) loop"), ("raw+call-engine", "raw + call")):
            f = figure(results, name, "rate", "raw")
            rows.append(BenchRow("consume", f"{title}, the engine's fetch settings", f.median, "msg/s", raw.median,
                                 spread=f.spread, ratios=f.ratios, detail=fetch))
    for mode in modes:
        title, target, reference = TARGETS[mode]
        ours = figure(results, mode, "rate", reference)
        to_floor = figure(results, mode, "rate", "raw+call")
        startup = sorted(r["first_s"] for r in results[mode])[len(results[mode]) // 2]
        base = figure(results, reference, "rate").median
        detail = f"first record after {startup:.2f} s"
        if reference != "raw":
            defaults = figure(results, mode, "rate", "raw")
            detail += (f"; {statistics.median(defaults.ratios):.2f}x raw at librdkafka's defaults "
                       f"({min(defaults.ratios):.2f}-{max(defaults.ratios):.2f})")
        floor_fields = {} if reference == "raw+call-engine" else {"floor_name": "floor",
                                                                   "floor_ratios": to_floor.ratios}
        rows.append(BenchRow("consume", title, ours.median, "msg/s", base, REFERENCE_NAMES[reference], target=target,
                             spread=ours.spread, ratios=ours.ratios, detail=detail, **floor_fields))
    return rows
