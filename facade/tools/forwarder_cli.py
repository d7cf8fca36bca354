"""``rocketkafka delay-forwarder``: run the timer forwarder until SIGTERM.

Configuration comes from the environment (flags override):

- ``ROCKETKAFKA_BOOTSTRAP_SERVERS``, ``ROCKETKAFKA_REDIS_URLS``, ``ROCKETKAFKA_TOPIC_PREFIX``,
  ``ROCKETKAFKA_REDIS_PREFIX``, ``ROCKETKAFKA_KAFKA`` (JSON): the connection (:class:`rocketkafka.config.Settings`);
- ``ROCKETKAFKA_DELAY_LEVELS``, ``ROCKETKAFKA_DELAY_STEPS``, ``ROCKETKAFKA_DELAY_MAX_DELAY``, ...:
  the delay settings (:class:`rocketkafka.schedule.levels.DelayConfig`);
- ``ROCKETKAFKA_FORWARDER_GROUP``, ``ROCKETKAFKA_FORWARDER_CONSUMER_OPTIONS`` (JSON of
  ``ConsumerOptions`` fields, e.g. lock timings), ``ROCKETKAFKA_FORWARDER_METRICS_PORT``
  (else ``ROCKETKAFKA_METRICS_PORT``): Prometheus series on ``/metrics`` (see rocketkafka.delay.metrics),
  ``ROCKETKAFKA_FORWARDER_EXACTLY_ONCE`` (``--exactly-once``): forward in Kafka transactions
  (rocketkafka.delay.exactly_once); refused with one line on a broker that cannot keep it.

Every option is checked before anything starts: a bad one ends the command with one
line and exit status 1, holding no lock and leaving no member entry. SIGTERM or SIGINT:
the records in flight are finished and acknowledged, offsets are committed, locks
released, then the process exits 0.
"""

from __future__ import annotations

import json
from typing import Any

import click
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rocketkafka.config import Settings
from rocketkafka.delay.forwarder import DEFAULT_GROUP, DelayForwarder
from rocketkafka.errors import ConfigError
from rocketkafka.ordering.engine.metrics import service_metrics_port
from rocketkafka.schedule.levels import DelayConfig
from rocketkafka.tools.service_run import serve, start_when_reachable, stop_on_signals
from rocketkafka.tools.settings import command_settings


class ForwarderSettings(BaseSettings):
    """Service settings of the forwarder (``ROCKETKAFKA_FORWARDER_*``).

    Parameters:
        group: the forwarders' consumer group (instances of one group split the delay partitions).
        consumer_options: ``ConsumerOptions`` fields for the forwarder's engine, e.g. lock timings (JSON).
        metrics_port: serve Prometheus metrics on this port (else ``ROCKETKAFKA_METRICS_PORT``).
        exactly_once: forward and commit in Kafka transactions (refused on a broker that cannot keep it).
    """

    model_config = SettingsConfigDict(env_prefix="ROCKETKAFKA_FORWARDER_", extra="forbid")

    group: str = DEFAULT_GROUP
    consumer_options: dict[str, Any] = Field(default_factory=dict)
    metrics_port: int | None = None
    exactly_once: bool = False


@click.command("delay-forwarder")
@click.option("--group", default=None, help=f"consumer group of the forwarders [ROCKETKAFKA_FORWARDER_GROUP, else "
              f"{DEFAULT_GROUP}]")
@click.option("--levels", default=None, help='delay levels, e.g. "1s 5s 10s" [ROCKETKAFKA_DELAY_LEVELS, else '
              "RocketMQ's 18 levels]")
@click.option("--metrics-port", type=click.IntRange(0, 65_535), default=None,
              help="serve Prometheus metrics on this port [ROCKETKAFKA_FORWARDER_METRICS_PORT or ROCKETKAFKA_METRICS_PORT]")
@click.option("--option", "options", multiple=True, metavar="NAME=VALUE",
              help="a consumer option, e.g. lock_lease_ms=3000 (repeatable)")
@click.option("--exactly-once", is_flag=True, default=None,
              help="forward and commit in Kafka transactions: read_committed readers see each message once "
                   "[ROCKETKAFKA_FORWARDER_EXACTLY_ONCE]")
def delay_forwarder(group: str | None, levels: str | None, metrics_port: int | None, options: tuple[str, ...],
                    exactly_once: bool | None) -> None:
    """Forward delayed messages to their real topic when due (RocketMQ's ScheduleMessageService)."""
    service = ForwarderSettings()
    settings = command_settings()
    if levels:
        settings = settings.model_copy(update={"delay": DelayConfig.load(levels=levels)})
    consumer_options = {**service.consumer_options, **parse_options(options)}
    port = service_metrics_port(metrics_port, service.metrics_port)
    stop = stop_on_signals()
    forwarder = start_when_reachable(
        lambda: DelayForwarder(settings, group=group or service.group, consumer_options=consumer_options,
                               metrics_port=port, exactly_once=bool(exactly_once or service.exactly_once)).start(),
        stop, "delay forwarder")
    if forwarder is None:
        return
    mode = "exactly once" if forwarder.exactly_once else "at least once"
    click.echo(f"delay forwarder {forwarder.instance_name} running (levels {settings.delay.describe()}, {mode})",
               err=True)
    failure = serve(forwarder, stop)
    click.echo(f"delay forwarder stopped: {json.dumps(forwarder.metrics.summary())}", err=True)
    if failure is not None:
        raise SystemExit(1)


def parse_options(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs as option fields (values parsed as JSON where they are, else strings).

    Raises:
        ConfigError: a pair has no ``=`` or no name.
    """
    parsed: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ConfigError(f"--option needs NAME=VALUE, got {pair!r}")
        try:
            parsed[name] = json.loads(value)
        except ValueError:
            parsed[name] = value
    return parsed


def forwarder_environment(settings: Settings, consumer_options: dict[str, Any] | None = None,
                          base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment that makes ``rocketkafka delay-forwarder`` serve ``settings`` (tests, bench, chaos): the
    settings, secrets included, go through the environment, never the command line (:meth:`Settings.child_environment`)."""
    env = settings.child_environment(base)
    if consumer_options:
        env["ROCKETKAFKA_FORWARDER_CONSUMER_OPTIONS"] = json.dumps(consumer_options)
    return env
