"""The chaos history checker: acknowledged sends against what handlers saw, in OpenChaos and Jepsen terms.

Two views of the consumers: *delivered* calls (every time the engine handed a message
to the listener, before the idempotent-consume helper) and *handled* calls (the
application code the helper let run). ``atMostOnce`` / ``atLeastOnce`` /
``exactlyOnce`` are given for both; the run fails on loss, reorder (or a sharding
key seen on two partitions, or two handlers of one key at once), an early delayed
message or a visible rolled-back transaction.

The exactly-once kind is judged on its output topic, as a read_committed reader sees it
(:func:`output_calls`): both views are the output, no helper is involved, and a single
duplicate fails the run.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from statistics import median
from typing import Any

from rocketkafka.config import Settings
from rocketkafka.tools.chaos.nemesis import FaultEvent
from rocketkafka.tools.chaos.traffic import Sent
from rocketkafka.testing.history import HandlerCall

#: End-to-end latency buckets (ms), as OpenChaos reports them; the last bucket is "more".
LATENCY_BUCKETS_MS = (1, 5, 10, 100, 1000, 3000)
ORDERED_KINDS = ("orderly", "keyed", "exactly-once")
EXACTLY_ONCE_KIND = "exactly-once"
EXAMPLES = 10


@dataclass
class KindVerdict:
    """The figures of one kind of traffic (field names follow OpenChaos where it has one)."""

    kind: str
    enqueueSuccessCount: int
    enqueueFailureCount: int
    expectedCount: int  # acknowledged and meant to be seen (rolled-back transactions are not)
    dequeueSuccessCount: int  # handled calls (after the helper)
    deliveryCount: int  # delivered calls (before the helper)
    lostMessageCount: int
    duplicateMessageCountBeforeHelper: int
    duplicateMessageCount: int  # after the helper
    atMostOnceBeforeHelper: bool
    atLeastOnceBeforeHelper: bool
    exactlyOnceBeforeHelper: bool
    atMostOnce: bool
    atLeastOnce: bool
    exactlyOnce: bool
    isOrder: bool | None = None  # per sharding key; None where the kind promises no order
    wrongShardingKey: int | None = None  # keys seen on more than one partition
    reorderedShardingKeys: int | None = None
    concurrentSameKeyHandlers: int | None = None  # after the helper: two handlers of one key at once
    earlyDeliveryCount: int | None = None  # delayed: delivered before the due time
    rolledBackSeenCount: int | None = None  # transactions: a rolled-back message reached a handler
    # exactly-once: output records beyond the first of one source record (an id the producer wrote at two
    # offsets is two source records: the input's duplicate, not the transaction's)
    duplicateRecordCount: int | None = None
    latencyBuckets: dict[str, int] = field(default_factory=dict)  # first delivery - born (delayed: - due)
    latencyP50Ms: float | None = None
    latencyP99Ms: float | None = None
    examples: dict[str, list[str]] = field(default_factory=dict)

    def violations(self) -> list[str]:
        bad = []
        if self.lostMessageCount:
            bad.append(f"{self.kind}: {self.lostMessageCount} lost")
        if self.isOrder is False:
            bad.append(f"{self.kind}: out of order ({self.reorderedShardingKeys} keys reordered, "
                       f"{self.wrongShardingKey} on a wrong partition, {self.concurrentSameKeyHandlers} concurrent)")
        if self.earlyDeliveryCount:
            bad.append(f"{self.kind}: {self.earlyDeliveryCount} delivered early")
        if self.rolledBackSeenCount:
            bad.append(f"{self.kind}: {self.rolledBackSeenCount} rolled-back messages seen")
        if self.duplicateRecordCount:
            bad.append(f"{self.kind}: {self.duplicateRecordCount} duplicates in the output")
        return bad


@dataclass
class FaultRecovery:
    """A fault and how long the traffic it affects took to recover (``rtoTime``, ms)."""

    fault: str
    target: str
    started: float
    healedAfterMs: int | None
    rtoTime: int | None  # None: a message sent in the window never arrived
    error: str | None = None


@dataclass
class Verdict:
    kinds: dict[str, KindVerdict]
    faults: list[FaultRecovery]
    total: dict[str, Any]

    @property
    def violations(self) -> list[str]:
        bad = [v for k in self.kinds.values() for v in k.violations()]
        bad += [f"fault {f.fault} on {f.target} did not heal: {f.error}" for f in self.faults if f.error]
        return bad

    @property
    def passed(self) -> bool:
        return not self.violations

    def as_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "violations": self.violations, "total": self.total,
                "kinds": {k: asdict(v) for k, v in self.kinds.items()}, "faults": [asdict(f) for f in self.faults]}


def source_copy(msg: Any, output: str) -> tuple[Any, str]:
    """``msg`` as a consume -> produce pipeline sends it on to ``output``, and its sharding key: the same body,
    keyed by its key (else its partition), naming its source in the ``source`` property
    (``topic:partition:offset:id``, which :func:`output_calls` reads)."""
    from rocketkafka.message import Message

    key = msg.key.decode() if msg.key else str(msg.queue_id)
    return Message(output, body=msg.body, keys=key, properties={
        "source": f"{msg.topic}:{msg.queue_id}:{msg.queue_offset}:{msg.id}"}), key


def output_calls(settings: Settings, topic: str) -> list[HandlerCall]:
    """The exactly-once kind's output topic read read_committed, as calls at their sources' places (the
    ``source`` property: ``topic:partition:offset:id``), at the output record's time."""
    from rocketkafka.testing.reading import read_all

    calls = []
    for record in read_all(settings.bootstrap_servers, topic, timeout=60, config=settings.client_properties()):
        source = dict(record.headers() or []).get("source")
        if source is None:
            continue
        source_topic, partition, offset, msg_id = source.decode().rsplit(":", 3)
        at = record.timestamp()[1] / 1000
        calls.append(HandlerCall("output", source_topic, int(partition), int(offset), msg_id,
                                 record.key().decode() if record.key() else None, at, at))
    return calls


