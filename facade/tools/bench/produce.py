"""Producer throughput beside raw confluent-kafka and "raw + same work", interleaved, each run in a fresh process.

Contenders (100-byte bodies, one 8-partition topic, ``linger.ms=5``, idempotence on, the same
config for every one; each loop calls ``poll(0)`` after every message, as an application serving
delivery reports does, and ``flush()`` at the end, which is timed). Before the clock starts, every
contender sends one message the way its loop does and flushes it: it has connected, has its producer
id and knows the topic. Timing from a cold client measured start-up, not sends: the drop-in learns a
topic on its first ``produce`` (it never auto-creates) and so connected before its loop, raw
confluent-kafka while its loop ran, and the drop-in read 1.54x raw (1.14-2.15x, 5 rounds on Apache
Kafka) with no setting different; warmed alike, the two are level.

- ``raw``: ``confluent_kafka.Producer.produce(topic, body)``;
- ``raw+headers``: raw produce with the headers a tagged, keyed message of ours carries (a fresh
  message id and born time per message, tags, keys) and its record key (the first of its keys: all
  go to one partition): the floor of ``send_oneway`` and of the drop-in's ``produce(tags=..., keys=...)``;
- ``raw+headers+callback``: the same plus a per-message delivery callback: the floor of ``send_async``;
- ``drop-in``: ``rocketkafka.kafka.Producer.produce(topic, body)`` (target >= 0.95x raw);
- ``drop-in tags+keys``: ``produce(topic, body, tags="TagA", keys="k-1")``;
- ``send_async`` / ``send_oneway``: RocketMQ-style, a ``Message(topic, body, tags=, keys=)`` per send.
  Their producer keeps one request in flight per connection (send order, as RocketMQ's); their
  floors keep librdkafka's five: the one setting not equal, and it is theirs to carry.
- ``aio``: :class:`rocketkafka.aio.AsyncProducer`, the same messages awaited in gathered windows of
  :data:`AIO_WINDOW`, against ``send_async`` (target >= 0.8x);
- ``aio-sliding``: the same sends with a sliding window: up to :data:`AIO_WINDOW` in flight, the oldest awaited
  before the next is sent (a streaming producer: no stall at window boundaries), against ``send_async``.
- ``send_async+otel``: ``send_async`` with OpenTelemetry tracing on (``otel=True``: a span per send, its
  context in the headers) under the SDK's tracer provider with a batch span processor whose exporter drops
  what it gets, against ``send_async`` (tracing off): what tracing costs a send, short of the export itself.

Every round runs each contender once, in a new process (no warm caches or allocator state carried
over), in an order rotated per round, so the broker's drift spreads over all of them. A figure is
the median over rounds with its min-max; ratios are medians of the per-round ratios.

``python -m rocketkafka.tools.bench.produce --n 200000 --rounds 3`` prints the table (it uses the
stack of ``ROCKETKAFKA_*`` / ``rocketkafka dev up``).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from rocketkafka.config import Settings
from rocketkafka.tools.bench.rounds import interleave
from rocketkafka.tools.bench.rows import BenchRow, Target

#: Issue 12: drop-in produce without extras >= 0.95x raw; RocketMQ sends and tagged produce
#: >= 0.85x raw + same work and >= 0.5x raw.
PLAIN_TARGET = Target(">=", 0.95, "ratio")
FLOOR_TARGET = Target(">=", 0.85, "ratio")
RAW_TARGET = Target(">=", 0.5, "ratio")

#: contender -> (figure, its floor contender or None)
CONTENDERS: dict[str, tuple[str, str | None]] = {
    "raw": ("raw confluent-kafka produce", None),
    "raw+headers": ("raw produce + same headers", None),
    "raw+headers+callback": ("raw produce + same headers + delivery callback", None),
    "drop-in": ("drop-in Producer.produce", None),
    "drop-in-tags": ("drop-in produce(tags=, keys=)", "raw+headers"),
    "send_async": ("RocketMQ Producer.send_async", "raw+headers+callback"),
    "send_oneway": ("RocketMQ Producer.send_oneway", "raw+headers"),
    "aio": ("AsyncProducer.send, awaited in windows of {window:,}", "send_async"),
    "aio-sliding": ("AsyncProducer.send, sliding window of {window:,}", "send_async"),
    "send_async+otel": ("RocketMQ Producer.send_async, OpenTelemetry tracing on", "send_async"),
}
#: Issue 35: the asyncio door's sends >= 0.8x the sync door's send_async (same messages, same producer settings).
AIO_TARGET = Target(">=", 0.8, "ratio")
#: Sends an asyncio contender keeps in flight: ``aio`` gathers each window, then starts the next (a request handler
#: fanning out, not one await per message); ``aio-sliding`` awaits the oldest before each send past it.
AIO_WINDOW = 2000

BODY_SIZE = 100
PARTITIONS = 8


def producer_config(settings: Settings) -> dict[str, Any]:
    """The config every contender gets (ours read ``bootstrap.servers`` from it too)."""
    return settings.kafka_config(**{"linger.ms": 5, "enable.idempotence": True,
                                    "queue.buffering.max.messages": 1_000_000})


# -- the loops, run in the child process ---------------------------------------------------------
def _loop_raw(config: dict[str, Any], topic: str, n: int, body: bytes) -> float:
    from confluent_kafka import Producer as RawProducer

    p = RawProducer(config)
    produce, poll = p.produce, p.poll
    _ready(lambda: produce(topic, body), p.flush)
    start = time.perf_counter()
    for _ in range(n):
        produce(topic, body)
        poll(0)
    p.flush()
    return time.perf_counter() - start


def _ready(send_one: Callable[[], Any], flush: Callable[..., Any]) -> None:
    """Send one message as the loop will and wait for it: connected, producer id and topic known."""
    send_one()
    if flush(30):
        raise RuntimeError("the warm-up message was not delivered within 30 s")


def _same_headers() -> Callable[[], list[tuple[str, bytes]]]:
    """Headers as our tagged, keyed message carries them, made per message with our id generator."""
    from rocketkafka.msgid import new_msg_id_bytes
    from rocketkafka.names import Header

    uniq, born, tags, keys = Header.MSG_ID, Header.BORN_TIMESTAMP, Header.TAGS, Header.KEYS
    time_ns = time.time_ns

    def headers() -> list[tuple[str, bytes]]:
        return [(uniq, new_msg_id_bytes()), (born, b"%d" % (time_ns() // 1_000_000)), (tags, b"TagA"), (keys, b"k-1")]

    return headers


def _loop_raw_headers(config: dict[str, Any], topic: str, n: int, body: bytes, callback: bool = False) -> float:
    from confluent_kafka import Producer as RawProducer

    p = RawProducer(config)
    produce, poll, headers = p.produce, p.poll, _same_headers()
    done = [0]

    def delivered(err: Any, msg: Any) -> None:
        done[0] += 1

    key = b"k-1"  # ``keys="k-1"`` is the record key of ours: one partition, as theirs
    _ready(lambda: produce(topic, body, key, headers=headers(), on_delivery=delivered if callback else None), p.flush)
    start = time.perf_counter()
    if callback:
        for _ in range(n):
            produce(topic, body, key, headers=headers(), on_delivery=delivered)
            poll(0)
    else:
        for _ in range(n):
            produce(topic, body, key, headers=headers())
            poll(0)
    p.flush()
    return time.perf_counter() - start


def _loop_drop_in(config: dict[str, Any], topic: str, n: int, body: bytes, extras: bool = False) -> float:
    from rocketkafka.kafka import Producer as DropIn

    p = DropIn(config)
    produce, poll = p.produce, p.poll
    _ready(lambda: produce(topic, body, tags="TagA", keys="k-1") if extras else produce(topic, body), p.flush)
    start = time.perf_counter()
    if extras:
        for _ in range(n):
            produce(topic, body, tags="TagA", keys="k-1")
            poll(0)
    else:
        for _ in range(n):
            produce(topic, body)
            poll(0)
    p.flush()
    return time.perf_counter() - start


def _loop_rocketmq(config: dict[str, Any], topic: str, n: int, body: bytes, oneway: bool = False,
                   otel: bool = False) -> float:
    from rocketkafka.message import Message
    from rocketkafka.producer import Producer

    done = [0]

    def delivered(result: Any) -> None:
        done[0] += 1

    flush_spans = _span_sink() if otel else (lambda: None)
    with Producer("bench", config, otel=otel) as p:
        first = Message(topic, body, tags="TagA", keys="k-1")
        _ready(lambda: p.send_oneway(first) if oneway else p.send_async(first, delivered), p.flush)
        start = time.perf_counter()
        if oneway:
            send = p.send_oneway
            for _ in range(n):
                send(Message(topic, body, tags="TagA", keys="k-1"))
        else:
            send_async = p.send_async
            for _ in range(n):
                send_async(Message(topic, body, tags="TagA", keys="k-1"), delivered)
        p.flush()
        flush_spans()  # every span handed to the exporter: tracing's work is inside the time
        return time.perf_counter() - start


def _span_sink() -> Callable[[], Any]:
    """The SDK's tracer provider with a batch span processor whose exporter drops every span (an application's
    setup, short of the export's own I/O); returns its flush."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)
    return provider.force_flush


