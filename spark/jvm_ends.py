"""Log ends for Spark's JVM Kafka source, taken on the driver from fetched watermarks.

The JVM source learns where a partition ends from ListOffsets "latest". Some brokers
answer that wrongly (Tansu: the last batch's first offset + 1, DESIGN §4), and the JVM
source then stops short without a word. So a batch read through it gets its ending
offsets pinned here, from the high watermark a fetch returns (what the Python source
uses), and a streaming read learns whether the broker's ListOffsets can be trusted.
"""

from __future__ import annotations

from confluent_kafka import KafkaException, TopicPartition

from rocketkafka.spark.errors import KafkaReadError
from rocketkafka.spark.kafka_io import log_ends, open_consumer
from rocketkafka.spark.kafka_source import encode_offsets
from rocketkafka.spark.options import LATEST, SourceOptions
from rocketkafka.topic_partition import TP


def pinned_ending(options: SourceOptions, tps: list[TP]) -> dict[str, dict[str, int]] | None:
    """``endingOffsets`` JSON with every "latest" replaced by the fetched end (``None``: nothing to pin)."""
    ending = options.ending
    if options.ending_times is not None or not tps:
        return None
    if isinstance(ending, dict):
        named = {(t, p): o for t, parts in ending.items() for p, o in parts.items()}
        if LATEST not in named.values():
            return None
    elif ending == "latest":
        named = dict.fromkeys(tps, LATEST)
    else:
        return None
    ends = log_ends(options, tps)
    return encode_offsets({tp: ends[tp][1] if named.get(tp, LATEST) == LATEST else named[tp] for tp in tps})


def lagging_list_offsets(options: SourceOptions, tps: list[TP]) -> list[TP]:
    """Partitions whose ListOffsets "latest" is below the fetched end: the broker misreports log ends."""
    if not tps:
        return []
    fetched = log_ends(options, tps)
    consumer = open_consumer(options, "probe")
    try:
        listed = {tp: consumer.get_watermark_offsets(TopicPartition(*tp), timeout=10, cached=False)[1] for tp in tps}
    except KafkaException as exc:
        raise KafkaReadError(f"cannot list offsets at {options.bootstrap_servers}: {exc}") from None
    finally:
        consumer.close()
    return sorted(tp for tp in tps if listed[tp] < fetched[tp][1])
