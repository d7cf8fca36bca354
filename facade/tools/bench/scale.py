"""``rocketkafka bench scale``: two orderly members sharing many partitions (issue 34's scale rows).

For each partition count (64 and 2,048 by default), in a fresh child process of its own
(``python -m rocketkafka.tools.bench.scale '<spec>'``, settings through the environment):

- **take**: one orderly PushConsumer (defaults, no-op listener) starts; seconds until it owns
  every partition;
- **split**: a second member of the group starts; seconds until the two own disjoint halves;
- **spread**: one record sent to each idle partition; seconds from the first send until every
  one was handled, and the longest time from a record's delivery report until it was handled:
  at 2,048 partitions most of the first is the broker taking 2,048 one-record batches, so the
  goal is judged on the second;
- **idle**: then, with both members idle, the child's CPU (user + sys of all its threads, read
  from outside as ``bench idle`` does) and the Redis commands of all nodes (``INFO stats``
  ``total_commands_processed``) over a window.

The idle floor is two raw confluent-kafka consumers at librdkafka's defaults, each assigned half
of the partitions (a ``consume(1000, 1 s)`` loop each), in a child of its own, interleaved with
the members round by round. Issue 34's goals: take and split <= 1 s (at 8,192 partitions too:
``--partitions 8192``), spread <= 0.5 s, idle CPU <= 1.5x the raw pair, and Redis commands that
grow with members, not partitions (read across the partition counts; no target).
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import redis

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.testing.waiting import wait_for
from rocketkafka.tools.bench.idle import UNIT, measure
from rocketkafka.tools.bench.rounds import Log, figure, interleave
from rocketkafka.tools.bench.rows import BenchRow, Target

MODES = ("members", "raw-pair")
PARTITIONS = (64, 2048)
#: Issue 34's goals.
TAKE_TARGET = Target("<=", 1.0, note="issue 34")
SPREAD_TARGET = Target("<=", 0.5, note="issue 34")
IDLE_TARGET = Target("<=", 1.5, of="ratio", note="issue 34")
#: Seconds a phase of the child (take, split, spread) may take before the round fails.
PHASE_TIMEOUT_S = 120.0
#: Seconds between the split and the spread's first send: the members' first fetches are out, as when idle.
QUIET_S = 1.0


def bench_scale(settings: Settings, partitions: Sequence[int] = PARTITIONS, seconds: float = 10.0,
                rounds: int = 1, settle: float = 2.0, log: Log = print) -> list[BenchRow]:
    """Every figure of the module docstring for each of ``partitions``, ``rounds`` interleaved rounds each."""
    rows: list[BenchRow] = []
    for count in partitions:
        topic = f"bench-scale-{count}-{uuid.uuid4().hex[:8]}"
        log(f"scale: creating {topic} ({count:,} partitions)")
        admin = TopicAdmin(settings)
        admin.create(topic, partitions=count, timeout=max(30.0, count / 20))
        nodes = [redis.Redis.from_url(url, socket_timeout=5) for url in settings.require_redis()]
        try:
            _await_leaders(admin, topic, count)
            def run_one(mode: str) -> dict[str, Any]:
                spec = {"mode": mode, "topic": topic, "partitions": count}
                return measure(settings, spec, settle, seconds, start_timeout=4 * PHASE_TIMEOUT_S, module=__name__,
                               counter=lambda: redis_commands(nodes))

            rows += scale_rows(interleave(list(MODES), run_one, rounds, log), count, seconds, rounds)
        finally:
            for node in nodes:
                node.close()
            admin.delete([topic])  # thousands of partitions: an embedded broker's heap is small
    return rows


def _await_leaders(admin: TopicAdmin, topic: str, partitions: int) -> None:
    """Wait until every partition of the new ``topic`` has a leader: the figures are of a topic in use, not of
    a broker still electing leaders of thousands of new partitions."""
    def led() -> bool:
        found = admin.client.list_topics(topic, timeout=30).topics.get(topic)
        return found is not None and len(found.partitions) == partitions \
            and all(p.leader >= 0 for p in found.partitions.values())

    if not wait_for(led, PHASE_TIMEOUT_S, interval=0.5):
        raise TimeoutError(f"{topic}: not every partition had a leader within {PHASE_TIMEOUT_S:g} s")


def redis_commands(nodes: Sequence[redis.Redis]) -> float:
    """Commands every node processed so far, summed (each ``INFO`` counts one)."""
    return float(sum(node.info("stats")["total_commands_processed"] for node in nodes))


def scale_rows(results: dict[str, list[dict[str, Any]]], partitions: int, seconds: float,
               rounds: int) -> list[BenchRow]:
    """The rows of one partition count from its contenders' results (see :func:`measure` and :func:`_child`)."""
    at = f"{partitions:,} partitions"
    window = f"{seconds:g} s windows, median of {rounds} round(s)"
    take, split, spread, sent, lag = (figure(results, "members", m)
                                      for m in ("take_s", "split_s", "spread_s", "sent_s", "lag_s"))
    members = figure(results, "members", "cpu_pct", "raw-pair")
    raw = figure(results, "raw-pair", "cpu_pct")
    commands = _per_second(results, "members")
    raw_commands = _per_second(results, "raw-pair")
    return [
        BenchRow("scale", f"take all {at}: one orderly member", take.median, "s", target=TAKE_TARGET,
                 spread=take.spread, detail="from start() (joining, its dead-letter topic made) until it owns every "
                                            "partition"),
        BenchRow("scale", f"split {at} on a join", split.median, "s", target=TAKE_TARGET, spread=split.spread,
                 detail="from the second member's start() until the two own disjoint halves"),
        BenchRow("scale", f"one record to each of {at}: from the first send until every one is handled",
                 spread.median, "s", spread=spread.spread,
                 detail=f"two idle orderly members; the producer's sends and flush took {sent.median:.3g} s of it"),
        BenchRow("scale", f"one record to each of {at}: longest from its acknowledgement to its handling",
                 lag.median, "s", target=SPREAD_TARGET, spread=lag.spread,
                 detail="per record, from its delivery report (the broker has it) until a member handled it"),
        BenchRow("scale", f"raw pair idle, {at}", raw.median, UNIT, spread=raw.spread,
                 detail=f"two raw consumers at librdkafka's defaults, half the partitions each; {window}"),
        BenchRow("scale", f"two orderly members idle, {at}", members.median, UNIT, raw.median, "raw pair",
                 target=IDLE_TARGET, spread=members.spread, ratios=members.ratios,
                 detail=f"both in one process, defaults; {window}"),
        BenchRow("scale", f"Redis commands, two idle members, {at}", commands, "cmd/s",
                 detail=f"all nodes, INFO stats; {raw_commands:.1f}/s in the raw pair's windows (the floor: "
                        "other clients of the nodes, the bench's INFO)"),
    ]