def _loop_aio(config: dict[str, Any], topic: str, n: int, body: bytes, sliding: bool = False) -> float:
    import asyncio
    from collections import deque

    from rocketkafka.aio import AsyncProducer
    from rocketkafka.message import Message

    async def main() -> float:
        async with AsyncProducer("bench", config) as p:
            await p.send(Message(topic, body, tags="TagA", keys="k-1"))  # connected, topic known
            send = p.send
            start = time.perf_counter()
            if sliding:
                pending: deque[asyncio.Future[Any]] = deque()
                for _ in range(n):
                    pending.append(send(Message(topic, body, tags="TagA", keys="k-1")))
                    if len(pending) >= AIO_WINDOW:
                        await pending.popleft()
                await asyncio.gather(*pending)
            else:
                for sent in range(0, n, AIO_WINDOW):
                    await asyncio.gather(*(send(Message(topic, body, tags="TagA", keys="k-1"))
                                           for _ in range(min(AIO_WINDOW, n - sent))))
            return time.perf_counter() - start

    return asyncio.run(main())


_LOOPS: dict[str, Callable[[dict[str, Any], str, int, bytes], float]] = {
    "raw": _loop_raw,
    "raw+headers": _loop_raw_headers,
    "raw+headers+callback": lambda c, t, n, b: _loop_raw_headers(c, t, n, b, callback=True),
    "drop-in": _loop_drop_in,
    "drop-in-tags": lambda c, t, n, b: _loop_drop_in(c, t, n, b, extras=True),
    "send_async": _loop_rocketmq,
    "send_oneway": lambda c, t, n, b: _loop_rocketmq(c, t, n, b, oneway=True),
    "aio": _loop_aio,
    "aio-sliding": lambda c, t, n, b: _loop_aio(c, t, n, b, sliding=True),
    "send_async+otel": lambda c, t, n, b: _loop_rocketmq(c, t, n, b, otel=True),
}