def judge(sent: Iterable[Sent], failed: Mapping[str, int], delivered: Mapping[str, list[HandlerCall]],
          handled: Mapping[str, list[HandlerCall]], faults: Iterable[FaultEvent], traffic_end: float) -> Verdict:
    """Check one run. ``delivered``/``handled`` map each kind to its consumers' calls."""
    by_kind: dict[str, list[Sent]] = defaultdict(list)
    for s in sent:
        by_kind[s.kind].append(s)
    kinds = sorted(set(by_kind) | set(delivered) | set(handled))
    firsts = {k: _first_delivery(delivered.get(k, [])) for k in kinds}
    verdicts = {k: _judge_kind(k, by_kind[k], failed.get(k, 0), delivered.get(k, []), handled.get(k, []), firsts[k])
                for k in kinds}
    recoveries = _recoveries(list(faults), traffic_end, by_kind, firsts)
    return Verdict(verdicts, recoveries, _total(verdicts))


def _judge_kind(kind: str, sent: list[Sent], failed: int, delivered: list[HandlerCall],
                handled: list[HandlerCall], first: dict[str, HandlerCall]) -> KindVerdict:
    sent_ids = {s.msg_id: s for s in sent}
    expected = {m for m, s in sent_ids.items() if s.expected}
    rolled_back = {m for m, s in sent_ids.items() if not s.expected}
    before, after = Counter(c.msg_id for c in delivered), Counter(c.msg_id for c in handled)
    lost = sorted(expected - after.keys())
    dup_before = sum(n - 1 for m, n in before.items() if m in sent_ids)
    dup_after = sum(n - 1 for m, n in after.items() if m in sent_ids)
    lost_before = len(expected - before.keys())
    v = KindVerdict(
        kind=kind, enqueueSuccessCount=len(sent), enqueueFailureCount=failed, expectedCount=len(expected),
        dequeueSuccessCount=sum(after.values()), deliveryCount=sum(before.values()), lostMessageCount=len(lost),
        duplicateMessageCountBeforeHelper=dup_before, duplicateMessageCount=dup_after,
        atMostOnceBeforeHelper=dup_before == 0, atLeastOnceBeforeHelper=lost_before == 0,
        exactlyOnceBeforeHelper=dup_before == 0 and lost_before == 0,
        atMostOnce=dup_after == 0, atLeastOnce=not lost, exactlyOnce=dup_after == 0 and not lost)
    v.examples["lost"] = lost[:EXAMPLES]
    v.examples["duplicated"] = [m for m, n in after.items() if n > 1][:EXAMPLES]
    if kind in ORDERED_KINDS:
        _judge_order(v, sent_ids, delivered, handled, first)
    if kind == "delayed":
        early = sorted({c.msg_id for c in delivered
                        if c.msg_id in sent_ids and c.enter * 1000 < sent_ids[c.msg_id].due_ms})
        v.earlyDeliveryCount = len(early)
        v.examples["early"] = early[:EXAMPLES]
    if kind == EXACTLY_ONCE_KIND:
        records = Counter((c.topic, c.partition, c.offset) for c in delivered if c.msg_id in sent_ids)
        v.duplicateRecordCount = sum(n - 1 for n in records.values())
    if kind == "txn":
        seen = sorted(rolled_back & before.keys())
        v.rolledBackSeenCount = len(seen)
        v.examples["rolledBackSeen"] = seen[:EXAMPLES]
    latencies = sorted(_latency_ms(sent_ids[m], call) for m, call in first.items() if m in sent_ids)
    v.latencyBuckets = latency_buckets(latencies)
    if latencies:
        v.latencyP50Ms = latencies[len(latencies) // 2]
        v.latencyP99Ms = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return v


def _judge_order(v: KindVerdict, sent: dict[str, Sent], delivered: list[HandlerCall], handled: list[HandlerCall],
                 first: dict[str, HandlerCall]) -> None:
    """Per sharding key: first deliveries in send order, one partition, never two handlers at once."""
    per_key: dict[str, list[tuple[float, int, str]]] = defaultdict(list)
    partitions: dict[str, set[int]] = defaultdict(set)
    for m, call in first.items():
        if m in sent:
            per_key[sent[m].key].append((call.enter, sent[m].seq, m))
    for c in delivered:
        if c.msg_id in sent:
            partitions[sent[c.msg_id].key].add(c.partition)
    reordered = []
    for key, items in per_key.items():
        items.sort()
        seqs = [seq for _, seq, _ in items]
        if any(b < a for a, b in zip(seqs, seqs[1:])):
            reordered.append(key)
    wrong = sorted(k for k, ps in partitions.items() if len(ps) > 1)
    overlaps = _overlaps([c for c in handled if c.msg_id in sent], lambda c: sent[c.msg_id].key)
    v.reorderedShardingKeys, v.wrongShardingKey, v.concurrentSameKeyHandlers = len(reordered), len(wrong), len(overlaps)
    v.isOrder = not (reordered or wrong or overlaps)
    v.examples["reorderedKeys"] = reordered[:EXAMPLES]
    v.examples["wrongShardingKey"] = wrong[:EXAMPLES]
    v.examples["concurrentSameKey"] = overlaps[:EXAMPLES]


def _overlaps(calls: list[HandlerCall], key_of) -> list[str]:
    per_key: dict[str, list[HandlerCall]] = defaultdict(list)
    for c in calls:
        per_key[key_of(c)].append(c)
    bad = []
    for key, items in per_key.items():
        items.sort(key=lambda c: c.enter)
        for a, b in zip(items, items[1:]):
            if b.enter < a.exit:
                bad.append(f"{key}: {a.consumer}@{a.partition}/{a.offset} and {b.consumer}@{b.partition}/{b.offset}")
    return bad


def _first_delivery(calls: list[HandlerCall]) -> dict[str, HandlerCall]:
    first: dict[str, HandlerCall] = {}
    for c in calls:
        if c.msg_id not in first or c.enter < first[c.msg_id].enter:
            first[c.msg_id] = c
    return first


def _latency_ms(sent: Sent, call: HandlerCall) -> float:
    reference = sent.due_ms if sent.due_ms is not None else sent.born_ms
    return call.enter * 1000 - reference


def latency_buckets(latencies_ms: Iterable[float]) -> dict[str, int]:
    """Counts per OpenChaos bucket: ``<=1``, ``<=5`` ... ``<=3000``, ``>3000`` (ms)."""
    counts = [0] * (len(LATENCY_BUCKETS_MS) + 1)
    for ms in latencies_ms:
        counts[min(bisect_right(LATENCY_BUCKETS_MS, max(ms, 0) - 1e-9), len(LATENCY_BUCKETS_MS))] += 1
    names = [f"<={b}ms" for b in LATENCY_BUCKETS_MS] + [f">{LATENCY_BUCKETS_MS[-1]}ms"]
    return dict(zip(names, counts))


def _recoveries(faults: list[FaultEvent], traffic_end: float, sent: Mapping[str, list[Sent]],
                firsts: Mapping[str, dict[str, HandlerCall]]) -> list[FaultRecovery]:
    """``rtoTime``: for messages sent (delayed: due) between a fault and the next one, the worst end-to-end
    latency above the kind's median -- how much longer than usual the fault made them wait."""
    out = []
    baselines: dict[tuple[str, bool], float | None] = {}  # (kind, a checker fault?) -> median latency
    for i, f in enumerate(faults):
        end = faults[i + 1].started if i + 1 < len(faults) else traffic_end
        worst: float | None = 0.0
        for kind in f.affects:
            chosen = [s for s in sent.get(kind, []) if _counts_for(f, s)]
            first = firsts.get(kind, {})
            key = (kind, _checker_fault(f))
            if key not in baselines:
                usual = [_latency_ms(s, first[s.msg_id]) for s in chosen if s.msg_id in first]
                baselines[key] = median(usual) if usual else None
            baseline = baselines[key]
            window = [s for s in chosen if f.started * 1000 <= (s.due_ms or s.born_ms) < end * 1000]
            if baseline is None or not window:
                continue
            if any(s.msg_id not in first for s in window):
                worst = None
                break
            worst = max(worst, max(_latency_ms(s, first[s.msg_id]) for s in window) - baseline)
        out.append(FaultRecovery(f.fault, f.target, f.started,
                                 int((f.healed - f.started) * 1000) if f.healed else None,
                                 None if worst is None else int(worst), f.error))
    return out


def _counts_for(fault: FaultEvent, s: Sent) -> bool:
    """Which messages measure a fault: rolled-back never arrive; undecided transactions wait for the
    checker by design, so they measure the checker's faults and only those."""
    if not s.expected:
        return False
    if s.fate is None:
        return True
    return (s.fate == "unknown-commit") == _checker_fault(fault)


def _checker_fault(fault: FaultEvent) -> bool:
    return fault.fault.endswith("-checker")


def _total(kinds: Mapping[str, KindVerdict]) -> dict[str, Any]:
    sums = {name: sum(getattr(v, name) for v in kinds.values()) for name in (
        "enqueueSuccessCount", "enqueueFailureCount", "expectedCount", "dequeueSuccessCount", "deliveryCount",
        "lostMessageCount", "duplicateMessageCountBeforeHelper", "duplicateMessageCount")}
    flags = {name: all(getattr(v, name) for v in kinds.values()) for name in (
        "atMostOnceBeforeHelper", "atLeastOnceBeforeHelper", "exactlyOnceBeforeHelper",
        "atMostOnce", "atLeastOnce", "exactlyOnce")}
    ordered = [v for v in kinds.values() if v.isOrder is not None]
    buckets: Counter = Counter()
    for v in kinds.values():
        buckets.update(v.latencyBuckets)
    return {**sums, **flags, "isOrder": all(v.isOrder for v in ordered) if ordered else None,
            "wrongShardingKey": sum(v.wrongShardingKey or 0 for v in ordered),
            "earlyDeliveryCount": sum(v.earlyDeliveryCount or 0 for v in kinds.values()),
            "rolledBackSeenCount": sum(v.rolledBackSeenCount or 0 for v in kinds.values()),
            "latencyBuckets": {name: buckets[name] for name in latency_buckets([])}}
