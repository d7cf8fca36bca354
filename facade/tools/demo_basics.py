"""The demo's everyday steps: tags and keys, a tag filter, clustering members splitting partitions, a join and a
leave under traffic, broadcasting.

Each claim about ownership is printed after the members' assignments show it, never before.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict

from rocketkafka.message import Message, MessageModel, SendResult
from rocketkafka.ordering.consumers.push_consumer import PushConsumer
from rocketkafka.producer import Producer
from rocketkafka.testing.waiting import wait_for
from rocketkafka.tools.demo_stage import FAST, Stage

TAGS = ("TagA", "TagB", "TagC")


def owned(consumer: PushConsumer, topic: str) -> list[int]:
    """The partitions of ``topic`` the member holds now (its retry topic left out)."""
    return sorted(p for t, p in consumer.assignment() if t == topic)


def split_settled(members: list[PushConsumer], topic: str, partitions: int) -> bool:
    """Every partition held by exactly one member, and the members' shares differ by at most one."""
    shares = [owned(m, topic) for m in members]
    held = [p for share in shares for p in share]
    sizes = [len(s) for s in shares]
    return sorted(held) == list(range(partitions)) and max(sizes) - min(sizes) <= 1


def acked(producer: Producer, messages: list[Message]) -> list[SendResult]:
    """Send asynchronously (the bulk path: one sync send waits out the linger) and wait for every ack."""
    results: dict[int, SendResult] = {}
    errors: list[Exception] = []
    for i, msg in enumerate(messages):
        producer.send_async(msg, lambda r, i=i: results.__setitem__(i, r), errors.append)
    left = producer.flush(30)
    if left or errors or len(results) != len(messages):
        raise RuntimeError(f"{len(messages) - len(results)} of {len(messages)} sends not acknowledged: {errors[:1]}")
    return [results[i] for i in range(len(messages))]


def tags_and_filter(stage: Stage) -> None:
    """Send tagged, keyed messages; a consumer with ``TagA || TagB`` gets exactly those."""
    report, count = stage.report, stage.messages
    topic = stage.topic("demo-tags", 8)
    with Producer(stage.name("demo-producer"), settings=stage.settings) as producer:
        results = acked(producer, [Message(topic, body=f"order {i}".encode(), tags=TAGS[i % 3], keys=[f"order-{i}"])
                                   for i in range(count)])
    tag_of = {r.msg_id: TAGS[i % 3] for i, r in enumerate(results)}
    last = results[-1]
    report.note(f"sent {count} to {topic} (8 partitions); the last is {last.msg_id} at queue {last.queue_id}, "
                f"offset {last.offset}")
    seen: list[str] = []
    consumer = PushConsumer(stage.name("demo-tags"), settings=stage.settings, **FAST)
    consumer.subscribe(topic, lambda m: seen.append(m.tags), expression="TagA || TagB")
    consumer.start()
    wanted = sum(1 for t in tag_of.values() if t != "TagC")
    try:
        wait_for(lambda: len(seen) >= wanted, 20)
        time.sleep(0.3)  # a TagC delivered late would show up here
    finally:
        consumer.shutdown()
    report.check("tag filter", len(seen) == wanted and "TagC" not in seen,
                 f"received {dict(sorted(Counter(seen).items()))}: {wanted} TagA/TagB expected, no TagC")


class Members:
    """Clustering members of one group on one topic, recording which member handled which message."""

    def __init__(self, stage: Stage, topic: str, **options: object) -> None:
        self.stage, self.topic, self.options = stage, topic, options
        self.group = stage.name("demo-cluster")
        self.by_name: dict[str, PushConsumer] = {}
        self.handled: dict[str, list[tuple[int, str]]] = defaultdict(list)
        self._lock = threading.Lock()

    def start(self, name: str) -> PushConsumer:
        consumer = PushConsumer(self.group, settings=self.stage.settings, **{**FAST, **self.options})
        consumer.subscribe(self.topic, lambda m: self._record(name, m.queue_id, m.id))
        consumer.start()
        self.by_name[name] = consumer
        return consumer

    def _record(self, name: str, partition: int, msg_id: str) -> None:
        with self._lock:
            self.handled[name].append((partition, msg_id))

    def ids(self) -> Counter[str]:
        with self._lock:
            return Counter(m for calls in self.handled.values() for _, m in calls)

    def shutdown(self) -> None:
        for consumer in self.by_name.values():
            consumer.shutdown()  # idempotent: c1 left already


