"""The scripted demo behind ``rocketkafka demo``: what rocketkafka is for, shown on a private embedded stack.

It starts a broker (Tansu, or Apache Kafka with ``--broker kafka``) and three Redis nodes, then
the two sidecars (a delay forwarder and a transaction checker, as a deployment runs them), and
walks through: tags and a tag filter; clustering members splitting partitions, then a join and
a leave under traffic; broadcasting; an orderly group whose member is SIGKILLed mid-stream;
delayed messages; transactions resolved by commit, rollback and check-back. Every step checks what it claims before printing it
(:mod:`rocketkafka.tools.demo_report`), and the exit code is 1 when any check failed.
"""

from __future__ import annotations

import logging
import time
from contextlib import ExitStack

from rocketkafka.config import Settings
from rocketkafka.delay import DelayForwarder
from rocketkafka.schedule.levels import DelayConfig
from rocketkafka.testing.devstack import DevStack
from rocketkafka.testing.waiting import wait_for
from rocketkafka.tools import demo_basics, demo_delay, demo_orderly, demo_txn
from rocketkafka.tools.demo_report import DemoReport
from rocketkafka.tools.demo_stage import FAST, Stage
from rocketkafka.txn import CheckerOptions, TransactionChecker

#: Checker timings scaled down from RocketMQ's 6 s timeout and 60 s scan interval.
CHECKER = {"transaction_timeout_ms": 1000, "check_interval_ms": 300, "half_partitions": 4}
SPLIT_PARTITIONS = 8
STEPS = 10
#: The embedded brokers the demo can run on (``DevStack(broker=...)``), as the first step names them.
BROKERS = {"tansu": "a Tansu broker", "kafka": "an Apache Kafka broker (KRaft)"}


def run_demo(messages: int = 200, broker: str = "tansu") -> int:
    """Run every step on a fresh embedded stack with ``broker``; the exit code (0: every check passed)."""
    logging.getLogger("rocketkafka.rdkafka").setLevel(logging.CRITICAL)  # clients outliving the stack just complain
    report = DemoReport(STEPS)
    with ExitStack() as running:
        stack: DevStack | None = None
        with report.step(f"starting the embedded stack: {BROKERS[broker]} and 3 Redis nodes (the lock table's quorum)"):
            stack = running.enter_context(DevStack(redis_nodes=3, broker=broker))
            report.note(f"broker {stack.broker_version} at {stack.bootstrap_servers}, "
                        f"redis {', '.join(stack.redis_urls)}")
        if stack is None:
            return report.finish()
        settings = Settings(bootstrap_servers=stack.bootstrap_servers, redis_urls=stack.redis_urls,
                            delay=DelayConfig(partitions=1))  # RocketMQ's levels; one partition each is plenty here
        stage = Stage(settings, report, messages)
        with report.step("starting the sidecars: a delay forwarder and a transaction checker"):
            _start_sidecars(stage, running)
        with report.step(f"tags: {messages} messages tagged TagA/TagB/TagC, a consumer subscribed to \"TagA || TagB\""):
            demo_basics.tags_and_filter(stage)
        split = demo_basics.Members(stage, stage.topic("demo-split", SPLIT_PARTITIONS))
        sent: list[str] = []
        with report.step(f"clustering: c2 joins c1's group on a topic of {SPLIT_PARTITIONS} partitions"):
            sent = demo_basics.clustering(stage, split, SPLIT_PARTITIONS)
        with report.step("rebalance: while messages flow, c3 joins, then c1 leaves"):
            try:
                sent = demo_basics.join_and_leave(stage, split, SPLIT_PARTITIONS, sent)
            finally:
                split.shutdown()
        with report.step("broadcasting: two members of one group each see every message"):
            demo_basics.broadcasting(stage, split.topic, sent)
        with report.step("orderly: A and B consume orders in sequence; B is SIGKILLed mid-stream"):
            demo_orderly.crash_handover(stage)
        with report.step("delay: messages on delay level 1 and at a deliver-at time, through the forwarder"):
            demo_delay.delayed_delivery(stage)
        with report.step("transactions: one committed, one rolled back, one left UNKNOWN for the checker"):
            demo_txn.transactions(stage, CHECKER["transaction_timeout_ms"])
        with report.step("stopping the sidecars and the stack"):
            running.close()
    return report.finish()


def _start_sidecars(stage: Stage, running: ExitStack) -> None:
    """Start both sidecars and wait until each holds its partitions; consumers started later find the forwarder."""
    began = time.monotonic()
    forwarder = DelayForwarder(stage.settings, consumer_options=FAST).start()
    running.callback(forwarder.close)
    checker = TransactionChecker(stage.settings, CheckerOptions(**CHECKER, **_ownership())).start()
    running.callback(checker.stop)
    delay_partitions = len(forwarder.tiers.topics()) * forwarder.config.partitions
    ready = wait_for(lambda: len(forwarder.assignment()) == delay_partitions
                     and checker.assignment() == set(range(CHECKER["half_partitions"])), 20, 0.02)
    stage.report.check("sidecars", ready,
                       f"the forwarder holds {len(forwarder.assignment())} of {delay_partitions} delay partitions "
                       f"({len(forwarder.tiers.topics())} level and step topics), the checker "
                       f"{len(checker.assignment())} of {CHECKER['half_partitions']} half partitions, "
                       f"{time.monotonic() - began:.1f} s after start")


def _ownership() -> dict[str, object]:
    """The demo's membership and lock timings (the checker takes no consumer-only settings)."""
    return {k: v for k, v in FAST.items() if k != "consume_from_where"}
