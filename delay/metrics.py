"""Forwarder metrics: Prometheus series plus an in-process summary for tests and the benchmark.

Each forwarder owns its :class:`~prometheus_client.CollectorRegistry`, so several
forwarders in one process (tests) never clash; ``metrics_port`` serves it over HTTP.
"""

from __future__ import annotations

import threading
from collections import deque

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

#: Lateness buckets (seconds): the target is p99 < 50 ms.
LATENESS_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)


class ForwarderMetrics:
    """Counters of forwarded, re-routed and dead-lettered records and a lateness histogram.

    ``lateness`` is measured when the forwarder hands the record to the producer: now − due.
    """

    def __init__(self, sample_size: int = 100_000) -> None:
        self.registry = CollectorRegistry()
        self.forwarded = Counter("rocketkafka_delay_forwarded", "records delivered to their real topic",
                                 registry=self.registry)
        self.rerouted = Counter("rocketkafka_delay_rerouted", "records moved to their next delay topic (hops)",
                                registry=self.registry)
        self.dead_lettered = Counter("rocketkafka_delay_dead_lettered", "malformed records sent to the DLQ",
                                     ["reason"], registry=self.registry)
        self.lateness = Histogram("rocketkafka_delay_lateness_seconds", "forwarding time minus due time",
                                  buckets=LATENESS_BUCKETS, registry=self.registry)
        self._lock = threading.Lock()
        self._samples: deque[int] = deque(maxlen=sample_size)
        self.counts = {"forwarded": 0, "rerouted": 0, "dead_lettered": 0}

    def on_forward(self, late_ms: int) -> None:
        self.forwarded.inc()
        self.lateness.observe(late_ms / 1000)
        with self._lock:
            self.counts["forwarded"] += 1
            self._samples.append(late_ms)

    def on_reroute(self) -> None:
        self.rerouted.inc()
        with self._lock:
            self.counts["rerouted"] += 1

    def on_dead_letter(self, reason: str) -> None:
        self.dead_lettered.labels(reason.split(":", 1)[0][:60]).inc()
        with self._lock:
            self.counts["dead_lettered"] += 1

    def summary(self) -> dict[str, float]:
        """Counts and lateness percentiles (ms) over the most recent samples."""
        with self._lock:
            samples = sorted(self._samples)
            out: dict[str, float] = dict(self.counts)
        if samples:
            out.update(p50_ms=samples[len(samples) // 2], p99_ms=samples[min(len(samples) - 1, int(len(samples) * 0.99))],
                       max_ms=samples[-1])
        return out

    def serve(self, port: int) -> None:
        """Expose the registry on ``http://0.0.0.0:port/metrics``."""
        start_http_server(port, registry=self.registry)
