"""Reading a message's trace (``rocketkafka admin trace --id X``): its events, in the order they happened.

A message's events all sit in one partition of the trace topic (:func:`rocketkafka.trace.trace_partition`).
The read starts at the first event stored at or after the id's creation time minus a
margin (the broker's ``offsets_for_times`` when reliable, else the partition start) and
reads to the end.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rocketkafka.config import Settings
from rocketkafka.errors import ConfigError
from rocketkafka.msgid import msg_id_timestamp_ms
from rocketkafka.operations.query import Progress
from rocketkafka.operations.reading import LogReader
from rocketkafka.trace import trace_partition

#: Events are looked for from this long before the message id's creation time (clock skew, ms).
MARGIN_MS = 60_000


@dataclass(frozen=True)
class TraceEvent:
    """One step of a message's life (see :mod:`rocketkafka.trace` for the events and fields)."""

    event: str
    ts: int
    client: str | None
    fields: dict[str, Any] = field(default_factory=dict)


def trace_of(settings: Settings, msg_id: str, progress: Progress | None = None) -> list[TraceEvent]:
    """Every trace event of ``msg_id``, by time.

    Raises:
        ConfigError: no trace topic (no client traced anything) or a malformed id.
    """
    topic = settings.topics.trace()
    with LogReader(settings) as reader:
        if not reader.exists(topic):
            raise ConfigError(f"no trace topic {topic!r}: nothing was traced (Producer/PushConsumer(trace=True))")
        tps = reader.partitions(topic)
        tp = tps[trace_partition(msg_id, len(tps))]
        low, high = reader.ends([tp])[tp]
        start = low
        if len(msg_id) == 32:
            try:
                since = msg_id_timestamp_ms(msg_id) - MARGIN_MS
            except ValueError:
                raise ConfigError(f"{msg_id!r} is not a message id") from None
            if reader.times_reliable([tp], {tp: (low, high)}):
                start = reader.first_at_or_after(tp, since, low, high, trust_broker=True)
        events = []
        for record in reader.read(tp, start, high, progress):
            if record.key() != msg_id.encode():
                continue
            try:
                data = json.loads(record.value())
            except ValueError:
                continue
            events.append(TraceEvent(data.pop("event", "?"), data.pop("ts", 0), data.pop("client", None),
                                     {k: v for k, v in data.items() if v is not None and k != "msg_id"}))
    return sorted(events, key=lambda e: e.ts)
