"""One chaos run from start to verdict: topics, services, traffic, faults, drain, check.

Everything the run creates lives under its own topic and Redis prefixes
(``chaos-<run id>``), so runs never see each other's data on a shared cluster. The
output directory gets each process's log and handler history, ``traffic.jsonl``
(every acknowledged send) and ``verdict.json``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rocketkafka.admin import TopicAdmin
from rocketkafka.tools.chaos.nemesis import BrokerControl, Nemesis, RedisControl
from rocketkafka.tools.chaos.plan import ChaosPlan, Fault, Kind
from rocketkafka.tools.chaos.processes import Managed, child_environment, python_module
from rocketkafka.tools.chaos.traffic import Traffic
from rocketkafka.tools.chaos.verdict import Verdict, judge, output_calls
from rocketkafka.tools.chaos.worker import WorkerSpec
from rocketkafka.tools.scrub import Scrubber
from rocketkafka.config import Settings
from rocketkafka.testing.broker_probes import probe_add_partitions
from rocketkafka.testing.capabilities import add_partitions
from rocketkafka.testing.clock import CLOCK_FILE_ENV
from rocketkafka.testing.history import HandlerCall, History

Say = Callable[[str], None]
#: How long traffic may go on past the planned duration, per planned fault kind, while not every kind has run.
ROTATION_GRACE_PER_FAULT_S = 60.0


def run_chaos(base: Settings, plan: ChaosPlan, out: Path, redis: RedisControl | None = None,
              say: Say = print, broker: BrokerControl | None = None) -> Verdict:
    """Run ``plan`` against the cluster of ``base``; ``redis`` and ``broker`` let the nemesis stop and pause them."""
    from rocketkafka.schedule.levels import DelayConfig

    out.mkdir(parents=True, exist_ok=True)
    delay_config = DelayConfig(levels=plan.delay_levels, partitions=plan.partitions)
    settings = base.model_copy(update={"topic_prefix": f"{base.topic_prefix}.chaos-{plan.run_id}",
                                       "redis_prefix": f"{base.redis_prefix}:chaos-{plan.run_id}",
                                       "delay": delay_config})  # the traffic's delayed sends use the forwarders' levels
    skipped_kinds = _drop_unsupported_kinds(settings, plan, say)
    topics = {plan.topic(k): plan.partitions for k in plan.kinds}
    if Kind.EXACTLY_ONCE in plan.kinds:
        topics[plan.output_topic] = plan.partitions
    TopicAdmin(settings).create_many(topics)
    say(f"chaos run {plan.run_id}: {plan.duration:.0f} s of traffic, a fault every {plan.fault_interval:.0f} s "
        f"({', '.join(f.value for f in plan.faults)}); output in {out}")

    consumers = [_consumer(settings, plan, kind, i, out) for kind in plan.kinds for i in range(plan.consumers_per_kind)]
    forwarders = [_forwarder(settings, plan, i, out) for i in range(plan.forwarders)]
    checker = _checker(settings, plan, out)
    services = [*consumers, *forwarders, checker]
    traffic = None
    try:
        for s in services:
            s.start()
        for s in services:
            s.wait_ready()
        say(f"started {len(consumers)} consumers, {len(forwarders)} forwarders and the checker")
        traffic = Traffic(settings, plan).start()
        adder, why_not = _partition_adder(settings, plan)
        nemesis = Nemesis(plan, consumers, forwarders, checker, redis, say, broker=broker, add_partitions=adder,
                          clock_files={c.name: c.env[CLOCK_FILE_ENV] for c in consumers},
                          skipped={Fault.ADD_PARTITIONS.value: why_not} if why_not else {}).start()
        started = time.monotonic()
        _progress(plan.duration, out, traffic, say, started)
        if not nemesis.rotated.is_set():
            grace = ROTATION_GRACE_PER_FAULT_S * len(nemesis.faults)
            say(f"  traffic goes on (at most {grace:.0f} s more) until these faults have run once: "
                f"{', '.join(nemesis.not_run())}")
            _progress(plan.duration + grace, out, traffic, say, started, until=nemesis.rotated)
            missing = nemesis.not_run()
            say(f"  gave up waiting for: {', '.join(missing)}" if missing else
                f"  every planned fault has run ({time.monotonic() - started:.0f} s of traffic)")
        nemesis.stop()
        traffic_seconds = time.monotonic() - started
        traffic.stop()
        traffic_end = time.time()
        if traffic.errors:
            raise RuntimeError(f"traffic failed: {traffic.errors[0]!r}")
        _drain(plan, traffic, out, say)
        time.sleep(2.0)  # a late duplicate would show now
    finally:
        if traffic is not None:
            traffic.stop()
            traffic.close()
        for s in services:
            s.stop()
    traffic.log.save(out / "traffic.jsonl")
    delivered, handled = _histories(plan, out, "delivered"), _histories(plan, out, "handled")
    if Kind.EXACTLY_ONCE in plan.kinds:  # what a read_committed reader of the output sees: both views
        delivered[Kind.EXACTLY_ONCE.value] = handled[Kind.EXACTLY_ONCE.value] = \
            output_calls(settings, plan.output_topic)
    verdict = judge(traffic.log.sent, traffic.log.failed, delivered, handled, nemesis.events, traffic_end)
    document = {"plan": json.loads(plan.model_dump_json()), **verdict.as_dict(),
                "trafficSeconds": round(traffic_seconds, 1), "faultsSkipped": nemesis.skipped,
                "kindsSkipped": skipped_kinds, "guardsFired": guards_fired(out)}
    # a fault's error text may quote what a library said: no secret of the settings may reach the file
    (out / "verdict.json").write_text(json.dumps(Scrubber(settings).tree(document), indent=2))
    return verdict


def guards_fired(out: Path) -> list[str]:
    """The lines in which a consumer's order or claim guard repaired its own state (scheduler, batch step): the
    order held, but something the engine's reasoning rules out happened; they are kept in the verdict to be read."""
    return [line.strip() for log_file in sorted(out.glob("*.log")) for line in log_file.read_text(errors="replace")
            .splitlines() if "order guard:" in line or "claim guard:" in line]


