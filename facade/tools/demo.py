"""The scripted demo behind ``rocketkafka demo``: the main job on the embedded stack.

It starts a private broker and three Redis nodes, then shows in turn: sending with
tags and keys, a tag-filtered consumer, two clustering consumers splitting the
partitions, two broadcasting consumers each seeing everything, and a third
consumer joining and one leaving while messages flow, with a check that nothing
was lost or consumed twice.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter, defaultdict

import click

from rocketkafka.admin import TopicAdmin
from rocketkafka.testing.devstack import DevStack
from rocketkafka.message import Message, MessageModel
from rocketkafka.producer import Producer


def _step(title: str) -> None:
    click.secho(f"\n== {title}", bold=True)


def _wait(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def run_demo(messages: int = 200) -> None:
    """Run every step; raises SystemExit(1) when a check fails."""
    from rocketkafka.ordering.push_consumer import PushConsumer

    failures: list[str] = []
    logging.getLogger("rocketkafka.rdkafka").setLevel(logging.CRITICAL)  # clients outliving the stack just complain
    _step("starting the embedded stack (Tansu broker + 3 Redis nodes)")
    with DevStack(redis_nodes=3) as stack:
        settings = stack_settings(stack)
        click.echo(f"broker {stack.bootstrap_servers}, redis {', '.join(stack.redis_urls)}")
        topic = f"demo-orders-{uuid.uuid4().hex[:6]}"
        TopicAdmin(settings).create(topic, partitions=8)
        fast = {"consume_from_where": "CONSUME_FROM_FIRST_OFFSET",  # each step sends first, then consumes
                "heartbeat_interval_ms": 200, "member_timeout_ms": 2000, "lock_lease_ms": 3000,
                "lock_renew_interval_ms": 1000, "lock_client_expiry_ms": 2000, "rebalance_interval_ms": 2000}

        _step(f"producing {messages} messages with tags TagA/TagB/TagC and keys")
        ids: dict[str, str] = {}
        with Producer("demo-producer", settings=settings) as producer:
            for i in range(messages):
                tag = "TagA TagB TagC".split()[i % 3]
                result = producer.send_sync(Message(topic, body=f"order {i}".encode(), tags=tag, keys=[f"order-{i}"]))
                ids[result.msg_id] = tag
            click.echo(f"sent {len(ids)}; last result: {result}")

        _step('a consumer subscribed with "TagA || TagB" (TagC is filtered out, its offsets still commit)')
        seen: list[str] = []
        tag_consumer = PushConsumer(f"demo-tags-{uuid.uuid4().hex[:4]}", settings=settings, **fast)
        tag_consumer.subscribe(topic, lambda m: seen.append(m.tags), expression="TagA || TagB")
        tag_consumer.start()
        expected_ab = sum(1 for t in ids.values() if t != "TagC")
        _wait(lambda: len(seen) >= expected_ab)
        tag_consumer.shutdown()
        click.echo(f"received {dict(Counter(seen))} (expected {expected_ab} TagA/TagB, 0 TagC)")
        if len(seen) != expected_ab or "TagC" in seen:
            failures.append("tag filter")

        _step("clustering: two consumers of one group split the 8 partitions")
        group = f"demo-cluster-{uuid.uuid4().hex[:4]}"
        got: dict[str, list[str]] = defaultdict(list)
        lock = threading.Lock()

        def handler(name):
            def handle(msg):
                with lock:
                    got[name].append(msg.id)
            return handle

        members = {}
        for name in ("c1", "c2"):
            members[name] = PushConsumer(group, settings=settings, **fast)
            members[name].subscribe(topic, handler(name))
            members[name].start()
        _wait(lambda: sum(len(v) for v in got.values()) >= messages)
        for name, c in members.items():
            click.echo(f"{name} owns partitions {sorted(p for _, p in c.assignment() if _ == topic)}, consumed {len(got[name])}")

        _step("a third consumer joins, then c1 leaves, while 2x more messages flow")
        members["c3"] = PushConsumer(group, settings=settings, **fast)
        members["c3"].subscribe(topic, handler("c3"))
        sent_later: list[str] = []
        with Producer("demo-producer", settings=settings) as producer:
            members["c3"].start()
            for i in range(messages):
                sent_later.append(producer.send_sync(Message(topic, body=b"more", tags="TagA")).msg_id)
            members["c1"].shutdown()
            for i in range(messages):
                sent_later.append(producer.send_sync(Message(topic, body=b"more", tags="TagA")).msg_id)
        total = messages + len(sent_later)
        _wait(lambda: sum(len(v) for v in got.values()) >= total)
        time.sleep(1.0)  # let any duplicate show up before judging
        for name in ("c2", "c3"):
            click.echo(f"{name} now owns {sorted(p for t, p in members[name].assignment() if t == topic)}")
        counts = Counter(i for v in got.values() for i in v)
        lost = set(ids) | set(sent_later)
        lost -= counts.keys()
        dups = sum(n - 1 for n in counts.values() if n > 1)
        click.echo(f"consumed per member {({k: len(v) for k, v in got.items()})}; lost {len(lost)}, duplicates {dups}")
        if lost or dups:
            failures.append("join/leave")
        for name in ("c2", "c3"):
            members[name].shutdown()

        _step("broadcasting: two consumers each see every message")
        bcast: dict[str, int] = Counter()
        group = f"demo-bcast-{uuid.uuid4().hex[:4]}"
        consumers = []
        for name in ("b1", "b2"):
            c = PushConsumer(group, settings=settings, message_model=MessageModel.BROADCASTING, **fast)
            c.subscribe(topic, lambda m, n=name: bcast.update([n]))
            c.start()
            consumers.append(c)
        _wait(lambda: min(bcast["b1"], bcast["b2"]) >= total)
        for c in consumers:
            c.shutdown()
        click.echo(f"b1 saw {bcast['b1']}, b2 saw {bcast['b2']} of {total}")
        if bcast["b1"] != total or bcast["b2"] != total:
            failures.append("broadcasting")

    _step("stack stopped")
    if failures:
        click.secho(f"demo checks failed: {failures}", fg="red")
        raise SystemExit(1)
    click.secho("all demo checks passed", fg="green")


def stack_settings(stack: DevStack):
    from rocketkafka.config import Settings

    return Settings(bootstrap_servers=stack.bootstrap_servers, redis_urls=stack.redis_urls)
