"""``rocketkafka spark ...``: the audit jobs and the Spark benchmark.

Commands: ``audit-order``, ``audit-delay``, ``audit-txn``, ``bench``. Each audit
runs a local Spark (``--master`` for any other), prints a table and writes
``--output`` (Parquet, or CSV with ``--format csv``). The broker comes from
``--bootstrap-servers``, ``ROCKETKAFKA_BOOTSTRAP_SERVERS`` or ``rocketkafka dev up``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import click

from facade.config import Settings
from facade.errors import RocketKafkaError


def _bootstrap(value: str | None) -> str:
    if value:
        return value
    try:
        return Settings.load().bootstrap_servers
    except RocketKafkaError as exc:
        raise click.UsageError(str(exc)) from None


def _common(fn):
    options = [
        click.option("--bootstrap-servers", "-b", default=None, help="Kafka bootstrap servers (default: environment / dev up)"),
        click.option("--master", default=None, help="Spark master (default $ROCKETKAFKA_SPARK_MASTER or local[2])"),
        click.option("--engine", type=click.Choice(["auto", "jvm", "python"]), default=None,
                     help="Kafka reader (default $ROCKETKAFKA_SPARK_ENGINE or auto)"),
        click.option("--output", "-o", default=None, help="write the table here (a Spark output directory)"),
        click.option("--format", "fmt", type=click.Choice(["parquet", "csv"]), default="parquet", show_default=True),
        click.option("--strict", is_flag=True, help="exit with status 1 when the audit finds a problem"),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _session(master: str | None, name: str):
    from spark.session import spark_session

    return spark_session(master=master, app_name=f"rocketkafka-{name}")


def _run(job):
    try:
        return job()
    except RocketKafkaError as exc:
        raise click.ClickException(str(exc)) from None


@click.group("spark")
def spark_cli() -> None:
    """Spark jobs over rocketkafka topics (audits, benchmark)."""


@spark_cli.command("audit-order")
@click.argument("topic")
@click.option("--sequence", default="born", show_default=True,
              help="per-key sequence: born | value | header:<name> | json:<field>")
@click.option("--key", "key", default="sharding", show_default=True,
              help="order key: sharding | key | keys | partition | header:<name> | json:<field>")
@_common
def audit_order_command(topic: str, sequence: str, key: str, bootstrap_servers: str | None, master: str | None,
                        engine: str | None, output: str | None, fmt: str, strict: bool) -> None:
    """Ordering violations per key of TOPIC (sequence not increasing in offset order)."""
    from spark.audit import audit_order

    spark = _session(master, "audit-order")
    result = _run(lambda: audit_order(spark, _bootstrap(bootstrap_servers), topic, sequence=sequence, key=key,
                                      output=output, fmt=fmt, engine=engine))
    if strict and result.summary["violations"]:
        raise SystemExit(1)


@spark_cli.command("audit-delay")
@click.argument("topics", nargs=-1, required=True)
@click.option("--chart", default=None, help="PNG of the lateness histogram (default: lateness.png beside --output)")
@click.option("--topic-prefix", default=None, help="prefix of the delay topics (default: settings, 'rk')")
@click.option("--direct", is_flag=True, help="use only delay headers on the real records (no join with delay topics)")
@_common
def audit_delay_command(topics: tuple[str, ...], chart: str | None, topic_prefix: str | None, direct: bool,
                        bootstrap_servers: str | None, master: str | None, engine: str | None, output: str | None,
                        fmt: str, strict: bool) -> None:
    """Lateness (store time - deliver-at) of delayed messages on the real TOPICS, per delay level."""
    from spark.audit import audit_delay

    if chart is None and output:
        chart = os.path.join(os.path.dirname(os.path.abspath(output)) or ".", "lateness.png")
    prefix = None if direct else topic_prefix or Settings().topic_prefix
    spark = _session(master, "audit-delay")
    result = _run(lambda: audit_delay(spark, _bootstrap(bootstrap_servers), list(topics), topic_prefix=prefix,
                                      output=output, fmt=fmt, chart=chart, engine=engine))
    if strict and result.summary["early"]:
        raise SystemExit(1)


@spark_cli.command("audit-txn")
@click.option("--topic-prefix", default=None, help="prefix of the internal topics (default: settings, 'rk')")
@click.option("--real-topic", "real_topics", multiple=True, help="real topics (default: REAL_TOPIC of the halves)")
@_common
def audit_txn_command(topic_prefix: str | None, real_topics: tuple[str, ...], bootstrap_servers: str | None,
                      master: str | None, engine: str | None, output: str | None, fmt: str, strict: bool) -> None:
    """Transaction outcomes (committed, rolled back, unresolved, max-checked) from half, op, real, max-check topics."""
    from spark.audit import audit_txn

    prefix = topic_prefix or Settings().topic_prefix
    spark = _session(master, "audit-txn")
    result = _run(lambda: audit_txn(spark, _bootstrap(bootstrap_servers), topic_prefix=prefix,
                                    real_topics=list(real_topics) or None, output=output, fmt=fmt, engine=engine))
    s = result.summary
    if strict and (s["conflict"] or s["missing_real"] or s["duplicate_real"] or s["rollback_leaked"]):
        raise SystemExit(1)


@contextlib.contextmanager
def _broker(bootstrap_servers: str | None) -> Iterator[str]:
    if bootstrap_servers:
        yield bootstrap_servers
        return
    from facade.devstack import given_or_embedded

    with given_or_embedded(redis_nodes=1, say=click.echo) as (settings, _stack):
        yield settings.bootstrap_servers


@spark_cli.command("bench")
@click.option("--count", "-n", default=1_000_000, show_default=True, help="messages in the topic")
@click.option("--size", default=100, show_default=True, help="body bytes")
@click.option("--partitions", default=8, show_default=True)
@click.option("--runs", default=2, show_default=True, help="warm Spark runs after the cold one")
@click.option("--master", default="local[2]", show_default=True)
@click.option("--engine", type=click.Choice(["auto", "jvm", "python"]), default="python", show_default=True)
@click.option("--bootstrap-servers", "-b", default=None,
              help="broker (default: $ROCKETKAFKA_BOOTSTRAP_SERVERS, else an embedded one for the run)")
def bench_command(count: int, size: int, partitions: int, runs: int, master: str, engine: str,
                  bootstrap_servers: str | None) -> None:
    """Spark batch read rows/s beside raw confluent-kafka (target >= 0.5x)."""
    from spark.bench import bench_spark

    with _broker(bootstrap_servers) as servers:
        _run(lambda: bench_spark(servers, n=count, size=size, partitions=partitions, master=master, runs=runs,
                                 engine=engine))