def _consumer(settings: Settings, plan: ChaosPlan, kind: Kind, index: int, out: Path) -> Managed:
    name = f"{kind.value}-{index}"
    spec = WorkerSpec(name=name, kind=kind, group=plan.group(kind), topic=plan.topic(kind),
                      options=plan.consumer_options(), directory=str(out),
                      consuming_ttl_ms=plan.consuming_ttl_ms, slow_handler_ms=plan.slow_handler_ms,
                      output=plan.output_topic if kind is Kind.EXACTLY_ONCE else None)
    clock = out / f"{name}.clock"  # the clock-jump fault writes the offset here (rocketkafka.testing.clock)
    clock.write_text("0\n")
    return Managed(name, f"consumer:{kind.value}", python_module("rocketkafka.tools.chaos.worker", spec.model_dump_json()),
                   child_environment(settings, {CLOCK_FILE_ENV: str(clock)}), out, "ready")


def _partition_adder(settings: Settings, plan: ChaosPlan) -> tuple[Callable[[str, int], None] | None, str | None]:
    """How the add-partitions fault grows a topic, or ``None`` and why not (not planned; the broker cannot)."""
    if Fault.ADD_PARTITIONS not in plan.faults:
        return None, None
    why_not = probe_add_partitions(settings)
    if why_not is not None:
        return None, f"the broker cannot add partitions to a live topic ({why_not})"
    return (lambda topic, total: add_partitions(settings, topic, total)), None


def _forwarder(settings: Settings, plan: ChaosPlan, index: int, out: Path) -> Managed:
    from rocketkafka.tools.forwarder_cli import forwarder_environment

    env = forwarder_environment(settings, plan.consumer_options(), base=child_environment(settings))
    return Managed(f"forwarder-{index}", "forwarder", python_module("rocketkafka.tools.cli", "-v", "delay-forwarder"), env, out,
                   "running")


def _checker(settings: Settings, plan: ChaosPlan, out: Path) -> Managed:
    o = plan.consumer_options()
    argv = python_module("rocketkafka.tools.cli", "-v", "txn-checker", "--timeout-ms", str(plan.txn_timeout_ms),
                         "--interval-ms", str(plan.txn_check_interval_ms), "--half-partitions", str(plan.partitions),
                         "--lock-lease-ms", str(o["lock_lease_ms"]),
                         "--lock-renew-interval-ms", str(o["lock_renew_interval_ms"]),
                         "--lock-client-expiry-ms", str(o["lock_client_expiry_ms"]),
                         "--heartbeat-interval-ms", str(o["heartbeat_interval_ms"]),
                         "--member-timeout-ms", str(o["member_timeout_ms"]))
    return Managed("checker", "checker", argv, child_environment(settings), out, "running")


def _drop_unsupported_kinds(settings: Settings, plan: ChaosPlan, say: Say) -> dict[str, str]:
    """Take the exactly-once kind out of ``plan`` on a broker whose readers see aborted records; why, per kind."""
    from rocketkafka.exactly_once import aborted_records_hidden

    if Kind.EXACTLY_ONCE not in plan.kinds:
        return {}
    why_not = aborted_records_hidden(settings)
    if why_not is None:
        return {}
    plan.kinds = [k for k in plan.kinds if k is not Kind.EXACTLY_ONCE]
    say(f"the exactly-once workload is skipped: the broker at {settings.bootstrap_servers} cannot keep it ({why_not})")
    return {Kind.EXACTLY_ONCE.value: why_not}


def _histories(plan: ChaosPlan, out: Path, view: str) -> dict[str, list[HandlerCall]]:
    return {k.value: History.load(sorted(out.glob(f"{k.value}-*.{view}.jsonl"))) for k in plan.kinds}


def _handled_ids(plan: ChaosPlan, out: Path) -> set[str]:
    return {c.msg_id for calls in _histories(plan, out, "handled").values() for c in calls}


def _progress(duration: float, out: Path, traffic: Traffic, say: Say, started: float,
              until: threading.Event | None = None) -> None:
    """Report progress every 10 s until ``duration`` seconds after ``started`` (monotonic), or ``until`` is set."""
    done = until or threading.Event()  # a new event is never set: the whole duration
    while (left := duration - (time.monotonic() - started)) > 0:
        if done.wait(min(10.0, left)):
            return
        handled = sum(p.read_bytes().count(b"\n") for p in out.glob("*.handled.jsonl"))  # cheap: lines, not ids
        say(f"  {time.monotonic() - started:5.0f} s: {len(traffic.log.sent):,} sent, {handled:,} handler calls")


def _drain(plan: ChaosPlan, traffic: Traffic, out: Path, say: Say) -> None:
    """Wait until every message that must arrive has been handled, or ``plan.drain_timeout``."""
    timeout = plan.drain_timeout
    expected = {s.msg_id for s in traffic.log.sent if s.expected}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        missing = expected - _handled_ids(plan, out)
        if not missing:
            say(f"  drained: all {len(expected):,} expected messages handled")
            return
        say(f"  draining: {len(missing):,} of {len(expected):,} still to come")
        time.sleep(2.0)
    say(f"  drain timed out after {timeout:.0f} s")
