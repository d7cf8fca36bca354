"""``rocketkafka chaos``: a bounded fault run; exit status 1 on any loss, reorder, early delivery or visible rollback."""

from __future__ import annotations

import time
from pathlib import Path

import click

from rocketkafka.tools.chaos.plan import ChaosPlan, Fault, Kind


@click.command("chaos")
@click.option("--duration", default=300.0, show_default=True, help="seconds of traffic and faults (longer while a planned fault has not run yet)")
@click.option("--fault-interval", default=ChaosPlan.model_fields["fault_interval"].default, show_default=True,
              help="seconds between faults")
@click.option("--faults", default=",".join(f.value for f in Fault), show_default=True,
              help="comma-separated faults, injected round robin")
@click.option("--seed", default=1, show_default=True, help="victim choice and traffic keys")
@click.option("--rate-scale", default=1.0, show_default=True, help="multiply every traffic rate")
@click.option("--consumers", "consumers_per_kind", default=ChaosPlan.model_fields["consumers_per_kind"].default,
              show_default=True, type=click.IntRange(1, 16), help="consumer processes per kind of traffic")
@click.option("--forwarders", default=ChaosPlan.model_fields["forwarders"].default, show_default=True,
              type=click.IntRange(1, 16), help="delay forwarder processes")
@click.option("--broker", type=click.Choice(["tansu", "kafka"]), default=None,
              help="run on a private embedded stack of this broker (kafka: Apache Kafka, which adds the kill-broker "
                   "fault) even when ROCKETKAFKA_BOOTSTRAP_SERVERS names a cluster [the given cluster, else tansu]")
@click.option("--nodes", default=1, show_default=True, type=click.IntRange(1, 5), help="broker nodes (kafka only)")
@click.option("--secure", is_flag=True,
              help="run on a private secured embedded stack (implies --broker kafka): SASL/SCRAM over TLS with ACLs, "
                   "Redis on TLS with ACL users. A given secured cluster needs no flag: its settings come from "
                   "ROCKETKAFKA_CONFIG_FILE or ROCKETKAFKA_KAFKA + ROCKETKAFKA_REDIS_URLS")
@click.option("--exactly-once", "exactly_once", is_flag=True,
              help="add the exactly-once workload: consume -> produce in Kafka transactions, judged on its output "
                   "(a broker that hides aborted records only; left out, saying why, elsewhere)")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="output directory [chaos-results/<time>-<run id>]")
def chaos(duration: float, fault_interval: float, faults: str, seed: int, rate_scale: float, consumers_per_kind: int,
          forwarders: int, broker: str | None, nodes: int, secure: bool, exactly_once: bool, out: Path | None) -> None:
    """Run orderly, key-ordered, delayed and transactional traffic while killing, stopping and restarting
    consumers, forwarders, the checker and Redis nodes, pausing the broker and a Redis majority, slowing a
    handler past its lock lease, jumping a consumer's clock and adding partitions (where the broker can);
    then check the history and print the figures. Every process of the run gets the cluster's settings
    (passwords too) through its environment, never its command line; nothing printed or written holds one."""
    from rocketkafka.tools.chaos.nemesis import BrokerControl, RedisControl
    from rocketkafka.tools.chaos.report import render
    from rocketkafka.tools.chaos.run import run_chaos
    from rocketkafka.testing.devstack import given_or_embedded
    from rocketkafka.tools.scrub import Scrubber

    try:
        chosen = [Fault(f.strip()) for f in faults.split(",") if f.strip()]
    except ValueError as exc:
        raise click.BadParameter(f"{exc}; known faults: {', '.join(f.value for f in Fault)}", param_hint="--faults")
    if secure and broker == "tansu":
        raise click.BadParameter("the secured stack runs Apache Kafka: use --broker kafka (or leave --broker out)",
                                 param_hint="--secure")
    plan = ChaosPlan(duration=duration, fault_interval=fault_interval, faults=chosen, seed=seed,
                     consumers_per_kind=consumers_per_kind, forwarders=forwarders)
    if exactly_once:
        plan.kinds.append(Kind.EXACTLY_ONCE)
    plan.rates = {kind: rate * rate_scale for kind, rate in plan.rates.items()}
    out = out or Path("chaos-results") / f"{time.strftime('%Y%m%d-%H%M%S')}-{plan.run_id}"
    with given_or_embedded(say=click.echo, broker=broker, broker_nodes=nodes, secure=secure) as (settings, stack):
        scrub = Scrubber(settings)  # what is printed hides the run's secrets, whatever a message quotes
        # a given cluster's Redis nodes and broker cannot be stopped from here (the nemesis says so)
        redis = RedisControl(len(stack.redis_urls), stack.stop_redis, stack.start_redis, stack.pause_redis,
                             stack.resume_redis) if stack else None
        durable = stack is not None and stack.broker_kind == "kafka"  # a killed Tansu loses its memory log
        control = BrokerControl(stack.pause_broker, stack.resume_broker, stack.kill_broker if durable else None,
                                stack.start_broker if durable else None, stack.broker_nodes) if stack else None
        verdict = run_chaos(settings, plan, out, redis, say=scrub.echo(click.echo), broker=control)
    click.echo("")
    click.echo(scrub(render(verdict)))
    click.echo(f"\nverdict: {out / 'verdict.json'}")
    if not verdict.passed:
        raise SystemExit(1)
