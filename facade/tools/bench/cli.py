"""``rocketkafka bench ...``: every benchmark prints its figures beside raw confluent-kafka where the issue asks.

Runs against ``ROCKETKAFKA_BOOTSTRAP_SERVERS``/``ROCKETKAFKA_REDIS_URLS`` (or ``ROCKETKAFKA_CONFIG_FILE``)
when set, else against a private embedded stack started for the run (``--broker``; ``--secure``: a secured
Apache Kafka stack, SASL/SCRAM over TLS with ACLs and Redis on TLS with ACL users). ``bench all`` runs them
all and writes ``bench.json``, ``bench.png`` and ``bench.md``; ``bench show`` renders
a ``bench.json`` again.

Every client a benchmark makes, raw confluent-kafka contenders included, takes the full settings
(security too, so ratios to raw stay fair on a secured cluster); child processes get them through
the environment, never their command line; what is printed and written passes a
:class:`~rocketkafka.tools.scrub.Scrubber` of the run's secrets.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from rocketkafka.tools.bench.run_all import BENCHES
from rocketkafka.tools.bench.report import print_rows
from rocketkafka.tools.bench.rows import BenchRow
from rocketkafka.config import Settings
from rocketkafka.testing.devstack import cluster_given, given_or_embedded
from rocketkafka.tools.scrub import Scrubber


#: Hides the secrets of the run's settings in everything printed (set by :func:`bench_settings`).
_scrub = Scrubber()


def _say(text: str = "") -> None:
    click.echo(_scrub(text))


@contextlib.contextmanager
def bench_settings() -> Iterator[Settings]:
    """Settings of the given cluster, or of an embedded stack (of ``--broker``, secured with ``--secure``) that
    lives for the benchmark."""
    global _scrub
    broker, nodes, secure = _chosen_broker()
    with given_or_embedded(say=click.echo, broker=broker, broker_nodes=nodes, secure=secure) as (settings, _stack):
        _scrub = Scrubber(settings)  # kept after the block: lines printed once the stack is gone hide them too
        yield settings


def _chosen_broker() -> tuple[str | None, int, bool]:
    """``--broker``/``--nodes`` of ``bench`` or of ``bench all`` (the nearer one wins), and whether ``--secure``
    was given to either.

    Raises:
        click.BadParameter: ``--secure`` with ``--broker tansu`` (the secured stack runs Apache Kafka).
    """
    ctx: click.Context | None = click.get_current_context(silent=True)
    broker, nodes, secure = None, 1, False
    while ctx is not None:
        secure = secure or bool(ctx.params.get("secure"))
        if broker is None and ctx.params.get("broker"):
            broker, nodes = ctx.params["broker"], ctx.params.get("nodes") or 1
        ctx = ctx.parent
    if secure and broker == "tansu":
        raise click.BadParameter("the secured stack runs Apache Kafka: use --broker kafka (or leave --broker out)",
                                 param_hint="--secure")
    return ("kafka" if secure and broker is None else broker), nodes, secure


_BROKER_HELP = ("run on a private embedded stack of this broker (tansu, or kafka: Apache Kafka), even when "
                "ROCKETKAFKA_BOOTSTRAP_SERVERS names a cluster [the given cluster, else tansu]")
_SECURE_HELP = ("run on a private secured embedded stack (implies --broker kafka): SASL/SCRAM over TLS with ACLs, "
                "Redis on TLS with ACL users (needs Debian's redis-server 7). A given secured cluster needs no flag: "
                "its settings come from ROCKETKAFKA_CONFIG_FILE or ROCKETKAFKA_KAFKA + ROCKETKAFKA_REDIS_URLS")


@click.group()
@click.option("--broker", type=click.Choice(["tansu", "kafka"]), default=None, help=_BROKER_HELP)
@click.option("--nodes", default=1, show_default=True, type=click.IntRange(1, 5), help="broker nodes (kafka only)")
@click.option("--secure", is_flag=True, help=_SECURE_HELP)
def bench(broker: str | None, nodes: int, secure: bool) -> None:
    """Benchmarks (figures, never pass/fail)."""


@bench.command()
@click.option("--count", default=200_000, show_default=True, help="messages per contender and round")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(1), help="interleaved rounds")
def produce(count: int, rounds: int) -> None:
    """Producer throughput: raw, raw + same work, drop-in and RocketMQ-style sends, interleaved rounds."""
    from rocketkafka.tools.bench.produce import run

    with bench_settings() as settings:
        print_rows(run(settings, count, rounds, _say), f"produce {count:,} x 100 B, {rounds} rounds", _say)


@bench.command("send-costs")
@click.option("--count", default=100_000, show_default=True, type=click.IntRange(1), help="calls per loop")
@click.option("--repeat", default=3, show_default=True, type=click.IntRange(1), help="loops per step (best counts)")
def send_costs(count: int, repeat: int) -> None:
    """Where a send's CPU time goes: each step alone, in µs per call, beside its raw floor (no broker used)."""
    from rocketkafka.tools.bench.send_costs import measure, table

    _say(table(measure(count, repeat)))


