"""``rocketkafka bench orderly``: ordered consumption figures beside their targets (issue 3).

- key-ordered vs partition-serial throughput: 4 partitions, 256 keys, a listener that
  sleeps 10 ms; target key mode >= 20x partition-serial;
- (orderly mode with a no-op listener vs raw is ``rocketkafka bench consume``: interleaved rounds);
- time until the remaining consumer owns a partition after a graceful leave (target < 1 s)
  and after the owner is SIGKILLed (target <= lease + 1 s);
- one batch renewal of 1000 locks on the Redis nodes: idle (target <= 5 ms, issue 34) and with new progress
  on every lock (target < 20 ms).

Rates are steady-state: messages between the first and the last handled, over that time;
CPU-bound ones are the best of two runs.
Consumers run with :data:`TIMINGS` (a 3 s lease), so the SIGKILL figure stays short.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
import uuid
from typing import Any

import click
from confluent_kafka import Producer as RawProducer

from rocketkafka.admin import TopicAdmin
from rocketkafka.tools.bench.rows import BenchRow, Target
from rocketkafka.config import Settings
from rocketkafka.names import Header
from rocketkafka.queue_selectors import hash_selector
import statistics

import redis
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

from rocketkafka.errors import LockError
from rocketkafka.logs import redact_url
from rocketkafka.names import RedisKeys
from rocketkafka.ordering.locks import LockTable
from rocketkafka.ordering.consumers.push_consumer import PushConsumer

__all__ = ["TIMINGS", "bench_orderly", "bench_renew"]

_log = logging.getLogger(__name__)

#: Consumer timings of the benchmark (ms): lease 3 s, renew 1 s, client expiry 2 s.
TIMINGS = dict(consume_from_where="CONSUME_FROM_FIRST_OFFSET", heartbeat_interval_ms=200, member_timeout_ms=2000, lock_lease_ms=3000, lock_renew_interval_ms=1000,
               lock_client_expiry_ms=2000, rebalance_interval_ms=2000, commit_interval_ms=500)


def bench_orderly(settings: Settings, keys: int = 256, partitions: int = 4, handler_ms: float = 10.0,
                  keyed_messages: int = 24_000, serial_messages: int = 1_200,
                  threads: int = 256, rounds: int = 2) -> list[BenchRow]:
    """Run every figure of the orderly benchmark; see the module docstring.

    The key-ordered rate is the best of ``rounds`` runs, which filters out other processes
    of a shared machine; the partition-serial rate is bound by the listener's sleep and is
    run once.
    """
    serial = _sleeping_rate(settings, partitions, keys, serial_messages, handler_ms, "partition", threads)
    keyed = max(_sleeping_rate(settings, partitions, keys, keyed_messages, handler_ms, "key", threads)
                for _ in range(rounds))
    graceful, killed = _takeover_times(settings, partitions)
    lease = TIMINGS["lock_lease_ms"] / 1000
    renew = bench_renew(settings.require_redis(), 1000) * 1000
    renew_busy = bench_renew(settings.require_redis(), 1000, progress=True) * 1000
    return [
        BenchRow("orderly", f"partition-serial orderly, {handler_ms:g} ms listener", serial, "msg/s",
                 detail=f"{partitions} partitions"),
        BenchRow("orderly", f"key-ordered ({keys} keys), {handler_ms:g} ms listener", keyed, "msg/s", serial, "serial",
                 Target(">=", 20, "ratio"), f"{threads} threads"),
        BenchRow("orderly", "takeover after a graceful leave", graceful, "s", target=Target("<", 1.0)),
        BenchRow("orderly", "takeover after SIGKILL of the owner", killed, "s",
                 target=Target("<=", lease + 1, note=f"lease {lease:g} s + 1 s")),
        BenchRow("orderly", "batch renew of 1000 locks", renew, "ms", target=Target("<=", 5.0),
                 detail=f"{len(settings.redis_urls)} Redis nodes, median"),
        BenchRow("orderly", "batch renew of 1000 locks, each with new progress", renew_busy, "ms",
                 target=Target("<", 20.0), detail=f"{len(settings.redis_urls)} Redis nodes, median"),
    ]


# -- throughput ------------------------------------------------------------------------------------
def _topic(settings: Settings, partitions: int) -> str:
    name = f"bench-orderly-{uuid.uuid4().hex[:8]}"
    TopicAdmin(settings).create(name, partitions=partitions)
    return name


def _fill(settings: Settings, topic: str, partitions: int, count: int, keys: int) -> None:
    """``count`` 100-byte messages; message ``i`` has key ``k{i % keys}`` and goes to that key's partition."""
    p = RawProducer(settings.kafka_config(**{"linger.ms": 5}))
    body = b"x" * 100
    for i in range(count):
        key = f"k{i % keys}".encode()
        partition = hash_selector(partitions, None, key)
        while True:
            try:
                p.produce(topic, body, key=key, partition=partition, headers=[(Header.MSG_ID, f"m{i}".encode())])
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush()


class _Meter:
    """Counts handled messages and the times of the first and the last."""

    def __init__(self, target: int) -> None:
        self.target, self.count, self.first, self.last = target, 0, 0.0, 0.0
        self.done = threading.Event()
        self._lock = threading.Lock()

    def tick(self) -> None:
        now = time.perf_counter()
        with self._lock:
            self.count += 1
            if self.count == 1:
                self.first = now
            self.last = now
            if self.count >= self.target:
                self.done.set()

    def rate(self) -> float:
        return (self.count - 1) / (self.last - self.first) if self.last > self.first else 0.0


