"""Forwarder metrics: Prometheus series plus an in-process summary for tests and the benchmark.

The hot path only appends to a deque (atomic, no lock); counts and the lateness
histogram are folded in when Prometheus scrapes or :meth:`ForwarderMetrics.summary`
is asked, or by the hot path itself once :data:`FOLD_AT` events wait, so a forwarder
nobody scrapes keeps a bounded deque. Each forwarder owns its :class:`~prometheus_client.CollectorRegistry`, so
several forwarders in one process (tests) never clash; ``metrics_port`` serves it.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import deque

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

from rocketkafka.metrics_endpoint import MetricsEndpoint

#: Lateness buckets (ms): the target is p99 < 50 ms.
LATENESS_BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 30_000)
_HOP = -(1 << 62)  # marks a re-route in the event deque (lateness values are > this)
#: Events waiting in the deque before the hot path folds them itself (bounds memory without scrapes).
FOLD_AT = 10_000


class ForwarderMetrics(MetricsEndpoint):
    """Forwarded, re-routed and dead-lettered counts and lateness (forwarding time - due time, ms).

    Series: ``rocketkafka_delay_forwarded_total``, ``rocketkafka_delay_rerouted_total``,
    ``rocketkafka_delay_dead_lettered_total`` and the histogram ``rocketkafka_delay_lateness_seconds``;
    the forwarder adds its consumer's ``rocketkafka_consumer_*`` series (lag, locks) to :attr:`registry`.
    """

    def __init__(self, sample_size: int = 100_000) -> None:
        self._events: deque[int] = deque()
        self._lock = threading.Lock()  # folding only
        self._samples: deque[int] = deque(maxlen=sample_size)
        self._buckets = [0] * (len(LATENESS_BUCKETS_MS) + 1)
        self._late_sum_ms = 0
        self.counts = {"forwarded": 0, "rerouted": 0, "dead_lettered": 0}
        self.registry = CollectorRegistry()
        self.registry.register(self)

    # -- hot path (any thread) ---------------------------------------------------------
    def on_forward(self, late_ms: int) -> None:
        """Count a record delivered to its real topic ``late_ms`` after it was due."""
        self._events.append(late_ms)
        if len(self._events) > FOLD_AT:
            self._fold()

    def on_forward_many(self, late_ms: list[int]) -> None:
        """:meth:`on_forward` for each of ``late_ms`` (a batch's records, one call)."""
        self._events.extend(late_ms)
        if len(self._events) > FOLD_AT:
            self._fold()

    def on_reroute(self) -> None:
        """Count a record moved on to its next delay topic (a hop)."""
        self._events.append(_HOP)
        if len(self._events) > FOLD_AT:
            self._fold()

    def on_dead_letter(self, reason: str) -> None:
        """Count a record sent to the dead-letter topic (``reason``: why)."""
        with self._lock:
            self.counts["dead_lettered"] += 1

    # -- readers -----------------------------------------------------------------------
    def _fold(self) -> None:
        with self._lock:
            events = self._events
            while events:
                late = events.popleft()
                if late == _HOP:
                    self.counts["rerouted"] += 1
                    continue
                self.counts["forwarded"] += 1
                self._samples.append(late)
                self._buckets[bisect_left(LATENESS_BUCKETS_MS, late)] += 1
                self._late_sum_ms += late

    def summary(self) -> dict[str, float]:
        """Counts and lateness percentiles (ms) over the most recent samples."""
        self._fold()
        with self._lock:
            samples = sorted(self._samples)
            out: dict[str, float] = dict(self.counts)
        if samples:
            out.update(p50_ms=samples[len(samples) // 2], p99_ms=samples[min(len(samples) - 1, int(len(samples) * 0.99))],
                       max_ms=samples[-1])
        return out

    def collect(self):
        """The Prometheus collector protocol."""
        self._fold()
        with self._lock:
            counts, buckets, total = dict(self.counts), list(self._buckets), self._late_sum_ms
        for name, doc in (("forwarded", "records delivered to their real topic"),
                          ("rerouted", "records moved to their next delay topic (hops)"),
                          ("dead_lettered", "records that could not be forwarded, sent to the DLQ")):
            yield CounterMetricFamily(f"rocketkafka_delay_{name}", doc, value=counts[name])
        cumulative, running = [], 0
        for bound, n in zip([*(f"{b / 1000:g}" for b in LATENESS_BUCKETS_MS), "+Inf"], buckets):
            running += n
            cumulative.append((bound, running))
        yield HistogramMetricFamily("rocketkafka_delay_lateness_seconds", "forwarding time minus due time",
                                    buckets=cumulative, sum_value=total / 1000)
