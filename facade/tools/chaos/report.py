"""The verdict as text: the OpenChaos/Jepsen figures per kind, latency buckets, and recovery per fault."""

from __future__ import annotations

from rocketkafka.tools.chaos.verdict import Verdict

#: Rows of the main table: (label, field of KindVerdict).
FIGURES = (
    ("enqueueSuccessCount", "enqueueSuccessCount"),
    ("enqueueFailureCount", "enqueueFailureCount"),
    ("expected (not rolled back)", "expectedCount"),
    ("dequeueSuccessCount", "dequeueSuccessCount"),
    ("deliveries before helper", "deliveryCount"),
    ("lostMessageCount", "lostMessageCount"),
    ("duplicateMessageCount before helper", "duplicateMessageCountBeforeHelper"),
    ("duplicateMessageCount after helper", "duplicateMessageCount"),
    ("atMostOnce before / after helper", ("atMostOnceBeforeHelper", "atMostOnce")),
    ("atLeastOnce before / after helper", ("atLeastOnceBeforeHelper", "atLeastOnce")),
    ("exactlyOnce before / after helper", ("exactlyOnceBeforeHelper", "exactlyOnce")),
    ("isOrder (per sharding key)", "isOrder"),
    ("wrongShardingKey", "wrongShardingKey"),
    ("reordered sharding keys", "reorderedShardingKeys"),
    ("concurrent same-key handlers", "concurrentSameKeyHandlers"),
    ("early deliveries", "earlyDeliveryCount"),
    ("rolled-back messages seen", "rolledBackSeenCount"),
    ("latency p50 / p99 (ms)", ("latencyP50Ms", "latencyP99Ms")),
)


def _cell(v, field) -> str:
    if isinstance(field, tuple):
        return " / ".join(_cell(v, f) for f in field)
    value = getattr(v, field)
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:,.0f}"
    return f"{value:,}"


def render(verdict: Verdict) -> str:
    kinds = list(verdict.kinds.values())
    width = max(len(label) for label, _ in FIGURES)
    cols = [max(16, len(k.kind) + 2) for k in kinds]
    lines = [f"{'figure':<{width}}" + "".join(f"{k.kind:>{c}}" for k, c in zip(kinds, cols))]
    for label, field in FIGURES:
        lines.append(f"{label:<{width}}" + "".join(f"{_cell(k, field):>{c}}" for k, c in zip(kinds, cols)))
    buckets = verdict.total["latencyBuckets"]
    lines.append("")
    lines.append("end-to-end latency, all kinds (first delivery - born; delayed: - due):")
    lines.append("  " + "  ".join(f"{name} {count:,}" for name, count in buckets.items()))
    lines.append("")
    lines.append("faults (rtoTime: worst latency above the usual of messages sent during the fault window):")
    for f in verdict.faults:
        healed = f"healed in {f.healedAfterMs / 1000:.1f} s" if f.healedAfterMs is not None else f"error {f.error}"
        rto = "not recovered" if f.rtoTime is None else f"rtoTime {f.rtoTime:,} ms"
        lines.append(f"  {f.fault:<15} {f.target:<12} {healed:<18} {rto}")
    if not verdict.faults:
        lines.append("  (none injected: no faults chosen, or the run was shorter than one fault interval)")
    lines.append("")
    lines.append("PASSED" if verdict.passed else "FAILED:\n  " + "\n  ".join(verdict.violations))
    return "\n".join(lines)
