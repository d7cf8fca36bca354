"""``bench memory``: is a consumer's memory bounded when the backlog is not? RSS over time under a slow handler.

Fills a topic with a large backlog (1,000,000 records by default), then runs one
:class:`~rocketkafka.ordering.consumers.push_consumer.PushConsumer` in a child process whose handler
is slow, so the backlog in Kafka never drains during the run. Every queue between fetch
and handler is capped (librdkafka's prefetch by ``queued.max.messages.kbytes``; the
claims by ``pull_threshold_per_partition`` / ``pull_threshold_total``, which count every
record taken and not finished, whether it waits in a batch, in the worker pool's queue
or in a handler), so the child's resident memory must stay flat: the figures are the
RSS after warm-up, its growth over the run, and the most records the consumer held.

The child is measured from outside (``/proc/<pid>/status``), so the producer's buffers
of the fill are not in the figure.

>>> rows = run(settings, records=1_000_000, seconds=60)   # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer as RawProducer

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.tools.bench.rows import BenchRow, Target

#: RSS may grow at most this much from the first third of the run to the last (MiB): "flat".
GROWTH_LIMIT_MIB = 32.0
#: Seconds the child consumer may take to handle its first record (start, locks, committed offsets) before
#: the measured run begins: a loaded machine took more than the whole 10 s run of the test once.
START_TIMEOUT_S = 90.0


def run(settings: Settings, records: int = 1_000_000, record_bytes: int = 100, partitions: int = 8,
        handler_ms: float = 5.0, seconds: float = 60.0, sample_s: float = 2.0, orderly: bool = False,
        options: dict[str, Any] | None = None, say: Callable[[str], Any] = print) -> list[BenchRow]:
    """Fill ``records`` records, consume them for ``seconds`` with a ``handler_ms`` handler; RSS rows.

    Parameters:
        settings: the cluster (broker and Redis nodes).
        records, record_bytes, partitions: the backlog.
        handler_ms: the handler's sleep per message (slow: the backlog outlives the run).
        seconds: how long the consumer runs, from its first handled record; ``sample_s``: RSS sampling period.
        orderly: an orderly consumer instead of a concurrent one.
        options: extra ``ConsumerOptions`` fields (e.g. smaller ``pull_threshold_total``).
        say: where the RSS-over-time lines go.

    Returns:
        rows of bench ``memory``: RSS after warm-up (MiB), growth over the run (target
        < :data:`GROWTH_LIMIT_MIB`), the peak, records handled, and the most records held.
    """
    if records < 1 or seconds <= 0 or sample_s <= 0:
        raise ValueError("bench memory needs records >= 1, seconds > 0 and sample_s > 0")
    topic = f"bench-memory-{uuid.uuid4().hex[:8]}"
    TopicAdmin(settings).create(topic, partitions=partitions)
    started = time.monotonic()
    _fill(settings, topic, records, record_bytes)
    say(f"memory: {records:,} x {record_bytes} B in {topic} ({partitions} partitions) in "
        f"{time.monotonic() - started:.1f} s; consuming with a {handler_ms:g} ms handler for {seconds:g} s")
    samples = _consume(settings, topic, handler_ms, seconds, sample_s, orderly, options or {}, say)
    return _rows(samples, handler_ms, orderly)


def _fill(settings: Settings, topic: str, records: int, record_bytes: int) -> None:
    producer = RawProducer(settings.kafka_config(**{"linger.ms": 20, "batch.size": 1_000_000}))
    body = b"m" * record_bytes
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, body)
                break
            except BufferError:  # librdkafka's queue is full: let it drain
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError(f"bench memory: the backlog of {topic} was not fully written")


def _consume(settings: Settings, topic: str, handler_ms: float, seconds: float, sample_s: float, orderly: bool,
             options: dict[str, Any], say: Callable[[str], Any]) -> list[dict[str, float]]:
    """Run the child consumer; one sample per ``sample_s``: elapsed s, RSS MiB, handled, held."""
    status = Path(f"/tmp/rk-bench-memory-{uuid.uuid4().hex[:8]}.json")
    # the spec on the command line holds no secret; the settings (passwords too) go through the environment
    spec = {"topic": topic, "handler_ms": handler_ms, "orderly": orderly, "options": options, "status": str(status)}
    child = subprocess.Popen([sys.executable, "-m", "rocketkafka.tools.bench.memory", json.dumps(spec)],
                             stdin=subprocess.DEVNULL, env=settings.child_environment())
    samples: list[dict[str, float]] = []
    try:
        _await_first_record(child, status, say)
        begun = time.monotonic()
        while time.monotonic() - begun < seconds:
            time.sleep(sample_s)
            _check_running(child)
            state = _read_status(status)
            sample = {"t": round(time.monotonic() - begun, 1), "rss_mib": _rss_mib(child.pid), **state}
            samples.append(sample)
            say(f"  {sample['t']:6.1f} s  RSS {sample['rss_mib']:7.1f} MiB  handled {int(sample['handled']):>9,}  "
                f"held {int(sample['held']):>7,}")
    finally:
        child.terminate()
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            child.kill()
        status.unlink(missing_ok=True)
    return samples


def _rows(samples: list[dict[str, float]], handler_ms: float, orderly: bool) -> list[BenchRow]:
    warm = samples[1:] or samples  # sampling starts at the first handled record; the first sample is warm-up too
    third = max(1, len(warm) // 3)
    first, last = warm[:third], warm[-third:]
    base = statistics.median(s["rss_mib"] for s in first)
    growth = statistics.median(s["rss_mib"] for s in last) - base
    mode = "orderly" if orderly else "concurrent"
    detail = f"{mode} PushConsumer, {handler_ms:g} ms handler, {len(samples)} samples"
    return [
        BenchRow("memory", "consumer RSS after warm-up (1,000,000-record backlog, slow handler)", round(base, 1),
                 "MiB", detail=detail),
        BenchRow("memory", "RSS growth over the run (median of the last third - of the first)", round(growth, 1),
                 "MiB", target=Target("<", GROWTH_LIMIT_MIB, note="flat: every queue is capped"), detail=detail),
        BenchRow("memory", "peak RSS", round(max(s["rss_mib"] for s in samples), 1), "MiB"),
        BenchRow("memory", "records handled during the run", int(samples[-1]["handled"]), "msg"),
        BenchRow("memory", "most records held by the consumer (taken, not finished)",
                 int(max(s["held"] for s in samples)), "msg"),
    ]


def _rss_mib(pid: int) -> float:
    """Resident set size of ``pid`` in MiB (Linux ``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _await_first_record(child: subprocess.Popen, status: Path, say: Callable[[str], Any]) -> None:
    """Wait until the child handled a record: the run measures a consuming consumer, not its start."""
    started = time.monotonic()
    while _read_status(status)["handled"] == 0:
        _check_running(child)
        if time.monotonic() - started > START_TIMEOUT_S:
            raise RuntimeError(f"bench memory: the consumer handled nothing within {START_TIMEOUT_S:g} s of its start")
        time.sleep(0.1)
    say(f"  consuming {time.monotonic() - started:.1f} s after the consumer started; the run begins")


def _check_running(child: subprocess.Popen) -> None:
    if child.poll() is not None:
        raise RuntimeError(f"bench memory: the consumer exited with code {child.returncode}")


def _read_status(path: Path) -> dict[str, float]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {"handled": 0, "held": 0}


def _child(spec: dict[str, Any]) -> None:
    """The measured consumer: a slow handler; writes handled and held counts to ``status`` every 0.5 s."""
    import signal
    import threading

    from rocketkafka.ordering.consumers.push_consumer import PushConsumer

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    handled = [0]
    pause = spec["handler_ms"] / 1000

    def handle(_msg: Any) -> None:
        time.sleep(pause)
        handled[0] += 1  # benign race between workers: a progress figure

    consumer = PushConsumer(f"bench-memory-{os.getpid()}", settings=Settings.load(),
                            orderly=spec["orderly"], consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                            **{"metrics": True, **spec["options"]})
    consumer.subscribe(spec["topic"], handle)
    consumer.start()
    status = Path(spec["status"])
    while not stop.wait(0.5):
        assert consumer.metrics is not None
        held = consumer.metrics.inflight()  # the poll thread's snapshot: the claims are its alone
        tmp = status.with_suffix(".tmp")
        tmp.write_text(json.dumps({"handled": handled[0], "held": held}))
        tmp.replace(status)
    consumer.shutdown(timeout=10)


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
