"""One benchmark contender per process: ``python -m rocketkafka.tools.bench.contenders '<json spec>'``.

The spec names a ``kind`` (``consume`` or ``latency``) and a ``mode`` (which client, how);
the process reads settings from the environment, runs, and prints one JSON line with
its figures. :mod:`~rocketkafka.tools.bench.rounds` runs them round by round.

- ``consume``: read ``count`` records of a filled topic from its start; the rate is
  steady-state (first record handled to last), start-up is reported apart (``first_s``).
- ``latency``: once the client owns every partition, a paced producer process sends
  ``rate`` msg/s for ``seconds``, each record carrying its send time; the figures are
  percentiles of handler time minus send time (one clock: same machine). A PushConsumer
  runs beside a raw-tuned reader process of the same records: on Tansu a stream's hop
  drifts from second to second, so its fair baseline is the same records at the same time
  (``beside_*`` figures, and percentiles of the per-record difference ``added_*``: under
  load its p99 holds the two readers' separate tails, so read it with its p1).
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, Producer, TopicPartition

from rocketkafka.config import Settings
from rocketkafka.ordering.engine.options import KAFKA_CONSUMER_DEFAULTS
from rocketkafka.tools.bench.rounds import percentile

#: Consume modes: a raw loop, the same loop calling a Python function per record (the floor of any
#: per-message Python API), the PushConsumer's modes, and the drop-in Kafka consumer.
CONSUME_MODES = ("raw", "raw+call", "raw-poll", "raw-engine", "raw+call-engine", "push-concurrent", "push-orderly",
                 "push-keyed", "push-batch", "push-async-concurrent", "push-async-orderly", "dropin-poll",
                 "dropin-consume")
#: Latency modes: raw with librdkafka's defaults, raw tuned for latency, PushConsumer with *its* defaults.
LATENCY_MODES = ("raw-default", "raw-tuned", "push-concurrent", "push-orderly")


def engine_fetch(settings: Settings) -> dict[str, Any]:
    """The fetch settings of the PushConsumer's engine on the broker of ``settings``, as the ``-engine`` raw loops
    run them."""
    fetch = {k: v for k, v in KAFKA_CONSUMER_DEFAULTS.items() if k.startswith("fetch.")}
    return {**fetch, "fetch.wait.max.ms": settings.engine_fetch_wait_ms}


def engine_read(settings: Settings) -> dict[str, Any]:
    """What the ``-engine`` raw loops set: the engine's fetch settings, and no offset stored per record (the engine
    stores the offsets it settles itself)."""
    return {**engine_fetch(settings), "enable.auto.offset.store": False}


def fetch_text(settings: Settings) -> str:
    """The engine's fetch settings as rows name them (``fetch.queue.backoff.ms=10, fetch.wait.max.ms=100``)."""
    return ", ".join(f"{k}={v}" for k, v in engine_fetch(settings).items())

#: What "raw tuned for latency" sets: the broker answers a fetch after at most 5 ms without data.
RAW_TUNED = {"fetch.wait.max.ms": 5}
SEND_TIME = "bench.sent"  # header: epoch seconds as text


def main(argv: list[str]) -> None:
    spec = json.loads(argv[0])
    settings = Settings.load()
    runner = {"consume": consume, "latency": latency}[spec.pop("kind")]
    print(json.dumps(runner(settings, **spec)), flush=True)


# -- throughput --------------------------------------------------------------------------------
class _Meter:
    """Counts handled records; the first and the ``count``-th set the steady-state window."""

    def __init__(self, count: int) -> None:
        self.count, self.seen = count, 0
        self.first = self.last = 0.0
        self.done = threading.Event()
        self._lock = threading.Lock()  # listeners of a concurrent consumer tick from several threads

    def tick(self, n: int = 1) -> None:
        """Count ``n`` records (once per batch: the lock costs about what a no-op call does)."""
        if not n:
            return
        with self._lock:
            if self.seen == 0:
                self.first = time.perf_counter()
            self.seen += n
            if self.seen >= self.count and not self.done.is_set():
                self.last = time.perf_counter()
                self.done.set()

    def per_record(self) -> Callable[[Any], None]:
        """A listener that counts one record per call, without a lock.

        ``next()`` of an ``itertools.count`` is one C call, atomic under the GIL, so listeners
        on several threads count exactly; a lock per record instead cost 13% of a concurrent
        PushConsumer's profile, a cost the raw loops (one tick per batch) never paid.
        """
        counter, last_index, done = itertools.count(), self.count - 1, self.done

        def listener(_record: Any) -> None:
            n = next(counter)
            if n == 0:
                self.first = time.perf_counter()
            if n == last_index:
                self.last = time.perf_counter()
                self.seen = self.count
                done.set()
        return listener


