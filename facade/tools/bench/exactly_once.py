"""``rocketkafka bench exactly-once``: the cost of exactly once, at least once beside it in the same run.

It needs a broker whose read_committed readers skip aborted records (Apache Kafka: ``--broker kafka``),
and refuses any other with the probe's reason.

- **Forwarder, already-due records.** ``due_count`` records wait on level 1 until they are due.
  Then an at-least-once forwarder process and an exactly-once one forward them in turn, on
  fresh topics each round. The rate is records over the span of the output records' timestamps.
- **Forwarder lateness.** ``rate`` level-1 messages per second for ``seconds``, through each mode
  in turn: receive time - due time, p50 and p99.
- **Consumer, consume -> produce.** ``count`` records on an 8-partition topic. An orderly push
  consumer sends each message on to an output topic: at least once with a plain producer's
  ``send_async``, exactly once with ``consumer.producer.send`` inside the transaction of its
  batch (``consume_batch_size`` messages a transaction). Rate as above.
- **Consumer latency.** ``rate`` msg/s through each mode: output receive time - send time, p50
  and p99.

Each figure is the median of ``rounds`` rounds. A round runs both modes, so the broker's drift
hits both. The exactly-once row's ratio is exactly once / at least once.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.errors import ConfigError
from rocketkafka.exactly_once import aborted_records_hidden
from rocketkafka.message import Message
from rocketkafka.producer import Producer
from rocketkafka.schedule.levels import DelayConfig
from rocketkafka.schedule.routing import now_ms
from rocketkafka.tools.bench.delay import (BENCH_CONSUMER_OPTIONS, ForwarderProcess, Receiver, fresh_settings,
                                           output_rate, percentile, send_due_records, wait_forwarding)
from rocketkafka.tools.bench.rows import BenchRow

MODES = ("at least once", "exactly once")
PARTITIONS = 8
Log = Callable[[str], Any]


def bench_exactly_once(settings: Settings, *, due_count: int = 50_000, count: int = 50_000, rate: int = 500,
                       seconds: float = 20.0, rounds: int = 3, batch: int = 64, log: Log = print) -> list[BenchRow]:
    """Every figure of the module docstring, both modes, ``rounds`` interleaved rounds.

    Raises:
        ConfigError: the broker's read_committed readers see aborted records (exactly once cannot run there).
    """
    why_not = aborted_records_hidden(settings)
    if why_not is not None:
        raise ConfigError(f"bench exactly-once needs a broker that hides aborted records (--broker kafka): {why_not}")
    figures: dict[str, dict[str, list[float]]] = {}

    def note(figure: str, mode: str, value: float) -> None:
        figures.setdefault(figure, {m: [] for m in MODES})[mode].append(value)

    for n in range(rounds):
        for mode in MODES:
            eos = mode == "exactly once"
            note("forwarder, already-due records", mode, _forwarder_rate(settings, due_count, eos))
            p50, p99 = _forwarder_lateness(settings, rate, seconds, eos)
            note("forwarder lateness p50 (receive - due)", mode, p50)
            note("forwarder lateness p99 (receive - due)", mode, p99)
            note("consumer, consume -> produce", mode, _consumer_rate(settings, count, eos, batch))
            p50, p99 = _consumer_latency(settings, rate, seconds, eos, batch)
            note("consumer latency p50 (output - send)", mode, p50)
            note("consumer latency p99 (output - send)", mode, p99)
            log(f"  round {n + 1}/{rounds}, {mode}: " + ", ".join(
                f"{figure.split(' (')[0]} {values[mode][-1]:,.0f}" for figure, values in figures.items()))
    return _rows(figures, batch)


def _rows(figures: dict[str, dict[str, list[float]]], batch: int) -> list[BenchRow]:
    rows = []
    for figure, values in figures.items():
        unit = "ms" if "lateness" in figure or "latency" in figure else "msg/s"
        alo, eos = values["at least once"], values["exactly once"]
        detail = f"a transaction spans a lane's runs (of up to {batch} messages; <= 100 ms)" \
            if figure.startswith("consumer") else "a transaction spans a lane's runs of a delay partition (<= 100 ms)"
        rows.append(BenchRow("exactly-once", f"{figure}, at least once", statistics.median(alo), unit,
                             spread=(min(alo), max(alo))))
        rows.append(BenchRow("exactly-once", f"{figure}, exactly once", statistics.median(eos), unit,
                             baseline=statistics.median(alo), baseline_name="at least once",
                             spread=(min(eos), max(eos)), ratios=tuple(e / a for e, a in zip(eos, alo) if a),
                             detail=detail))
    return rows


# -- the forwarder ---------------------------------------------------------------------------------
def _forwarder_rate(settings: Settings, count: int, exactly_once: bool) -> float:
    config = DelayConfig(levels="1s", partitions=4)
    run = fresh_settings(settings, "eos").model_copy(update={"delay": config})
    real = f"bench-real-{uuid.uuid4().hex[:6]}"
    TopicAdmin(run).create(real, partitions=PARTITIONS)
    send_due_records(run, real, count)
    time.sleep(config.levels[0] / 1000 + 0.5)  # all due now
    process = ForwarderProcess(run, config, "eos-throughput", exactly_once)
    try:
        return output_rate(run, real, PARTITIONS, count, timeout=120 + count / 1000)
    finally:
        process.stop()


def _forwarder_lateness(settings: Settings, rate: int, seconds: float, exactly_once: bool) -> tuple[float, float]:
    config = DelayConfig(levels="1s", partitions=4)
    run = fresh_settings(settings, "eoslat").model_copy(update={"delay": config})
    real = f"bench-real-{uuid.uuid4().hex[:6]}"
    TopicAdmin(run).create(real, partitions=PARTITIONS)
    process = ForwarderProcess(run, config, "eos-lateness", exactly_once)
    receiver = Receiver(run, real, PARTITIONS)
    try:
        with Producer("bench-eos", settings=run) as producer:
            wait_forwarding(producer, receiver, process, real)
            due = _paced(rate, seconds, lambda: _delayed_send(producer, real, config))
        receiver.wait(set(due), 30)
    finally:
        receiver.close()
        process.stop()
    first: dict[str, int] = {}
    for received, msg_id, _stamp in receiver.arrivals:
        first.setdefault(msg_id, received)
    late = sorted(first[m] - d for m, d in due.items() if m in first)
    return percentile(late, 0.5), percentile(late, 0.99)


def _delayed_send(producer: Producer, topic: str, config: DelayConfig) -> tuple[str, int]:
    msg = Message(topic, body=b"x" * 100, delay_time_level=1)
    due = now_ms() + config.level_ms(1)
    producer.send_async(msg, _ignore)
    return msg.id, due


# -- the consumer ----------------------------------------------------------------------------------
def _consumer_rate(settings: Settings, count: int, exactly_once: bool, batch: int) -> float:
    run = fresh_settings(settings, "eoscon")
    source, output = f"bench-in-{uuid.uuid4().hex[:6]}", f"bench-out-{uuid.uuid4().hex[:6]}"
    TopicAdmin(run).create_many({source: PARTITIONS, output: PARTITIONS})
    with Producer("bench-eos", settings=run) as producer:
        for i in range(count):
            producer.send_async(Message(source, body=b"x" * 100, keys=f"k{i % 1000}"), _ignore)
            if i % 1000 == 0:
                producer.poll(0)
        producer.flush(60)
    with _Pipeline(run, source, output, exactly_once, batch):
        return output_rate(run, output, PARTITIONS, count, timeout=120 + count / 500)


def _consumer_latency(settings: Settings, rate: int, seconds: float, exactly_once: bool,
                      batch: int) -> tuple[float, float]:
    run = fresh_settings(settings, "eoscl")
    source, output = f"bench-in-{uuid.uuid4().hex[:6]}", f"bench-out-{uuid.uuid4().hex[:6]}"
    TopicAdmin(run).create_many({source: PARTITIONS, output: PARTITIONS})
    with _Pipeline(run, source, output, exactly_once, batch) as pipeline, \
            Producer("bench-eos", settings=run) as producer:
        pipeline.wait_assigned()
        reader = _Arrivals(run, output)
        try:
            sent = _paced(rate, seconds, lambda: _timed_send(producer, source))
            reader.wait(len(sent), 60)
        finally:
            reader.close()
    latencies = sorted(received - born for born, received in reader.latencies)
    return percentile(latencies, 0.5), percentile(latencies, 0.99)


def _timed_send(producer: Producer, topic: str) -> tuple[str, int]:
    born = now_ms()
    msg = Message(topic, body=str(born).encode(), keys=f"k{born % 1000}")
    producer.send_async(msg, _ignore)
    return msg.id, born


class _Pipeline:
    """An orderly push consumer sending every message on to ``output``, at least or exactly once."""

    def __init__(self, settings: Settings, source: str, output: str, exactly_once: bool, batch: int) -> None:
        from rocketkafka.ordering.consumers.push_consumer import PushConsumer

        self._plain = None if exactly_once else Producer("bench-eos-out", settings=settings)
        self.consumer = PushConsumer(f"bench-eos-{uuid.uuid4().hex[:6]}", settings=settings, orderly=True,
                                     exactly_once=exactly_once, consume_batch_size=batch,
                                     consume_from_where="CONSUME_FROM_FIRST_OFFSET", **BENCH_CONSUMER_OPTIONS)
        send = self.consumer.producer.send if exactly_once else (lambda out: self._plain.send_async(out, _ignore))

        def listener(msg: Any) -> None:  # None: success (send's message id is no consume status)
            send(Message(output, body=msg.body, keys=msg.keys))

        self.consumer.subscribe(source, listener)

    def __enter__(self) -> _Pipeline:
        if self._plain is not None:
            self._plain.start()
        self.consumer.start()
        return self

    def wait_assigned(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.consumer.assignment()) < PARTITIONS and time.monotonic() < deadline:
            time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self.consumer.shutdown()
        if self._plain is not None:
            self._plain.shutdown()


class _Arrivals:
    """``(send time, receive time)`` of every output record (its body is the send time, ms)."""

    def __init__(self, settings: Settings, topic: str) -> None:
        import threading

        self.latencies: list[tuple[int, int]] = []
        self._consumer = Consumer(settings.kafka_config(**{"group.id": f"bench-{uuid.uuid4().hex}",
                                                           "enable.auto.commit": False, "fetch.wait.max.ms": 5}))
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            records = self._consumer.consume(1000, 0.05)
            received = now_ms()
            self.latencies += [(int(r.value()), received) for r in records if r.error() is None]

    def wait(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.latencies) < count and time.monotonic() < deadline:
            time.sleep(0.1)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._consumer.close()


# -- helpers ----------------------------------------------------------------------------------------
def _paced(rate: int, seconds: float, send: Callable[[], tuple[str, int]]) -> dict[str, int]:
    """``send()`` ``rate`` times a second for ``seconds``; its ``(id, time)`` answers."""
    sent: dict[str, int] = {}
    start = time.monotonic()
    while (elapsed := time.monotonic() - start) < seconds:
        while len(sent) < int(elapsed * rate):
            msg_id, at = send()
            sent[msg_id] = at
        time.sleep(0.002)
    return sent


def _ignore(*_: Any) -> None:
    pass
