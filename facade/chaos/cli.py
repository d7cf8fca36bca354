"""``rocketkafka chaos``: a bounded fault run; exit status 1 on any loss, reorder, early delivery or visible rollback."""

from __future__ import annotations

import time
from pathlib import Path

import click

from facade.chaos.plan import ChaosPlan, Fault


@click.command("chaos")
@click.option("--duration", default=300.0, show_default=True, help="seconds of traffic and faults")
@click.option("--fault-interval", default=30.0, show_default=True, help="seconds between faults")
@click.option("--faults", default=",".join(f.value for f in Fault), show_default=True,
              help="comma-separated faults, injected round robin")
@click.option("--seed", default=1, show_default=True, help="victim choice and traffic keys")
@click.option("--rate-scale", default=1.0, show_default=True, help="multiply every traffic rate")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="output directory [chaos-results/<time>-<run id>]")
def chaos(duration: float, fault_interval: float, faults: str, seed: int, rate_scale: float, out: Path | None) -> None:
    """Run orderly, key-ordered, delayed and transactional traffic while killing, stopping and restarting
    consumers, forwarders, the checker and a Redis node; then check the history and print the figures."""
    from facade.chaos.nemesis import RedisControl
    from facade.chaos.report import render
    from facade.chaos.run import run_chaos
    from facade.devstack import given_or_embedded

    try:
        chosen = [Fault(f.strip()) for f in faults.split(",") if f.strip()]
    except ValueError as exc:
        raise click.BadParameter(f"{exc}; known faults: {', '.join(f.value for f in Fault)}", param_hint="--faults")
    plan = ChaosPlan(duration=duration, fault_interval=fault_interval, faults=chosen, seed=seed)
    plan.rates = {kind: rate * rate_scale for kind, rate in plan.rates.items()}
    out = out or Path("chaos-results") / f"{time.strftime('%Y%m%d-%H%M%S')}-{plan.run_id}"
    with given_or_embedded(say=click.echo) as (settings, stack):
        # a given cluster's Redis nodes cannot be restarted from here
        redis = RedisControl(len(stack.redis_urls), stack.stop_redis, stack.start_redis) if stack else None
        if redis is None and Fault.REDIS_DOWN in chosen:
            click.echo("note: a given cluster's Redis nodes cannot be restarted from here; no redis-down faults")
        verdict = run_chaos(settings, plan, out, redis, say=click.echo)
    click.echo("")
    click.echo(render(verdict))
    click.echo(f"\nverdict: {out / 'verdict.json'}")
    if not verdict.passed:
        raise SystemExit(1)
