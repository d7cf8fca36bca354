"""The ``rocketkafka`` command line: dev stack, demo, topics, sidecar services, admin, benchmarks, chaos, Spark jobs.

Every command takes the connection from ``-b/--bootstrap-servers`` and ``--redis``,
else ``ROCKETKAFKA_*`` variables, else a live ``rocketkafka dev up`` stack
(:mod:`rocketkafka.tools.settings`). Expected failures (a broker that does not answer,
a bad setting, a missing topic) end as one ``Error:`` line and exit status 1; ``-v``
shows the traceback as well.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
from typing import Any

import click
import redis
from confluent_kafka import KafkaError, KafkaException

from rocketkafka.errors import RocketKafkaError
from rocketkafka.refusals import GRANT_HINT, RESOURCE_OF
from rocketkafka.logs import configure_logging
from rocketkafka.tools.settings import apply_connection_flags, command_settings, password_in_flags

#: Subcommands that live in other modules, loaded only when run (keeps `dev up` fast, and a missing
#: extra breaks only the command that needs it).
_LAZY_COMMANDS = {
    "acls": ("rocketkafka.tools.acls_cli", "acls",
             "Print each role's least-privilege Kafka ACLs and Redis ACL rule for a deployment."),
    "admin": ("rocketkafka.tools.admin_cli", "admin", "Inspect and operate groups, locks, delays, transactions."),
    "bench": ("rocketkafka.tools.bench.cli", "bench", "Benchmarks beside raw confluent-kafka (figures, never pass/fail)."),
    "chaos": ("rocketkafka.tools.chaos.cli", "chaos", "Fault run over every feature, judged by a history checker."),
    "delay-forwarder": ("rocketkafka.tools.forwarder_cli", "delay_forwarder",
                        "Run the delay forwarder sidecar (delayed messages to their topic when due)."),
    "txn-checker": ("rocketkafka.tools.checker_cli", "txn_checker",
                    "Run the transaction checker sidecar (check back undecided half messages)."),
    "spark": ("rocketkafka.tools.spark_cli", "spark_cli", "Spark jobs over rocketkafka topics (audits); needs [spark]."),
}

#: Failures a user can cause or fix: shown as one line. Anything else is a bug and keeps its traceback.
EXPECTED_ERRORS = (RocketKafkaError, KafkaException, redis.RedisError, OSError, ValueError)


def describe_error(exc: BaseException) -> str:
    """One line saying what went wrong, naming the system that said so (our own errors say it themselves:
    which broker address did not answer, which topic is missing)."""
    if isinstance(exc, RocketKafkaError):
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        if exc.args[0].code() in RESOURCE_OF:  # a refusal of a call we did not map: what is known of it
            return f"Kafka refused it ({exc.args[0].name()}: {exc.args[0].str()}); {GRANT_HINT}"
        return f"Kafka: {exc.args[0].str()}"
    if isinstance(exc, redis.RedisError):
        return f"Redis: {exc}"
    text = str(exc).strip().splitlines()
    return text[0] if len(text) == 1 else f"{type(exc).__name__}: {' / '.join(line.strip() for line in text if line.strip())}"


class RocketKafkaCli(click.Group):
    """The root group: lazy subcommands, and expected errors as one line (traceback with ``-v``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *_LAZY_COMMANDS])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in _LAZY_COMMANDS:
            module, attr, summary = _LAZY_COMMANDS[name]
            try:
                return getattr(importlib.import_module(module), attr)
            except ImportError as exc:
                return _unavailable(name, summary, exc)
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except EXPECTED_ERRORS as exc:
            if ctx.params.get("verbose"):
                raise
            raise click.ClickException(describe_error(exc)) from None


def _unavailable(name: str, summary: str, exc: ImportError) -> click.Command:
    missing = exc.name or str(exc)
    extra = "spark" if missing.split(".")[0] in ("pyspark", "pyarrow", "pandas", "numpy") else \
        "bench" if missing.split(".")[0] == "matplotlib" else "dev"

    def fail() -> None:
        raise click.ClickException(f"`rocketkafka {name}` needs {missing!r}: pip install 'rocketkafka[{extra}]'")

    return click.Command(name, callback=fail, help=f"{summary} (unavailable here: needs rocketkafka[{extra}])")


