"""The ``rocketkafka`` command line: dev stack, demo, topics, sidecar services, benchmarks, Spark jobs.

Connection settings come from ``ROCKETKAFKA_*`` environment variables or, when
unset, from the stack ``rocketkafka dev up`` recorded.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys

import click

# Subcommands that live in other packages, loaded only when run (keeps `dev up` fast).
_LAZY_COMMANDS = {
    "bench": ("facade.bench_cli", "bench"),
    "chaos": ("facade.chaos.cli", "chaos"),
    "delay-forwarder": ("delay.cli", "delay_forwarder"),
    "txn-checker": ("txn.cli", "txn_checker"),
    "spark": ("spark.cli", "spark_cli"),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *_LAZY_COMMANDS])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in _LAZY_COMMANDS:
            module, attr = _LAZY_COMMANDS[name]
            try:
                return getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError) as exc:
                return _unavailable(name, exc)
        return super().get_command(ctx, name)


def _unavailable(name: str, exc: Exception) -> click.Command:
    def fail() -> None:
        raise click.ClickException(f"command {name!r} is not available: {exc}")

    return click.Command(name, callback=fail, help=f"(unavailable: {exc})")


@click.group(cls=_LazyGroup)
@click.option("-v", "--verbose", count=True, help="-v info, -vv debug logging")
@click.option("--log-format", type=click.Choice(["text", "json"]), envvar="ROCKETKAFKA_LOG_FORMAT",
              help="log lines as text or one JSON object each [ROCKETKAFKA_LOG_FORMAT or text]")
def main(verbose: int, log_format: str | None) -> None:
    """RocketMQ semantics on Kafka: ordered consumption, delay levels, transactions, retry/DLQ."""
    from facade.logs import configure_logging

    configure_logging(logging.WARNING - 10 * min(verbose, 2), log_format)


@main.group()
def dev() -> None:
    """The embedded dev stack: a Tansu broker and Redis nodes on loopback."""


@dev.command("up")
@click.option("--redis-nodes", default=3, show_default=True, help="how many Redis nodes")
def dev_up_cmd(redis_nodes: int) -> None:
    """Start the stack in the background and record its addresses."""
    from facade.devstack import dev_up

    record = dev_up(redis_nodes)
    click.echo(f"broker  {record['bootstrap_servers']}")
    for url in record["redis_urls"]:
        click.echo(f"redis   {url}")
    click.echo("export ROCKETKAFKA_BOOTSTRAP_SERVERS=%s ROCKETKAFKA_REDIS_URLS=%s"
               % (record["bootstrap_servers"], ",".join(record["redis_urls"])))


@dev.command("down")
def dev_down_cmd() -> None:
    """Stop the recorded stack."""
    from facade.devstack import dev_down

    click.echo("stopped" if dev_down() else "nothing running")


@dev.command("status")
def dev_status_cmd() -> None:
    """Show the recorded stack and whether every process is alive."""
    from facade.devstack import dev_status

    status = dev_status()
    click.echo(json.dumps({k: v for k, v in status.items() if k != "nodes"}, indent=2))
    sys.exit(0 if status.get("running") else 1)


@main.command()
@click.option("--messages", default=200, show_default=True, help="messages per demo step")
def demo(messages: int) -> None:
    """Start the embedded stack and walk through producing, tags, clustering, broadcasting, join/leave."""
    from facade.demo import run_demo

    run_demo(messages)


@main.group()
def topics() -> None:
    """Create and list topics (never auto-created)."""


@topics.command("create")
@click.argument("name")
@click.option("--partitions", default=8, show_default=True)
def topics_create(name: str, partitions: int) -> None:
    from facade.admin import TopicAdmin
    from facade.config import Settings

    TopicAdmin(Settings.load()).create(name, partitions=partitions)
    click.echo(f"created {name} ({partitions} partitions)")


@topics.command("list")
def topics_list() -> None:
    from confluent_kafka.admin import AdminClient

    from facade.config import Settings

    listed = AdminClient(Settings.load().kafka_config()).list_topics(timeout=10).topics
    for name in sorted(listed):
        click.echo(f"{name}\t{len(listed[name].partitions)}")


if __name__ == "__main__":
    main()
