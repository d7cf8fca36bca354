"""Trace events of the delay forwarder (``DelayForwarder(trace=True)``): ``FORWARDED`` and ``HOPPED``.

:class:`TracedProducer` stands between the forwarding loop and its Kafka producer: every
record the loop hands over is either delivered to its real topic (``FORWARDED``) or moved
to the next delay topic (``HOPPED``), and the event says which. The forwarder uses it
only with tracing on; off, the loop talks to the producer directly.
"""

from __future__ import annotations

from typing import Any

from rocketkafka.names import Header
from rocketkafka.schedule.tiers import Tiers
from rocketkafka.trace import FORWARDED, HOPPED, Tracer

_WATCHED = (Header.MSG_ID, Header.DELIVER_AT, Header.DELAY_LEVEL, Header.RECONSUME_TIMES)


class TracedProducer:
    """A confluent-kafka producer whose ``produce`` also emits the record's trace event."""

    def __init__(self, producer: Any, tracer: Tracer, tiers: Tiers) -> None:
        self._producer, self._tracer, self._tiers = producer, tracer, tiers

    def produce(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> None:
        self._producer.produce(topic, value, key, **kwargs)  # first: a BufferError leaves no event behind
        h = {k: v.decode("utf-8", "replace") for k, v in kwargs.get("headers") or () if k in _WATCHED and v}
        msg_id = h.get(Header.MSG_ID)
        if msg_id is None:
            return
        due = h.get(Header.DELIVER_AT)
        tier = self._tiers.by_topic.get(topic)
        self._tracer.emit(HOPPED if tier is not None else FORWARDED, msg_id, to_topic=topic,
                          to_partition=kwargs.get("partition"), due=int(due) if due and due.isdigit() else None,
                          level=tier.level if tier is not None else None)

    def __getattr__(self, name: str) -> Any:  # poll, flush, len: the producer's own
        return getattr(self._producer, name)