def _per_second(results: dict[str, list[dict[str, Any]]], mode: str) -> float:
    """Median over rounds of ``counted`` per second of the window."""
    return statistics.median(r["counted"] / r["window_s"] for r in results[mode])


# -- the measured side -------------------------------------------------------------------------
def _child(spec: dict[str, Any]) -> None:
    """Run ``spec["mode"]``'s phases, print one JSON line of their figures, idle until SIGTERM."""
    import signal

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    settings, topic, partitions = Settings.load(), spec["topic"], spec["partitions"]
    if spec["mode"] == "raw-pair":
        _raw_pair(settings, topic, partitions, stop)
    elif spec["mode"] == "members":
        _members(settings, topic, partitions, stop)
    else:
        raise ValueError(f"unknown scale mode {spec['mode']!r}; choose from {', '.join(MODES)}")


class _Seen:
    """The partitions of which a record was handled; set once all ``partitions`` were (any thread)."""

    def __init__(self, partitions: int) -> None:
        self.partitions, self.every_one = partitions, threading.Event()
        self._seen: dict[int, float] = {}  # partition -> when its first record was handled

    def add(self, partition: int) -> None:
        self._seen.setdefault(partition, time.perf_counter())  # one dict call: atomic under the GIL, any lane
        if len(self._seen) >= self.partitions:
            self.every_one.set()

    def spread(self, settings: Settings, topic: str) -> dict[str, float]:
        """Send one record to each partition: seconds from the first send until every one was handled
        (``spread_s``), until the producer's flush returned (``sent_s``), and the longest from a record's delivery
        report to its handling (``lag_s``; none is negative: a record handled before its report counts 0). The
        producer knows the topic's leaders before its clock starts."""
        from confluent_kafka import Producer

        acked: dict[int, float] = {}
        producer = Producer(settings.kafka_config(**{"linger.ms": 0}))
        producer.list_topics(topic, timeout=30)
        started = time.perf_counter()
        for p in range(self.partitions):
            producer.produce(topic, b"x" * 100, partition=p,
                             on_delivery=lambda _err, msg: acked.setdefault(msg.partition(), time.perf_counter()))
        producer.flush(30)
        sent = time.perf_counter() - started
        if not self.every_one.wait(PHASE_TIMEOUT_S):
            raise TimeoutError(f"spread: {len(self._seen)} of {self.partitions} partitions handled in "
                               f"{PHASE_TIMEOUT_S:g} s")
        lag = max((max(0.0, handled - acked.get(p, started)) for p, handled in self._seen.items()), default=0.0)
        return {"spread_s": time.perf_counter() - started, "sent_s": sent, "lag_s": lag}


