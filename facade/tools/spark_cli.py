"""``rocketkafka spark ...``: the audit jobs and the Spark benchmark.

Commands: ``audit-order``, ``audit-delay``, ``audit-txn``, ``bench``, ``connector``. Each audit
runs Spark where you say (``--master local[2]`` by default, any master URL, or
``--remote sc://host:15002`` for Spark Connect), prints what it read (topics,
partitions, offset ranges, rows) and its figures, and writes ``--output`` (Parquet,
or CSV with ``--format csv``). An audit that would report on nothing exits 1 with
one line saying why (``--allow-empty`` to accept it). The broker comes from
``--bootstrap-servers``, ``ROCKETKAFKA_BOOTSTRAP_SERVERS`` or ``rocketkafka dev up``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from rocketkafka.config import Settings
from rocketkafka.errors import RocketKafkaError

T = TypeVar("T")


def _bootstrap(value: str | None) -> str:
    if value:
        return value
    try:
        return Settings.load().bootstrap_servers
    except RocketKafkaError as exc:
        raise click.UsageError(str(exc)) from None


def _kafka() -> dict[str, str]:
    """The Kafka client settings of ``ROCKETKAFKA_KAFKA`` (SASL, TLS, ...), for every reader of the audit."""
    try:
        return Settings().client_properties()
    except ValueError as exc:  # pydantic's ValidationError: one line, no values (they may be secrets)
        raise click.UsageError(f"bad ROCKETKAFKA_* settings: {exc}") from None


def _common(fn):
    options = [
        click.option("--bootstrap-servers", "-b", default=None, help="Kafka bootstrap servers (default: environment / dev up)"),
        click.option("--master", default=None, help="Spark master (default $ROCKETKAFKA_SPARK_MASTER or local[2])"),
        click.option("--remote", default=None,
                     help="Spark Connect URL, e.g. sc://host:15002 (default $ROCKETKAFKA_SPARK_REMOTE; needs "
                          "rocketkafka[spark-connect])"),
        click.option("--engine", type=click.Choice(["auto", "jvm", "python"]), default=None,
                     help="Kafka reader (default $ROCKETKAFKA_SPARK_ENGINE or auto)"),
        click.option("--output", "-o", default=None, help="write the table here (a Spark output directory)"),
        click.option("--format", "fmt", type=click.Choice(["parquet", "csv"]), default="parquet", show_default=True),
        click.option("--allow-empty", is_flag=True, help="print zeros instead of failing when there is nothing to audit"),
        click.option("--strict", is_flag=True, help="exit with status 1 when the audit finds a problem"),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _session(master: str | None, remote: str | None, name: str):
    from rocketkafka.spark.session import spark_session

    return _run(lambda: spark_session(master=master, remote=remote, app_name=f"rocketkafka-{name}"))


def _run(job: Callable[[], T]) -> T:
    """Run ``job``; a rocketkafka error, bare or inside a Spark exception, becomes one clear line (exit 1)."""
    try:
        return job()
    except RocketKafkaError as exc:
        raise click.ClickException(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - Spark wraps worker errors in its own exception types
        from rocketkafka.spark.errors import spark_error_line

        line = spark_error_line(exc)
        if line is None:
            raise
        raise click.ClickException(line) from None


def _echo_result(result: Any) -> None:
    from rocketkafka.tools.spark_report import render_audit

    click.echo(render_audit(result))


def _fail_strict(reason: str) -> None:
    click.echo(f"strict: {reason}", err=True)
    raise SystemExit(1)


@click.group("spark")
def spark_cli() -> None:
    """Spark jobs over rocketkafka topics (audits, benchmark)."""


@spark_cli.command("audit-order")
@click.argument("topics", nargs=-1, required=True)
@click.option("--sequence", default="born", show_default=True,
              help="per-key sequence: born | value | header:<name> | json:<field>")
@click.option("--key", "key", default="sharding", show_default=True,
              help="order key: sharding | key | keys | partition | header:<name> | json:<field>")
@_common
def audit_order_command(topics: tuple[str, ...], sequence: str, key: str, bootstrap_servers: str | None,
                        master: str | None, remote: str | None, engine: str | None, output: str | None, fmt: str,
                        allow_empty: bool, strict: bool) -> None:
    """Ordering per key of TOPICS: real violations apart from delayed/retried re-ordering (by design).

    --strict fails on violations only: delayed and retried messages arrive late by design.
    """
    from rocketkafka.spark.audit import audit_order

    spark = _session(master, remote, "audit-order")
    result = _run(lambda: audit_order(spark, _bootstrap(bootstrap_servers), list(topics), sequence=sequence, key=key,
                                      output=output, fmt=fmt, engine=engine, allow_empty=allow_empty, kafka=_kafka()))
    _echo_result(result)
    if strict and result.summary["violations"]:
        _fail_strict(f"{result.summary['violations']} ordering violations in {result.summary['keys_with_violations']} keys")


@spark_cli.command("audit-delay")
@click.argument("topics", nargs=-1, required=True)
@click.option("--chart", default=None, help="PNG of the lateness histogram (default: lateness.png beside --output)")
@click.option("--topic-prefix", default=None, help="prefix of the delay topics (default: settings, 'rk')")
@click.option("--direct", is_flag=True, help="use only delay headers on the real records (no join with delay topics)")
@_common
def audit_delay_command(topics: tuple[str, ...], chart: str | None, topic_prefix: str | None, direct: bool,
                        bootstrap_servers: str | None, master: str | None, remote: str | None, engine: str | None,
                        output: str | None, fmt: str, allow_empty: bool, strict: bool) -> None:
    """Lateness (store time - deliver-at) of delayed messages on the real TOPICS, per delay level."""
    from rocketkafka.spark.audit import LATENESS_BUCKET_NAMES, audit_delay

    if chart is None and output:
        chart = os.path.join(os.path.dirname(os.path.abspath(output)) or ".", "lateness.png")
    prefix = None if direct else topic_prefix or Settings().topic_prefix
    spark = _session(master, remote, "audit-delay")
    result = _run(lambda: audit_delay(spark, _bootstrap(bootstrap_servers), list(topics), topic_prefix=prefix,
                                      output=output, fmt=fmt, engine=engine, allow_empty=allow_empty, kafka=_kafka()))
    if chart is not None:
        from rocketkafka.tools.charts import lateness_chart

        result.chart = lateness_chart(result.extra["histogram"], LATENESS_BUCKET_NAMES, Path(chart))
    _echo_result(result)
    if strict and result.summary["early"]:
        _fail_strict(f"{result.summary['early']} messages delivered before they were due")


@spark_cli.command("audit-txn")
@click.option("--topic-prefix", default=None, help="prefix of the internal topics (default: settings, 'rk')")
@click.option("--real-topic", "real_topics", multiple=True, help="real topics (default: REAL_TOPIC of the halves)")
@_common
def audit_txn_command(topic_prefix: str | None, real_topics: tuple[str, ...], bootstrap_servers: str | None,
                      master: str | None, remote: str | None, engine: str | None, output: str | None, fmt: str,
                      allow_empty: bool, strict: bool) -> None:
    """Transaction outcomes (committed, rolled back, unresolved, max-checked) from half, op, real, max-check topics."""
    from rocketkafka.spark.audit import audit_txn

    prefix = topic_prefix or Settings().topic_prefix
    spark = _session(master, remote, "audit-txn")
    result = _run(lambda: audit_txn(spark, _bootstrap(bootstrap_servers), topic_prefix=prefix,
                                    real_topics=list(real_topics) or None, output=output, fmt=fmt, engine=engine,
                                    allow_empty=allow_empty, kafka=_kafka()))
    _echo_result(result)
    s = result.summary
    problems = {k: s[k] for k in ("conflict", "missing_real", "duplicate_real", "rollback_leaked") if s[k]}
    if strict and problems:
        _fail_strict(", ".join(f"{k} {v}" for k, v in problems.items()))


@spark_cli.command("connector")
@click.option("--version", "version", default=None, help="PySpark version (default: the installed one)")
def connector_command(version: str | None) -> None:
    """Fetch Spark's Kafka source (spark-sql-kafka-0-10) into the per-user cache with mvn; print its jars.

    Sessions fetch it on first use anyway; run this ahead (CI, images) to pay the fetch once.
    """
    from rocketkafka.spark.connector import connector_jars

    for jar in _run(lambda: connector_jars(version)):
        click.echo(str(jar))


@contextlib.contextmanager
def _broker(bootstrap_servers: str | None) -> Iterator[str]:
    if bootstrap_servers:
        yield bootstrap_servers
        return
    from rocketkafka.testing.devstack import given_or_embedded

    with given_or_embedded(redis_nodes=1, say=click.echo) as (settings, _stack):
        yield settings.bootstrap_servers


@spark_cli.command("bench")
@click.option("--count", "-n", default=1_000_000, show_default=True, help="messages in the topic")
@click.option("--size", default=100, show_default=True, help="body bytes")
@click.option("--partitions", default=8, show_default=True)
@click.option("--runs", default=2, show_default=True, help="warm Spark runs after the cold one")
@click.option("--master", default="local[2]", show_default=True)
@click.option("--engine", "engines", type=click.Choice(["auto", "jvm", "python"]), multiple=True,
              default=("jvm", "python"), show_default=True, help="reader engine; repeat for several (one bench each)")
@click.option("--bootstrap-servers", "-b", default=None,
              help="broker (default: $ROCKETKAFKA_BOOTSTRAP_SERVERS, else an embedded one for the run)")
def bench_command(count: int, size: int, partitions: int, runs: int, master: str, engines: tuple[str, ...],
                  bootstrap_servers: str | None) -> None:
    """Spark batch read rows/s beside raw confluent-kafka (target >= 0.5x), and audit times cold and warm, per engine."""
    from rocketkafka.tools.bench.spark import bench_spark, print_bench

    with _broker(bootstrap_servers) as servers:
        for engine in engines:
            figures = _run(lambda: bench_spark(servers, n=count, size=size, partitions=partitions, master=master,
                                               runs=runs, engine=engine))
            print_bench(figures)