@bench.command()
@click.option("--records", default=1_000_000, show_default=True, help="backlog records (100 B each)")
@click.option("--seconds", default=60.0, show_default=True, help="how long the slow consumer runs")
@click.option("--handler-ms", default=5.0, show_default=True, help="the handler's sleep per message")
@click.option("--orderly", is_flag=True, help="an orderly consumer instead of a concurrent one")
def memory(records: int, seconds: float, handler_ms: float, orderly: bool) -> None:
    """RSS of a slow consumer behind a large backlog, sampled over the run (flow control bounds it)."""
    from rocketkafka.tools.bench.memory import run

    with bench_settings() as settings:
        rows = run(settings, records=records, seconds=seconds, handler_ms=handler_ms, orderly=orderly,
                   say=_say)
        print_rows(rows, f"memory behind {records:,} records", _say)


@bench.command()
@click.option("--count", default=500_000, show_default=True, help="records in the topic (read whole by every contender)")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(1), help="interleaved rounds")
@click.option("--modes", default="", help="comma-separated contenders (default: all; raw and raw+call always run)")
def consume(count: int, rounds: int, modes: str) -> None:
    """Consumer throughput: every façade consumer beside raw and raw+call, interleaved rounds."""
    from rocketkafka.tools.bench.consume import TARGETS, bench_consume

    chosen = tuple(m.strip() for m in modes.split(",") if m.strip()) or tuple(TARGETS)
    unknown = [m for m in chosen if m not in TARGETS]
    if unknown:
        raise click.BadParameter(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(TARGETS)}",
                                 param_hint="--modes")
    with bench_settings() as settings:
        print_rows(bench_consume(settings, count, rounds, chosen, _say), f"consume {count:,} records",
                   _say)


@bench.command()
@click.option("--rate", default=1000, show_default=True, help="messages per second")
@click.option("--seconds", default=10.0, show_default=True, help="seconds of sending per contender and round")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(1), help="interleaved rounds")
def latency(rate: int, seconds: float, rounds: int) -> None:
    """Produce->handler latency at a steady rate: PushConsumer defaults beside raw and raw tuned."""
    from rocketkafka.tools.bench.latency import bench_latency

    with bench_settings() as settings:
        print_rows(bench_latency(settings, rate, seconds, rounds, _say), f"latency at {rate:,} msg/s",
                   _say)


@bench.command()
@click.option("--keys", default=256, show_default=True, help="order keys")
@click.option("--partitions", default=4, show_default=True)
@click.option("--handler-ms", default=10.0, show_default=True, help="sleep of the throughput listener (ms)")
@click.option("--keyed-messages", default=24_000, show_default=True, help="messages for the key-ordered rate")
@click.option("--serial-messages", default=1_200, show_default=True, help="messages for the partition-serial rate")
@click.option("--threads", default=256, show_default=True, help="consume_thread_max of the throughput runs")
def orderly(keys: int, partitions: int, handler_ms: float, keyed_messages: int, serial_messages: int,
            threads: int) -> None:
    """Ordered consumption: key-ordered vs partition-serial, takeover times, lock renewal."""
    from rocketkafka.tools.bench.orderly import bench_orderly

    with bench_settings() as settings:
        rows = bench_orderly(settings, keys=keys, partitions=partitions, handler_ms=handler_ms,
                             keyed_messages=keyed_messages, serial_messages=serial_messages,
                             threads=threads)
        print_rows(rows, f"orderly: {partitions} partitions, {keys} keys", _say)


