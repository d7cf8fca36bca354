"""Queues that nothing drains on a schedule must still be bounded: memory may not grow with traffic alone."""

from __future__ import annotations

import tracemalloc

from rocketkafka.delay.metrics import ForwarderMetrics


def test_forwarder_metrics_nobody_scrapes_stay_bounded() -> None:
    """A forwarder without a Prometheus scraper forwards forever: its lateness events must not pile up.

    200,000 forwards keep well under a megabyte (each event kept would be ~40 bytes: 8 MB), and
    the counts still come out exact when someone finally asks.
    """
    metrics = ForwarderMetrics(sample_size=1000)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(200_000):
            metrics.on_forward(1000 + i)  # distinct ints: no small-int cache hides them
            if i % 10 == 0:
                metrics.on_reroute()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 1_000_000, f"{grown:,} bytes kept for 220,000 metric events"
    summary = metrics.summary()
    assert summary["forwarded"] == 200_000 and summary["rerouted"] == 20_000
