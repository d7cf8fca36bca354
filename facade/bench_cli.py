"""``rocketkafka bench ...``: every benchmark prints its figures beside raw confluent-kafka where the issue asks.

Runs against ``ROCKETKAFKA_BOOTSTRAP_SERVERS``/``ROCKETKAFKA_REDIS_URLS`` when set,
else against a private embedded stack started for the run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import click

from facade.config import Settings


@contextlib.contextmanager
def bench_settings() -> Iterator[Settings]:
    """Settings of the given cluster, or of an embedded stack that lives for the benchmark."""
    if os.environ.get("ROCKETKAFKA_BOOTSTRAP_SERVERS"):
        yield Settings.load()
        return
    from facade.devstack import DevStack

    with DevStack(redis_nodes=3) as stack:
        click.echo(f"embedded stack: broker {stack.bootstrap_servers}, {len(stack.redis_urls)} Redis nodes")
        yield Settings(bootstrap_servers=stack.bootstrap_servers, redis_urls=stack.redis_urls)


@click.group()
def bench() -> None:
    """Benchmarks (figures, never pass/fail)."""


@bench.command()
@click.option("--count", default=200_000, show_default=True, help="messages per client")
@click.option("--size", default=100, show_default=True, help="body bytes")
def produce(count: int, size: int) -> None:
    """Producer throughput: raw confluent-kafka vs drop-in vs RocketMQ-style."""
    from facade.bench import bench_produce, print_table

    with bench_settings() as settings:
        print_table(f"produce {count:,} x {size} B", bench_produce(settings, count, size))


@bench.command()
@click.option("--count", default=200_000, show_default=True, help="messages in the topic")
@click.option("--size", default=100, show_default=True, help="body bytes")
def consume(count: int, size: int) -> None:
    """Consumer throughput: raw consume() loop vs PushConsumer with a no-op listener."""
    from facade.bench import bench_consume, print_table

    with bench_settings() as settings:
        print_table(f"consume {count:,} x {size} B", bench_consume(settings, count, size))