def _consume_with(settings: Settings, topic: str, listener, meter: _Meter, timeout: float, **options: Any) -> float:
    consumer = PushConsumer(f"bench-{uuid.uuid4().hex[:6]}", settings=settings, orderly=True, **{**TIMINGS, **options})
    consumer.subscribe(topic, listener)
    consumer.start()
    try:
        if not meter.done.wait(timeout):
            raise click.ClickException(f"benchmark consumer handled only {meter.count} of {meter.target} in {timeout} s")
    finally:
        consumer.shutdown()
    return meter.rate()


def _sleeping_rate(settings: Settings, partitions: int, keys: int, count: int, handler_ms: float, order_key: str,
                   threads: int) -> float:
    topic = _topic(settings, partitions)
    _fill(settings, topic, partitions, count, keys)
    meter = _Meter(count)
    pause = handler_ms / 1000

    def listener(_msg: object) -> None:
        time.sleep(pause)
        meter.tick()

    return _consume_with(settings, topic, listener, meter, timeout=max(60.0, count * pause / partitions * 3),
                         order_key=order_key, consume_thread_max=threads)


# -- takeover ----------------------------------------------------------------------------------------
def _takeover_times(settings: Settings, partitions: int) -> tuple[float, float]:
    """Seconds until the survivor owns every partition: after a graceful leave, then after a SIGKILL."""
    topic = _topic(settings, partitions)
    group = f"bench-takeover-{uuid.uuid4().hex[:6]}"
    survivor = _idle_consumer(settings, group, topic)
    try:
        leaving = _idle_consumer(settings, group, topic)
        _wait(lambda: len(survivor.assignment()) == partitions // 2 and len(leaving.assignment()) == partitions // 2)
        started = time.perf_counter()
        threading.Thread(target=leaving.shutdown, daemon=True).start()
        _wait(lambda: len(survivor.assignment()) == partitions, 0.002)
        graceful = time.perf_counter() - started

        ctx = multiprocessing.get_context("spawn")
        ready = ctx.Event()
        victim = ctx.Process(target=_victim, args=(settings.model_dump(), group, topic, ready), daemon=True)
        victim.start()
        try:
            if not ready.wait(60):
                raise click.ClickException("the victim consumer did not start")
            _wait(lambda: len(survivor.assignment()) == partitions // 2 and _all_locked(settings, group, topic, partitions))
            time.sleep(0.5)  # a renewal in between: the lease runs from a random point, as in life
            started = time.perf_counter()
            os.kill(victim.pid, signal.SIGKILL)
            _wait(lambda: len(survivor.assignment()) == partitions, 0.002, timeout=30)
            killed = time.perf_counter() - started
        finally:
            if victim.is_alive():
                victim.kill()
            victim.join(10)
    finally:
        survivor.shutdown()
    return graceful, killed


def _idle_consumer(settings: Settings, group: str, topic: str) -> PushConsumer:
    consumer = PushConsumer(group, settings=settings, orderly=True, **TIMINGS)
    consumer.subscribe(topic, lambda _m: None)
    consumer.start()
    return consumer


def _victim(settings: dict, group: str, topic: str, ready) -> None:
    """The consumer process the benchmark kills."""
    _idle_consumer(Settings(**settings), group, topic)
    ready.set()
    while True:
        time.sleep(1)


def _all_locked(settings: Settings, group: str, topic: str, partitions: int) -> bool:
    with LockTable(settings.require_redis(), group, f"bench-observer-{uuid.uuid4().hex[:6]}", settings.keys) as table:
        return all(table.describe((topic, p)) is not None for p in range(partitions))


def _wait(predicate, interval: float = 0.02, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise click.ClickException("benchmark: the group did not settle in time")
        time.sleep(interval)


# -- lock renewal ------------------------------------------------------------------------------------
def bench_renew(redis_urls: list[str], n_locks: int = 1000, rounds: int = 5, progress: bool = False) -> float:
    """Seconds one ``renew_batch`` of ``n_locks`` locks takes on these nodes (median of ``rounds``).

    Locks ``n_locks`` partitions of a throw-away group under a unique key prefix, renews
    them ``rounds`` times, then unlocks them and deletes their fence counters. ``progress``:
    every lock has new delivered and acked offsets to write before each renewal, as on a
    consumer busy on all its partitions (an idle one renews one session key per node).

    Raises:
        LockError: the locks could not all be taken (nodes down or slow).
    """
    if n_locks < 1 or rounds < 1:
        raise ValueError("bench_renew needs n_locks >= 1 and rounds >= 1")
    keys = RedisKeys(f"rkbench-{uuid.uuid4().hex[:8]}")
    group, topic = "bench", "bench"
    partitions = [(topic, p) for p in range(n_locks)]
    with LockTable(redis_urls, group, f"bench@{os.getpid()}", keys) as table:
        try:
            won = table.lock_batch(partitions)
            if len(won) != n_locks:
                raise LockError(keys.lock(group, topic, 0), f"bench took only {len(won)} of {n_locks} locks")
            times = []
            for round_ in range(rounds):
                if progress:
                    for tp in partitions:
                        table.record_progress(tp, delivered=round_ + 2, acked=round_ + 1)
                started = time.perf_counter()
                lost = table.renew_batch()
                times.append(time.perf_counter() - started)
                if lost:
                    raise LockError(keys.lock(group, topic, 0), f"bench lost {len(lost)} locks while renewing")
        finally:
            table.unlock_batch(partitions)
            _delete_fences(redis_urls, [keys.fence(group, topic, p) for p in range(n_locks)])
    return statistics.median(times)


def _delete_fences(redis_urls: list[str], names: list[str]) -> None:
    for url in redis_urls:
        client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
        try:
            for i in range(0, len(names), 1000):
                client.delete(*names[i:i + 1000])
        except RedisError as exc:
            _log.debug("bench cleanup on %s failed: %s", redact_url(url), exc)
        finally:
            client.close()