def run_contender(name: str, settings: Settings, topic: str, n: int) -> float:
    """Messages per second of one contender (in this process)."""
    seconds = _LOOPS[name](producer_config(settings), topic, n, b"x" * BODY_SIZE)
    return n / seconds


# -- the driver ------------------------------------------------------------------------------------
def _in_subprocess(name: str, settings: Settings, topic: str, n: int) -> float:
    out = subprocess.run([sys.executable, "-m", "rocketkafka.tools.bench.produce", "--child", name, "--topic", topic,
                          "--n", str(n)], env=settings.child_environment(), capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"contender {name} failed: {out.stderr.strip()[-2000:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["rate"])


def measure(settings: Settings, n: int, rounds: int, contenders: Sequence[str] = tuple(CONTENDERS),
            log: Callable[[str], Any] | None = None) -> dict[str, list[float]]:
    """``{contender: [rate per round]}``; the rounds of :func:`~rocketkafka.tools.bench.rounds.interleave`, each
    run on a topic of its own."""
    from rocketkafka.admin import TopicAdmin

    admin = TopicAdmin(settings)

    def run_one(name: str) -> dict[str, float]:
        topic = f"bench-produce-{uuid.uuid4().hex[:8]}"
        admin.create(topic, partitions=PARTITIONS)
        return {"rate": _in_subprocess(name, settings, topic, n)}

    run_one("raw")  # not counted: a JVM broker compiles its produce path on its first load, slowing round 1's first runs
    results = interleave(list(contenders), run_one, rounds, log or (lambda _line: None))
    return {name: [run["rate"] for run in runs] for name, runs in results.items()}


def _spread(values: Sequence[float], fmt: str = "{:,.0f}") -> str:
    return f"min-max {fmt.format(min(values))}-{fmt.format(max(values))}"


def rows_of(rates: dict[str, list[float]], n: int) -> list[BenchRow]:
    """Bench rows: each figure's median (min-max); ratios are medians of per-round ratios."""
    rows: list[BenchRow] = []
    raw = rates["raw"]
    rounds = len(raw)
    raw_median = statistics.median(raw)

    def ratio_row(name: str, base: str, target: Target | None, baseline_name: str) -> BenchRow:
        per_round = [a / b for a, b in zip(rates[name], rates[base])]
        ratio = statistics.median(per_round)
        value = statistics.median(rates[name])
        # the row's ratio is value / baseline: choose the baseline so it equals the median per-round ratio
        return BenchRow("produce", f"{CONTENDERS[name][0].format(window=AIO_WINDOW)} vs {baseline_name}", value, "msg/s", value / ratio,
                        baseline_name, target,
                        detail=f"{_spread(rates[name])} msg/s; ratio {ratio:.2f}x ({_spread(per_round, '{:.2f}')}), "
                               f"median of {rounds} interleaved rounds")

    rows.append(BenchRow("produce", CONTENDERS["raw"][0], raw_median, "msg/s",
                         detail=f"{n:,} x {BODY_SIZE} B, {PARTITIONS} partitions, {_spread(raw)}, {rounds} rounds"))
    for floor in ("raw+headers", "raw+headers+callback"):
        if floor in rates:
            rows.append(ratio_row(floor, "raw", None, "raw"))
    if "drop-in" in rates:
        rows.append(ratio_row("drop-in", "raw", PLAIN_TARGET, "raw"))
    for name in ("drop-in-tags", "send_async", "send_oneway"):
        if name in rates:
            floor = CONTENDERS[name][1]
            if floor in rates:
                rows.append(ratio_row(name, floor, FLOOR_TARGET, "raw+same work"))
            rows.append(ratio_row(name, "raw", RAW_TARGET, "raw"))
    if "aio" in rates and "send_async" in rates:
        rows.append(ratio_row("aio", "send_async", AIO_TARGET, "send_async"))
    if "aio-sliding" in rates and "send_async" in rates:
        rows.append(ratio_row("aio-sliding", "send_async", AIO_TARGET, "send_async"))
    if "send_async+otel" in rates and "send_async" in rates:  # issue 35: what tracing costs when on (no target)
        rows.append(ratio_row("send_async+otel", "send_async", None, "send_async, tracing off"))
    return rows


def run(settings: Settings, n: int = 200_000, rounds: int = 3, log: Callable[[str], Any] | None = None) -> list[BenchRow]:
    """Every contender ``rounds`` times (interleaved, fresh processes) with ``n`` messages each; the rows."""
    if rounds < 1 or n < 1:
        raise ValueError(f"rounds and n must be >= 1, got rounds={rounds!r}, n={n!r}")
    return rows_of(measure(settings, n, rounds, log=log), n)


def _main(argv: Sequence[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m rocketkafka.tools.bench.produce", description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200_000, help="messages per contender per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated contenders (raw is always run)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    settings = Settings.load()
    if args.child:
        print(json.dumps({"rate": run_contender(args.child, settings, args.topic, args.n)}))
        return
    names = [c for c in CONTENDERS if not args.only or c == "raw" or c in args.only.split(",")]
    from rocketkafka.tools.bench.report import print_rows

    rows = rows_of(measure(settings, args.n, args.rounds, names, log=print), args.n)
    print_rows(rows, f"produce {args.n:,} x {BODY_SIZE} B, {args.rounds} interleaved rounds", print)


if __name__ == "__main__":
    _main(sys.argv[1:])
