"""Prometheus series of the transaction checker, read from its stats at scrape time.

Series:

- ``rocketkafka_txn_halves_open``: halves fetched and not decided yet (gauge);
- ``rocketkafka_txn_halves_ended_total{state="committed"|"rolled_back"}``: transactions
  ended, as the op records read show;
- ``rocketkafka_txn_halves_decided_total{decision=...}``: halves a scan decided --
  ``done`` (an op closed it), ``closed`` (an op closed another copy, or an end marker),
  ``checked`` (re-written with one more check, then checked back), ``max_checked``
  (moved to the max-check topic: the checker's dead letters), ``malformed``;
- ``rocketkafka_txn_checks_sent_total``, ``rocketkafka_txn_check_requests_lost_total``;
- ``rocketkafka_txn_ops_waiting`` (ops read whose halves lie ahead), ``rocketkafka_txn_scans_total``,
  ``rocketkafka_txn_commits_total``, ``rocketkafka_txn_resets_total``;
- ``rocketkafka_txn_lock_owned{partition}`` (1/0 per half partition) and
  ``rocketkafka_txn_lock_renew_failures_total``.

The checker's loop only bumps integers it kept anyway; everything else is computed here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from rocketkafka.metrics_endpoint import MetricsEndpoint
from rocketkafka.txn.stats import CheckerStats


class CheckerMetrics(MetricsEndpoint):
    """The collector of one checker, in its own :class:`~prometheus_client.CollectorRegistry` (:attr:`registry`).

    Parameters:
        stats: the checker's counters and gauges now.
        owned: the half partitions the checker holds now.
        partitions: how many half partitions there are.
    """

    def __init__(self, stats: Callable[[], CheckerStats], owned: Callable[[], set[int]],
                 partitions: Callable[[], int]) -> None:
        self._stats, self._owned, self._partitions = stats, owned, partitions
        self.registry = CollectorRegistry()
        self.registry.register(self)

    def collect(self) -> Iterator[Metric]:
        """The Prometheus collector protocol."""
        s = self._stats()
        yield GaugeMetricFamily("rocketkafka_txn_halves_open", "halves fetched and not decided yet",
                                value=s.buffered_halves)
        ended = CounterMetricFamily("rocketkafka_txn_halves_ended", "transactions ended, as op records show",
                                    labels=["state"])
        ended.add_metric(["committed"], s.ended_commit)
        ended.add_metric(["rolled_back"], s.ended_rollback)
        yield ended
        decided = CounterMetricFamily("rocketkafka_txn_halves_decided", "halves decided by a scan; checked: "
                                      "re-written and checked back, max_checked: moved to the max-check topic",
                                      labels=["decision"])
        for decision, n in (("done", s.done_by_op), ("closed", s.closed_by_transaction + s.closed_by_marker),
                            ("checked", s.rewritten), ("max_checked", s.max_checked), ("malformed", s.malformed)):
            decided.add_metric([decision], n)
        yield decided
        for name, doc, value in (
                ("checks_sent", "check requests sent to producer groups", s.checks_sent),
                ("check_requests_lost", "check requests that could not be written", s.check_requests_lost),
                ("scans", "scans of half partitions begun", s.scans),
                ("commits", "half/op progress commits", s.commits),
                ("resets", "partitions reset to their committed progress after a failed write", s.resets),
                ("lock_renew_failures", "partition locks lost because a renewal failed or came too late",
                 s.locks_lost)):
            yield CounterMetricFamily(f"rocketkafka_txn_{name}", doc, value=value)
        yield GaugeMetricFamily("rocketkafka_txn_ops_waiting", "op records read whose halves lie ahead",
                                value=s.waiting_ops)
        owned = GaugeMetricFamily("rocketkafka_txn_lock_owned", "1 while this instance holds the half partition",
                                  labels=["partition"])
        mine = self._owned()
        for p in range(self._partitions()):
            owned.add_metric([str(p)], 1 if p in mine else 0)
        yield owned