@click.group(cls=RocketKafkaCli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rocketkafka", prog_name="rocketkafka")
@click.option("-b", "--bootstrap-servers", metavar="HOST:PORT[,...]",
              help="Kafka bootstrap servers [ROCKETKAFKA_BOOTSTRAP_SERVERS, else a live `dev up` stack]")
@click.option("--redis", "redis_urls", metavar="URL[,URL...]",
              help="Redis nodes of the lock table, comma separated [ROCKETKAFKA_REDIS_URLS]; a URL with a password "
                   "belongs in the variable or ROCKETKAFKA_CONFIG_FILE: `ps` shows flags to every user")
@click.option("-v", "--verbose", count=True, help="-v: info logs and tracebacks; -vv: debug logs")
@click.option("--log-format", type=click.Choice(["text", "json"]), envvar="ROCKETKAFKA_LOG_FORMAT",
              help="log lines as text or one JSON object each [ROCKETKAFKA_LOG_FORMAT, else text]")
def main(bootstrap_servers: str | None, redis_urls: str | None, verbose: int, log_format: str | None) -> None:
    """RocketMQ semantics on Kafka: ordered consumption, delay levels, transactions, retry/DLQ."""
    configure_logging(logging.WARNING - 10 * min(verbose, 2), log_format)
    warning = password_in_flags(redis_urls)
    if warning is not None:  # once per command: it works, but the password is on the command line
        click.echo(warning, err=True)
    click.get_current_context().call_on_close(apply_connection_flags(bootstrap_servers, redis_urls))


@main.group()
def dev() -> None:
    """The embedded dev stack: a broker (Tansu, or Apache Kafka with Java) and Redis nodes on loopback."""


@dev.command("up")
@click.option("--redis-nodes", default=3, show_default=True, type=click.IntRange(1, 9), help="how many Redis nodes")
@click.option("--broker", type=click.Choice(["tansu", "kafka"]), default="tansu", show_default=True,
              help="tansu (Python alone, memory storage) or kafka (Apache Kafka, KRaft, log on disk; needs Java 17+, "
                   "and Maven to fetch its jars once)")
@click.option("--nodes", default=1, show_default=True, type=click.IntRange(1, 5),
              help="broker nodes (kafka only; 3 gives replication factor 3 and min.insync.replicas 2)")
@click.option("--secure", is_flag=True,
              help="kafka only: SASL/SCRAM over TLS with ACLs (no plaintext port), Redis on TLS with ACL users "
                   "(needs Debian's redis-server 7); the super user's settings go to an owner-only properties file")
def dev_up_cmd(redis_nodes: int, broker: str, nodes: int, secure: bool) -> None:
    """Start the stack in the background and record its addresses (later commands use it while it lives)."""
    from rocketkafka.testing.devstack import dev_up

    if broker == "tansu" and nodes != 1:
        raise click.BadParameter("Tansu runs one node; use --broker kafka for a cluster", param_hint="--nodes")
    if broker == "tansu" and secure:
        raise click.BadParameter("the secured stack runs Apache Kafka: add --broker kafka", param_hint="--secure")
    click.echo(f"starting the embedded stack ({broker}, {nodes} broker node(s), {redis_nodes} Redis node(s)"
               f"{', secured' if secure else ''})...", err=True)
    record = dev_up(redis_nodes, broker=broker, broker_nodes=nodes, secure=secure)
    click.echo(f"broker  {record['bootstrap_servers']} ({record.get('broker', broker)})")
    for url in record["redis_urls"]:
        click.echo(f"redis   {url}")
    if record.get("config_file"):  # the passwords stay in the file: nothing secret is printed
        click.echo(f"super user {record['secure']['admin_user']}: settings in {record['config_file']} (owner-only), "
                   f"CA {record['secure']['ca']}")
        click.echo(f"export ROCKETKAFKA_CONFIG_FILE={record['config_file']}")
    else:
        click.echo("export ROCKETKAFKA_BOOTSTRAP_SERVERS=%s ROCKETKAFKA_REDIS_URLS=%s ROCKETKAFKA_FETCH_WAIT_MS=%s"
                   % (record["bootstrap_servers"], ",".join(record["redis_urls"]), record["fetch_wait_ms"]))


@dev.command("down")
def dev_down_cmd() -> None:
    """Stop the recorded stack."""
    from rocketkafka.testing.devstack import dev_down

    click.echo("stopped" if dev_down() else "nothing running")


@dev.command("status")
def dev_status_cmd() -> None:
    """Show the recorded stack and whether every process is alive (exit 1 when not)."""
    from rocketkafka.testing.devstack import dev_status

    status = dev_status()
    click.echo(json.dumps({k: v for k, v in status.items() if k != "nodes"}, indent=2))
    sys.exit(0 if status.get("running") else 1)


@main.command()
@click.option("--messages", default=200, show_default=True, type=click.IntRange(10, 100_000),
              help="messages per demo step")
@click.option("--broker", type=click.Choice(["tansu", "kafka"]), default="tansu", show_default=True,
              help="the embedded broker: tansu (Python alone) or kafka (Apache Kafka; needs Java 17+, and Maven to "
                   "fetch its jars once)")
def demo(messages: int, broker: str) -> None:
    """Start a private embedded stack and show, each claim checked: tags, clustering, rebalance, broadcasting,
    an orderly group surviving a SIGKILL, delayed messages, transactions with check-back (exit 1 if a check fails)."""
    from rocketkafka.tools.demo import run_demo

    sys.exit(run_demo(messages, broker))


@main.group()
def topics() -> None:
    """Create and list topics (rocketkafka never auto-creates one)."""


@topics.command("create")
@click.argument("name")
@click.option("--partitions", default=8, show_default=True, type=click.IntRange(1, 100_000), help="partition count")
@click.option("--replication", default=None, type=click.IntRange(1, 100),
              help="replication factor  [default: the broker's default.replication.factor]")
@click.option("--timeout", default=15.0, show_default=True, type=click.FloatRange(0.1, 600), help="seconds to wait")
def topics_create(name: str, partitions: int, replication: int | None, timeout: float) -> None:
    """Create topic NAME (an existing one is left as it is)."""
    from rocketkafka.admin import TopicAdmin

    TopicAdmin(command_settings()).create(name, partitions=partitions, replication=replication, timeout=timeout)
    click.echo(f"created {name} ({partitions} partitions)")


@topics.command("list")
@click.option("--timeout", default=10.0, show_default=True, type=click.FloatRange(0.1, 600), help="seconds to wait")
def topics_list(timeout: float) -> None:
    """List topics with their partition counts."""
    from rocketkafka.admin import TopicAdmin

    for name, partitions in sorted(TopicAdmin(command_settings()).list(timeout).items()):
        click.echo(f"{name}\t{partitions}")


if __name__ == "__main__":
    main()
