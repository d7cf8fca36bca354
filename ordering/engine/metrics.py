"""Opt-in consumer metrics (``ConsumerOptions(metrics=True)`` or ``metrics_port=...``) as Prometheus series.

Series (labels ``group``, ``topic``, ``partition`` unless noted):

- ``rocketkafka_consumer_lag``: the high watermark that came with the last fetch minus the
  next offset to handle (not ListOffsets "latest", which some brokers get wrong);
- ``rocketkafka_consumer_inflight``: records fetched and not yet handled;
- ``rocketkafka_consumer_lock_owned``: 1 while this member holds the partition's lock, 0
  while it waits for it (clustering only);
- ``rocketkafka_consumer_consumed_total``: records handled (including filtered and dead-lettered ones);
- ``rocketkafka_consumer_retried_total``, ``rocketkafka_consumer_dead_lettered_total``
  (``group``, ``topic``): copies written to the retry and dead-letter topics;
- ``rocketkafka_consumer_lock_renew_failures_total`` (``group``): locks lost because a
  renewal failed or came too late;
- ``rocketkafka_consumer_poll_thread_failures_total`` (``group``): poll threads that died
  (alert on it: such a consumer consumes nothing until restarted).

The poll thread owns the Kafka client and the partition table, so it alone reads them:
once per commit interval it publishes a :class:`PartitionSample` per partition (one
reference swap), and a scrape folds the last snapshot with the retry and lock counters.
Nothing runs per message: records are counted per finished batch by the process queue.
Each consumer owns its :class:`~prometheus_client.CollectorRegistry`, so several in one
process never clash; a sidecar registers the collector into its own registry as well.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import TopicPartition
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from rocketkafka.metrics_endpoint import MetricsEndpoint
from rocketkafka.ordering.engine.owned import PartitionState
from rocketkafka.topic_partition import TP

_PARTITION_LABELS = ["group", "topic", "partition"]
#: The metrics port every sidecar falls back to when neither its flag nor its own variable names one.
METRICS_PORT_ENV = "ROCKETKAFKA_METRICS_PORT"


def service_metrics_port(*chosen: int | None) -> int | None:
    """The first port in ``chosen`` that is set, else ``ROCKETKAFKA_METRICS_PORT``, else ``None``.

    Raises:
        ValueError: the variable is not a port number.
    """
    for port in chosen:
        if port is not None:
            return port
    raw = os.environ.get(METRICS_PORT_ENV, "").strip()
    if not raw:
        return None
    port = int(raw)
    if not 0 <= port <= 65_535:
        raise ValueError(f"{METRICS_PORT_ENV}={raw} is not a port")
    return port


@dataclass(frozen=True)
class PartitionSample:
    """One partition as the poll thread saw it at its last snapshot."""

    lag: int | None  # None: no fetch brought a high watermark yet
    inflight: int
    lock_owned: bool | None  # None: no lock (broadcasting, or the partition left)
    consumed: int  # since this process started, over every time it owned the partition


class ConsumerMetrics(MetricsEndpoint):
    """The Prometheus collector of one consumer; see the module docstring for the series.

    Parameters:
        group: the consumer group (a label of every series).

    >>> m = ConsumerMetrics("billing")
    >>> m.publish({("orders", 0): PartitionSample(lag=3, inflight=3, lock_owned=True, consumed=7)})
    >>> m.registry.get_sample_value("rocketkafka_consumer_lag",
    ...                             {"group": "billing", "topic": "orders", "partition": "0"})
    3
    """

    def __init__(self, group: str) -> None:
        self.group = group
        self._partitions: dict[TP, PartitionSample] = {}
        self._retired: dict[TP, int] = {}  # records handled under earlier ownerships (poll thread only)
        self._copies: Callable[[], dict[tuple[str, str], int]] = dict
        self._locks_lost: Callable[[], int] = lambda: 0
        self._failures: Callable[[], int] = lambda: 0
        #: Delay forwarders alive, asked at scrape time (set by a consumer whose retries need one).
        self.forwarders: Callable[[], int | None] | None = None
        self.registry = CollectorRegistry()
        self.registry.register(self)

    # -- the consumer's side -----------------------------------------------------------
    def bind(self, copies: Callable[[], dict[tuple[str, str], int]], locks_lost: Callable[[], int],
             failures: Callable[[], int] = lambda: 0) -> None:
        """Sources read at scrape time: retry/dead-letter copies per (kind, topic), locks lost, poll thread
        failures."""
        self._copies, self._locks_lost, self._failures = copies, locks_lost, failures

    def publish(self, samples: dict[TP, PartitionSample]) -> None:
        """Replace the snapshot (poll thread)."""
        self._partitions = samples

    def retired(self, tp: TP) -> int:
        """Records of ``tp`` handled under earlier ownerships (poll thread)."""
        return self._retired.get(tp, 0)

    def retire(self, tp: TP, finished: int) -> None:
        """A partition left after handling ``finished`` records (poll thread)."""
        self._retired[tp] = self._retired.get(tp, 0) + finished

    def publish_retired(self) -> None:
        """The consumer stopped: only the totals remain (poll thread)."""
        self.publish({tp: PartitionSample(None, 0, None, n) for tp, n in self._retired.items()})

    # -- readers -----------------------------------------------------------------------
    def inflight(self) -> int:
        """Records taken and not finished, over every partition, at the last snapshot (any thread)."""
        return sum(sample.inflight for sample in self._partitions.values())

    def collect(self) -> Iterator[Metric]:
        """The Prometheus collector protocol."""
        group, partitions = self.group, self._partitions
        lag = GaugeMetricFamily("rocketkafka_consumer_lag", "high watermark of the last fetch minus the next "
                                "offset to handle", labels=_PARTITION_LABELS)
        inflight = GaugeMetricFamily("rocketkafka_consumer_inflight", "records fetched and not yet handled",
                                     labels=_PARTITION_LABELS)
        owned = GaugeMetricFamily("rocketkafka_consumer_lock_owned", "1 while this member holds the "
                                  "partition lock, 0 while it waits for it", labels=_PARTITION_LABELS)
        consumed = CounterMetricFamily("rocketkafka_consumer_consumed", "records handled (filtered and "
                                       "dead-lettered ones included)", labels=_PARTITION_LABELS)
        for (topic, partition), s in sorted(partitions.items()):
            labels = [group, topic, str(partition)]
            consumed.add_metric(labels, s.consumed)
            if s.lock_owned is not None:
                owned.add_metric(labels, 1 if s.lock_owned else 0)
            if s.lock_owned is not False:  # waiting for a lock: nothing is fetched, nothing to show
                inflight.add_metric(labels, s.inflight)
                if s.lag is not None:
                    lag.add_metric(labels, s.lag)
        yield from (lag, inflight, owned, consumed)
        copies = self._copies()
        for kind, doc in (("retried", "copies written to the retry topic"),
                          ("dead_lettered", "copies written to the dead-letter topic")):
            family = CounterMetricFamily(f"rocketkafka_consumer_{kind}", doc, labels=["group", "topic"])
            for (k, topic), n in sorted(copies.items()):
                if k == kind:
                    family.add_metric([group, topic], n)
            yield family
        renew = CounterMetricFamily("rocketkafka_consumer_lock_renew_failures", "partition locks lost "
                                    "because a renewal failed or came too late", labels=["group"])
        renew.add_metric([group], self._locks_lost())
        yield renew
        failures = CounterMetricFamily("rocketkafka_consumer_poll_thread_failures", "poll threads that died "
                                       "(the consumer then consumes nothing until restarted)",
                                       labels=["group"])
        failures.add_metric([group], self._failures())
        yield failures
        if self.forwarders is not None:
            alive = self.forwarders()
            if alive is not None:  # no Redis node answered: no sample rather than a false 0
                forwarders = GaugeMetricFamily("rocketkafka_consumer_delay_forwarders_alive",
                                               "delay forwarders announced in Redis; 0 means retries with "
                                               "back-off wait in the delay topics", labels=["group"])
                forwarders.add_metric([group], alive)
                yield forwarders


def publish_states(metrics: ConsumerMetrics, states: Iterable[PartitionState], kafka: Any,
                   waiting: Iterable[TP]) -> None:
    """Publish a sample per owned partition (``states``) and per partition ``waiting`` for its lock.

    Poll thread: it alone reads the client and the claims.
    """
    samples = {}
    for state in states:
        # the cached high watermark is the one the last fetch brought, which every broker gets right
        high = kafka.get_watermark_offsets(TopicPartition(*state.tp), cached=True)[1]
        position = state.position
        lag = max(0, high - position) if high >= 0 and position is not None and position >= 0 else None
        consumed = metrics.retired(state.tp) + state.finished
        samples[state.tp] = PartitionSample(lag, state.backlog, state.held, consumed)
    for tp in waiting:
        samples[tp] = PartitionSample(None, 0, False, metrics.retired(tp))
    metrics.publish(samples)