@bench.command()
@click.option("--count", default=20_000, show_default=True, help="sends per figure")
@click.option("--threads", default=64, show_default=True, help="sending threads (both figures)")
@click.option("--unknown", default=10_000, show_default=True, help="UNKNOWN halves the checker resolves")
def txn(count: int, threads: int, unknown: int) -> None:
    """Transactional sends vs plain send_sync, and the checker resolving due UNKNOWN halves."""
    from rocketkafka.tools.bench.txn import bench_txn

    with bench_settings() as settings:
        print_rows(bench_txn(settings, count, threads, unknown=unknown),
                   f"transactions: {count:,} sends, {threads} threads", _say)


@bench.command("delay")
@click.option("--rate", default=2000, show_default=True, help="delayed messages per second")
@click.option("--duration", default=60.0, show_default=True, help="seconds of sending")
@click.option("--levels", default="1s 5s 10s 30s", show_default=True, help="the mixed levels (RocketMQ's first four)")
@click.option("--due-count", default=100_000, show_default=True, help="already-due records for the throughput figure")
@click.option("--partitions", default=4, show_default=True, help="partitions per delay topic")
@click.option("--forwarders", default=1, show_default=True, help="forwarder processes for the throughput figure")
@click.option("--rounds", default=3, show_default=True, help="pipe/forwarder rounds of the throughput figure")
@click.option("--part", type=click.Choice(["both", "lateness", "throughput"]), default="both", show_default=True,
              help="run only one of the two parts")
def delay_cmd(rate: int, duration: float, levels: str, due_count: int, partitions: int, forwarders: int,
              rounds: int, part: str) -> None:
    """Delay forwarder: lateness p50/p99/max under load, and already-due throughput beside a raw pipe."""
    from rocketkafka.tools.bench.delay import bench_delay, print_delay_result

    with bench_settings() as settings:
        result = bench_delay(settings, rate=rate, duration=duration, levels=levels, due_count=due_count,
                             partitions=partitions, forwarders=forwarders, rounds=rounds,
                             lateness=part != "throughput", throughput=part != "lateness", log=_say)
        print_delay_result(result, _say)


@bench.command("exactly-once")
@click.option("--due-count", default=50_000, show_default=True, help="already-due records per forwarder figure")
@click.option("--count", default=50_000, show_default=True, help="records per consume -> produce figure")
@click.option("--rate", default=500, show_default=True, help="messages per second of the lateness and latency figures")
@click.option("--seconds", default=20.0, show_default=True, help="seconds of sending per lateness/latency figure")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(1), help="interleaved rounds")
@click.option("--batch", default=64, show_default=True, help="the consumer's consume_batch_size (a transaction each)")
def exactly_once_cmd(due_count: int, count: int, rate: int, seconds: float, rounds: int, batch: int) -> None:
    """The cost of exactly once: forwarder and consumer throughput and latency, at least once beside it."""
    from rocketkafka.tools.bench.exactly_once import bench_exactly_once

    with bench_settings() as settings:
        print_rows(bench_exactly_once(settings, due_count=due_count, count=count, rate=rate, seconds=seconds,
                                      rounds=rounds, batch=batch, log=_say),
                   f"exactly once: {rounds} rounds, consumer batches of {batch}", _say)


@bench.command()
@click.option("--seconds", default=10.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="measured window per contender and round")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(1), help="interleaved rounds")
@click.option("--settle", default=2.0, show_default=True, type=click.FloatRange(min=0),
              help="seconds between owning the partitions and the window")
def idle(seconds: float, rounds: int, settle: float) -> None:
    """Idle CPU (% of one core) of a PushConsumer on 8 partitions and of the delay forwarder, beside raw floors."""
    from rocketkafka.tools.bench.idle import bench_idle

    with bench_settings() as settings:
        print_rows(bench_idle(settings, seconds, rounds, settle, _say),
                   f"idle CPU: {seconds:g} s windows, {rounds} rounds", _say)


@bench.command()
@click.option("--partitions", default="64,2048", show_default=True,
              help="comma-separated partition counts, one topic each")
@click.option("--seconds", default=10.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="idle window per contender and round")
@click.option("--rounds", default=1, show_default=True, type=click.IntRange(1), help="interleaved rounds")
@click.option("--settle", default=2.0, show_default=True, type=click.FloatRange(min=0),
              help="seconds between the last phase and the idle window")