def _members(settings: Settings, topic: str, partitions: int, stop: threading.Event) -> None:
    from rocketkafka.ordering.consumers.push_consumer import PushConsumer

    group, seen = f"bench-scale-{uuid.uuid4().hex[:8]}", _Seen(partitions)

    def member() -> PushConsumer:
        consumer = PushConsumer(group, settings=settings, orderly=True)
        consumer.subscribe(topic, lambda message: seen.add(message.queue_id))
        return consumer

    first, second = member(), member()
    try:
        started = time.perf_counter()
        first.start()
        _until(lambda: len(first.assignment()) == partitions, "take")
        take = time.perf_counter() - started
        started = time.perf_counter()
        second.start()
        _until(lambda: _split(first.assignment(), second.assignment(), partitions), "split")
        split = time.perf_counter() - started
        time.sleep(QUIET_S)
        print(json.dumps({"take_s": take, "split_s": split, **seen.spread(settings, topic), "owned": partitions}),
              flush=True)
        stop.wait()
    finally:
        second.shutdown()
        first.shutdown()
        internal = [settings.topics.dead_letter(group), settings.topics.retry(group)]  # made by start(): no leak
        with contextlib.suppress(Exception):
            admin = TopicAdmin(settings)
            admin.delete([t for t in internal if admin.exists(t)])


def _split(a: Sequence[Any], b: Sequence[Any], partitions: int) -> bool:
    """Both own some, none twice, every one once."""
    mine, theirs = set(map(tuple, a)), set(map(tuple, b))
    return bool(mine) and bool(theirs) and not mine & theirs and len(mine) + len(theirs) == partitions


def _until(done: Callable[[], bool], phase: str) -> None:
    if not wait_for(done, PHASE_TIMEOUT_S, interval=0.002):
        raise TimeoutError(f"{phase}: not done within {PHASE_TIMEOUT_S:g} s")


def _raw_pair(settings: Settings, topic: str, partitions: int, stop: threading.Event) -> None:
    """Two raw consumers at librdkafka's defaults, half of the partitions each, idle."""
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    consumers = []
    for half in (range(0, partitions, 2), range(1, partitions, 2)):
        c = Consumer(settings.kafka_config(**{"group.id": f"bench-scale-raw-{uuid.uuid4().hex[:8]}",
                                              "enable.auto.commit": False}))
        c.assign([TopicPartition(topic, p, OFFSET_END) for p in half])
        c.consume(1000, 1.0)  # positions resolved, first fetches out
        consumers.append(c)

    def loop(c: Any) -> None:
        while not stop.is_set():
            c.consume(1000, 1.0)

    threads = [threading.Thread(target=loop, args=(c,), daemon=True) for c in consumers]
    for t in threads:
        t.start()
    print(json.dumps({"owned": partitions}), flush=True)
    stop.wait()
    for t in threads:
        t.join()
    for c in consumers:
        c.close()


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