def clustering(stage: Stage, members: Members, partitions: int) -> list[str]:
    """c1 holds every partition; c2 joins and the split settles; only then messages are sent. The ids sent."""
    report, topic = stage.report, members.topic
    c1 = members.start("c1")
    if not wait_for(lambda: owned(c1, topic) == list(range(partitions)), 15, 0.01):
        report.check("split", False, f"c1 alone never held all {partitions} partitions: {owned(c1, topic)}")
        return []
    report.note(f"c1 alone holds {owned(c1, topic)}")
    joined = time.monotonic()
    c2 = members.start("c2")
    settled = wait_for(lambda: split_settled([c1, c2], topic, partitions), 15, 0.01)
    took = time.monotonic() - joined
    shares = {n: owned(c, topic) for n, c in members.by_name.items()}
    if not report.check("split", settled, f"c2 joined; {took:.2f} s later c1 holds {shares['c1']}, "
                                          f"c2 holds {shares['c2']}"):
        return []
    with Producer(stage.name("demo-producer"), settings=stage.settings) as producer:
        messages = [Message(topic, body=f"split {i}".encode(), tags="TagA", keys=[f"order-{i}"])
                    for i in range(stage.messages)]
        sent = [r.msg_id for r in acked(producer, messages)]
    wait_for(lambda: members.ids().keys() >= set(sent), 20)
    strays = [(n, p) for n, calls in members.handled.items() for p, _ in calls if p not in shares[n]]
    per_member = {n: len(calls) for n, calls in sorted(members.handled.items())}
    report.check("clustering", not strays and sum(per_member.values()) == len(sent) == len(members.ids()),
                 f"{len(sent)} sent after the split: consumed {per_member}, each only from its own partitions")
    return sent


class Flow:
    """A steady stream of messages from a background thread (10 every 20 ms) until :meth:`stop`."""

    def __init__(self, stage: Stage, topic: str) -> None:
        self.producer = Producer(stage.name("demo-producer"), settings=stage.settings)
        self.producer.start()
        self.topic = topic
        self.ids: list[str] = []
        self.errors: list[Exception] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-flow", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(0.02):
            for _ in range(10):
                self.producer.send_async(Message(self.topic, body=f"flow {n}".encode(), tags="TagA", keys=[f"flow-{n}"]),
                                         lambda r: self.ids.append(r.msg_id), self.errors.append)
                n += 1
            self.producer.poll(0)

    def stop(self) -> list[str]:
        """Stop sending, wait for every ack; the ids sent."""
        self._stop.set()
        self._thread.join(10)
        left = self.producer.flush(30)
        self.producer.shutdown()
        if left or self.errors:
            raise RuntimeError(f"{left} sends unacknowledged, {len(self.errors)} failed: {self.errors[:1]}")
        return self.ids


def join_and_leave(stage: Stage, members: Members, partitions: int, earlier: list[str]) -> list[str]:
    """While messages flow, c3 joins, then c1 leaves (gracefully): nothing lost, nothing twice. All ids sent."""
    report, topic = stage.report, members.topic
    c1, c2 = members.by_name["c1"], members.by_name["c2"]
    before = {name: len(calls) for name, calls in members.handled.items()}
    flow = Flow(stage, topic)
    try:
        wait_for(lambda: len(members.ids()) >= len(earlier) + 50, 10, 0.01)  # flowing before anyone joins
        joined = time.monotonic()
        c3 = members.start("c3")
        settled = wait_for(lambda: split_settled([c1, c2, c3], topic, partitions), 15, 0.01)
        report.check("join", settled, f"c3 joined; {time.monotonic() - joined:.2f} s later c1 holds "
                                      f"{owned(c1, topic)}, c2 {owned(c2, topic)}, c3 {owned(c3, topic)}")
        left = time.monotonic()
        c1.shutdown()  # graceful: finish in-flight handlers, commit, unlock, leave
        settled = wait_for(lambda: split_settled([c2, c3], topic, partitions), 15, 0.01)
        report.check("leave", settled, f"c1 left; {time.monotonic() - left:.2f} s later c2 holds "
                                       f"{owned(c2, topic)}, c3 {owned(c3, topic)}")
        time.sleep(0.3)  # the survivors consume the flow for a moment
    finally:
        flowed = flow.stop()
    sent = earlier + flowed
    wait_for(lambda: members.ids().keys() >= set(sent), 20)
    time.sleep(0.5)  # a duplicate would show up here
    counts = members.ids()
    lost = len(set(sent) - counts.keys())
    twice = sum(n - 1 for n in counts.values() if n > 1)
    meanwhile = {n: len(calls) - before.get(n, 0) for n, calls in sorted(members.handled.items())}
    report.check("no loss, no duplicates", lost == 0 and twice == 0,
                 f"{len(flowed)} sent meanwhile, consumed by {meanwhile}; of all {len(sent)} lost {lost}, "
                 f"duplicates {twice}")
    return sent


def broadcasting(stage: Stage, topic: str, sent: list[str]) -> None:
    """Two broadcasting members of one group each see every message."""
    seen: dict[str, set[str]] = {"b1": set(), "b2": set()}
    group = stage.name("demo-bcast")
    consumers = []
    for name in seen:
        consumer = PushConsumer(group, settings=stage.settings, message_model=MessageModel.BROADCASTING, **FAST)
        consumer.subscribe(topic, lambda m, n=name: seen[n].add(m.id))
        consumer.start()
        consumers.append(consumer)
    try:
        wait_for(lambda: all(s >= set(sent) for s in seen.values()), 20)
    finally:
        for consumer in consumers:
            consumer.shutdown()
    stage.report.check("broadcasting", all(s == set(sent) for s in seen.values()),
                       f"b1 saw {len(seen['b1'])}, b2 saw {len(seen['b2'])} of {len(sent)}")