def scale(partitions: str, seconds: float, rounds: int, settle: float) -> None:
    """Two orderly members sharing many partitions: take, split, one record each, idle CPU, Redis commands."""
    from rocketkafka.tools.bench.scale import bench_scale

    try:
        counts = [int(p) for p in partitions.split(",") if p.strip()]
    except ValueError:
        raise click.BadParameter(f"not a comma-separated list of counts: {partitions!r}", param_hint="--partitions")
    if not counts or any(c < 2 for c in counts):
        raise click.BadParameter("every count must be at least 2 (two members share them)", param_hint="--partitions")
    with bench_settings() as settings:
        print_rows(bench_scale(settings, counts, seconds, rounds, settle, _say),
                   f"scale: two orderly members, {rounds} round(s)", _say)


class _LazySparkBench(click.Command):
    """``bench spark`` lives in the spark package; importing pyspark only when it runs keeps other benches light."""

    def _real(self) -> click.Command:
        from rocketkafka.tools.spark_cli import bench_command

        return bench_command

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return self._real().get_params(ctx)

    def invoke(self, ctx: click.Context) -> object:
        return self._real().invoke(ctx)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return self._real().parse_args(ctx, args)


bench.add_command(_LazySparkBench("spark", help="Spark batch read rows/s (1M x 100 B, local[2]) beside raw confluent-kafka."))


def _names(ctx: click.Context, param: click.Parameter, value: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        raise click.BadParameter(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHES)}")
    return names


@bench.command("all")
@click.option("--scale", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="multiplies message counts and durations (0.05: a quick smoke run)")
@click.option("--only", default="", callback=_names, help=f"comma-separated benchmarks to run ({','.join(BENCHES)})")
@click.option("--skip", default="", callback=_names, help="comma-separated benchmarks to leave out")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("bench-results"),
              show_default=True, help="directory for bench.json, bench.png and bench.md")
@click.option("--markdown", is_flag=True, help="print the table as the README's markdown")
@click.option("--broker", type=click.Choice(["tansu", "kafka"]), default=None, help=_BROKER_HELP)
@click.option("--nodes", default=1, show_default=True, type=click.IntRange(1, 5), help="broker nodes (kafka only)")
@click.option("--secure", is_flag=True, help=_SECURE_HELP)
def all_cmd(scale: float, only: list[str], skip: list[str], out: Path, markdown: bool, broker: str | None,
            nodes: int, secure: bool) -> None:
    """Every benchmark on one stack: one table, OUT/bench.json, OUT/bench.png; exit 1 if one failed."""
    from rocketkafka.tools.bench.run_all import RunResult, broker_info, run_benches, select
    from rocketkafka.tools.bench.report import machine_info, report_dict, write_json

    names = select(only, skip)
    if not names:
        raise click.UsageError("--only/--skip leave no benchmark to run")
    chosen = _chosen_broker()[0]
    embedded = not cluster_given() or chosen is not None
    with bench_settings() as settings:
        machine = _scrub.tree(machine_info(broker_info(settings, embedded, chosen or "tansu")))

        def save(result: RunResult) -> None:  # after every benchmark: a late crash keeps the earlier figures
            write_json(out / "bench.json", report_dict(result.rows, machine, result.runs, scale))

        result = run_benches(settings, names, scale, _say, after_each=save)
    _render(result.rows, machine, out, markdown)
    if result.failed:
        click.secho(f"failed: {', '.join(result.failed)}", fg="red", err=True)
        raise SystemExit(1)


@bench.command("show")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                default=Path("bench-results/bench.json"))
@click.option("--markdown", is_flag=True, help="print the table as the README's markdown")
def show_cmd(path: Path, markdown: bool) -> None:
    """Print a bench.json's table again and redraw its bench.png and bench.md beside it."""
    from rocketkafka.tools.bench.report import read_json

    rows, document = read_json(path)
    _render(rows, document.get("machine", {}), path.parent, markdown)


def _render(rows: list[BenchRow], machine: dict[str, Any], out: Path, markdown: bool) -> None:
    from rocketkafka.tools.bench.chart import bench_chart
    from rocketkafka.tools.bench.report import chart_title, machine_summary, markdown_table

    out.mkdir(parents=True, exist_ok=True)
    table = markdown_table(rows, machine)
    if markdown:
        _say("\n" + table)
    else:
        print_rows(rows, f"rocketkafka bench all, {machine_summary(machine)}", _say)
    (out / "bench.md").write_text(table)
    chart = bench_chart(rows, out / "bench.png", chart_title(machine))
    _say(f"\nwrote {out / 'bench.json'}, {chart}, {out / 'bench.md'}")