def consume(settings: Settings, mode: str, topic: str, partitions: int, count: int,
            timeout: float = 300.0) -> dict[str, Any]:
    """Read ``count`` records of ``topic`` from its start in ``mode``; steady rate, start-up, CPU."""
    meter = _Meter(count)
    started, cpu0 = time.perf_counter(), time.process_time()
    if mode in ("raw", "raw+call", "raw-poll", "raw-engine", "raw+call-engine"):
        _raw_loop(settings, topic, partitions, meter, mode, timeout=timeout)
    elif mode.startswith("push-"):
        _push(settings, topic, mode[5:], meter, timeout)
    elif mode.startswith("dropin-"):
        _drop_in(settings, topic, mode[7:], meter, timeout)
    else:
        raise ValueError(f"unknown consume mode {mode!r}; choose from {', '.join(CONSUME_MODES)}")
    if not meter.done.is_set():
        raise TimeoutError(f"{mode}: {count} records not consumed within {timeout} s")
    window = meter.last - meter.first
    return {"mode": mode, "rate": (count - 1) / window if window > 0 else float("inf"),
            "first_s": meter.first - started, "cpu_s": time.process_time() - cpu0, "wall_s": meter.last - started}


def _noop(_record: Any) -> None:
    pass


def _raw_loop(settings: Settings, topic: str, partitions: int, meter: _Meter, mode: str, timeout: float) -> None:
    """``raw``, ``raw+call``, ``raw-poll``; ``-engine``: with the fetch settings the PushConsumer's engine uses."""
    fetch = engine_read(settings) if mode.endswith("-engine") else {}
    mode = mode.removesuffix("-engine")
    c = Consumer(settings.kafka_config(**{"group.id": f"bench-raw-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                                          **fetch}))
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    deadline, noop = time.monotonic() + timeout, _noop
    while not meter.done.is_set() and time.monotonic() < deadline:
        if mode == "raw-poll":
            meter.tick(c.poll(1.0) is not None)
            continue
        records = c.consume(1000, 1.0)
        if mode == "raw+call":
            for record in records:
                noop(record)
        meter.tick(len(records))
    c.close()


def _push(settings: Settings, topic: str, mode: str, meter: _Meter, timeout: float) -> None:
    from rocketkafka.ordering.consumers.push_consumer import PushConsumer

    options: dict[str, Any] = {"consume_from_where": "CONSUME_FROM_FIRST_OFFSET"}
    if mode in ("orderly", "keyed", "async-orderly"):
        options["orderly"] = True
    if mode == "keyed":
        options["order_key"] = "key"
    c = PushConsumer(f"bench-{mode}-{uuid.uuid4().hex[:8]}", settings=settings, **options)
    if mode == "batch":
        tick = meter.tick
        c.subscribe_batch(topic, lambda messages: tick(len(messages)))
    elif mode.startswith("async-"):
        count = meter.per_record()

        async def listener(record: Any) -> None:  # a no-op coroutine on the consumer's own loop
            count(record)
        c.subscribe(topic, listener)
    else:
        c.subscribe(topic, meter.per_record())
    c.start()
    meter.done.wait(timeout)
    c.shutdown()


def _drop_in(settings: Settings, topic: str, how: str, meter: _Meter, timeout: float) -> None:
    from rocketkafka.kafka import Consumer as DropIn

    c = DropIn(settings.kafka_config(**{"group.id": f"bench-dropin-{uuid.uuid4().hex[:8]}",
                                        "auto.offset.reset": "earliest"}))  # Redis: from the environment
    c.subscribe([topic])
    deadline = time.monotonic() + timeout
    while not meter.done.is_set() and time.monotonic() < deadline:
        if how == "poll":  # counted as the raw loops count: every record returned
            meter.tick(c.poll(1.0) is not None)
        else:
            meter.tick(len(c.consume(1000, 1.0)))
    c.close()


# -- latency -----------------------------------------------------------------------------------
def latency(settings: Settings, mode: str, topic: str, partitions: int, rate: int, seconds: float) -> dict[str, Any]:
    """Owning every partition first, receive ``rate`` msg/s for ``seconds``; produce->handler percentiles."""
    expected = int(rate * seconds)
    lags: dict[bytes, float] = {}  # send time (the header's text) -> lag
    done = threading.Event()

    def seen(record: Any) -> None:
        _note_lag(lags, record)
        if len(lags) >= expected:
            done.set()

    spawn = multiprocessing.get_context("spawn")
    beside = _RawBeside(spawn, settings, topic, partitions) if mode.startswith("push-") else None
    stop, ready = _latency_client(settings, mode, topic, partitions, seen)
    ready()
    if beside is not None:
        beside.wait_ready()
    time.sleep(0.5)  # the first fetches are out: measure the steady state, not the start
    sender = spawn.Process(target=_paced_send, args=(settings.kafka_config(), topic, rate, seconds), daemon=True)
    sender.start()
    done.wait(seconds + 30)
    sender.join(10)
    stop()
    if len(lags) < expected:
        raise TimeoutError(f"{mode}: {len(lags)} of {expected} records arrived")
    result = {"mode": mode, **_percentiles("", list(lags.values())), "records": len(lags)}
    if beside is not None:
        raw = beside.stop()
        both = [k for k in lags if k in raw]
        result.update(_percentiles("beside_", [raw[k] for k in both]),
                      **_percentiles("added_", [lags[k] - raw[k] for k in both]), beside_records=len(both))
    return result


def _percentiles(prefix: str, seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {f"{prefix}p1_ms": percentile(ordered, 1) * 1000, f"{prefix}p50_ms": percentile(ordered, 50) * 1000,
            f"{prefix}p99_ms": percentile(ordered, 99) * 1000, f"{prefix}max_ms": ordered[-1] * 1000}


class _RawBeside:
    """A raw-tuned reader of the same topic in a process of its own, at the same time as the contender."""

    def __init__(self, spawn: Any, settings: Settings, topic: str, partitions: int) -> None:
        self._ready, self._stop, self._out = spawn.Event(), spawn.Event(), spawn.Queue()
        self._proc = spawn.Process(target=_raw_reader, daemon=True, args=(
            settings.kafka_config(), topic, partitions, self._ready, self._stop, self._out))
        self._proc.start()

    def wait_ready(self) -> None:
        if not self._ready.wait(60):
            raise TimeoutError("the raw reader beside the contender did not start within 60 s")

    def stop(self) -> dict[bytes, float]:
        """Stop it; the lag of each record it saw, by send time."""
        self._stop.set()
        lags: dict[bytes, float] = self._out.get(timeout=30)
        self._proc.join(10)
        return lags


def _raw_reader(config: dict[str, Any], topic: str, partitions: int, ready: Any, stop: Any, out: Any) -> None:
    c = _new_records_reader(config, topic, partitions, RAW_TUNED)
    lags: dict[bytes, float] = {}
    started = time.monotonic()

    def keep_going() -> bool:
        if not ready.is_set() and time.monotonic() - started >= 0.5:  # as the raw modes: positions are resolved
            ready.set()
        return not stop.is_set()

    _read_until(c, keep_going, lambda record: _note_lag(lags, record))
    out.put(lags)


def _new_records_reader(config: dict[str, Any], topic: str, partitions: int, extra: dict[str, Any]) -> Consumer:
    """A raw consumer of the records ``topic`` gets from now on (every partition from its end)."""
    c = Consumer({**config, "group.id": f"bench-lat-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False, **extra})
    c.assign([TopicPartition(topic, p, OFFSET_END) for p in range(partitions)])
    return c


def _read_until(c: Consumer, keep_going: Callable[[], bool], seen: Callable[[Any], None]) -> None:
    """Kafka's usual loop until ``keep_going()`` is False, then close ``c``.

    ``poll``, not ``consume(n, t)``: the latter waits for n records or t, adding up to t to a record's lag.
    """
    while keep_going():
        record = c.poll(0.1)
        if record is not None and record.error() is None:
            seen(record)
    c.close()


def _note_lag(lags: dict[bytes, float], record: Any) -> None:
    """``lags[send time] = now - send time`` for a record stamped by :func:`_paced_send`."""
    now = time.time()
    for name, value in record.headers() or ():
        if name == SEND_TIME:
            lags[value] = now - float(value)


def _latency_client(settings: Settings, mode: str, topic: str, partitions: int,
                    seen: Callable[[Any], None]) -> tuple[Callable[[], None], Callable[[], None]]:
    """Start the client of ``mode``; returns (stop, wait until it owns every partition)."""
    if mode.startswith("raw-"):
        c = _new_records_reader(settings.kafka_config(), topic, partitions, RAW_TUNED if mode == "raw-tuned" else {})
        running = threading.Event()
        running.set()
        thread = threading.Thread(target=_read_until, args=(c, running.is_set, seen), daemon=True)
        thread.start()

        def stop_raw() -> None:
            running.clear()
            thread.join(5)

        return stop_raw, lambda: time.sleep(0.5)
    if mode not in ("push-concurrent", "push-orderly"):
        raise ValueError(f"unknown latency mode {mode!r}; choose from {', '.join(LATENCY_MODES)}")
    from rocketkafka.ordering.consumers.push_consumer import PushConsumer

    pc = PushConsumer(f"bench-lat-{uuid.uuid4().hex[:8]}", settings=settings, orderly=mode == "push-orderly")
    pc.subscribe(topic, lambda msg: seen(msg.record))
    pc.start()

    def owns_all() -> None:
        deadline = time.monotonic() + 60
        while len(pc.assignment()) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{mode}: did not own {partitions} partitions within 60 s")
            time.sleep(0.05)

    return pc.shutdown, owns_all


def _paced_send(config: dict[str, Any], topic: str, rate: int, seconds: float) -> None:
    """Send ``rate`` msg/s for ``seconds`` in 1 ms steps, each record stamped with its send time."""
    p = Producer(config)
    body, total = b"x" * 100, int(rate * seconds)
    start = time.perf_counter()
    for i in range(total):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        p.produce(topic, body, headers=[(SEND_TIME, repr(time.time()).encode())])
        p.poll(0)
    p.flush(30)


if __name__ == "__main__":
    main(sys.argv[1:])
