"""Option parsing and offset planning of the Kafka reader (no broker, no Spark job)."""

from __future__ import annotations

import pytest

from rocketkafka.spark.errors import SourceOptionError
from rocketkafka.spark.kafka_source import KafkaRange, decode_offsets, encode_offsets, rate_limit, split_ranges
from rocketkafka.spark.options import parse_options

BS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_match_sparks_kafka_source():
    batch = parse_options({**BS, "subscribe": "a, b"}, streaming=False)
    assert (batch.topics, batch.starting, batch.ending, batch.include_headers, batch.fail_on_data_loss) == (
        ("a", "b"), "earliest", "latest", False, True)
    stream = parse_options({**BS, "SUBSCRIBE": "a", "includeHeaders": "TRUE"}, streaming=True)
    assert (stream.starting, stream.include_headers) == ("latest", True)  # option names are case-insensitive
    config = stream.consumer_config()
    assert config["isolation.level"] == "read_uncommitted" and config["enable.auto.commit"] is False


def test_kafka_settings_pass_through():
    parsed = parse_options({**BS, "assign": '{"t": [2, 0]}', "kafka.security.protocol": "PLAINTEXT"}, streaming=False)
    assert parsed.assignment == {"t": (0, 2)}
    config = parsed.consumer_config(**{"group.id": "mine"})
    assert config["security.protocol"] == "PLAINTEXT" and config["group.id"] == "mine"
    assert parsed.group("reader", "abc") == "spark-kafka-source-reader-abc"


def test_kafka_group_id_names_every_consumer():
    parsed = parse_options({**BS, "subscribe": "t", "kafka.group.id": "billing-audit"}, streaming=False)
    assert parsed.group_id == "billing-audit"
    assert {parsed.group(purpose, "x") for purpose in ("planner", "reader", "probe")} == {"billing-audit"}
    assert "group.id" not in parsed.kafka_params


def test_timestamp_options_follow_sparks_precedence():
    times = '{"t": {"0": 1700000000000, "1": 5}}'
    parsed = parse_options({**BS, "subscribe": "t", "startingOffsetsByTimestamp": times, "startingTimestamp": "42",
                            "endingOffsetsByTimestamp": times}, streaming=False)
    assert parsed.starting_times == 42  # startingTimestamp wins over the per-partition JSON
    assert parsed.ending_times == {"t": {0: 1700000000000, 1: 5}} and parsed.timestamp_strategy == "error"
    stream = parse_options({**BS, "subscribe": "t", "startingOffsetsByTimestamp": times,
                            "startingOffsetsByTimestampStrategy": "LATEST"}, streaming=True)
    assert stream.starting_times == {"t": {0: 1700000000000, 1: 5}} and stream.timestamp_strategy == "latest"


@pytest.mark.parametrize("options, streaming, match", [
    ({"subscribe": "t"}, False, "kafka.bootstrap.servers"),
    ({**BS}, False, "exactly one"),
    ({**BS, "subscribe": "t", "assign": '{"t":[0]}'}, False, "exactly one"),
    ({**BS, "subscribe": " , "}, False, "no topics"),
    ({**BS, "subscribePattern": "("}, False, "regular expression"),
    ({**BS, "assign": "[0, 1]"}, False, "non-empty JSON object"),
    ({**BS, "assign": '{"t": [-1]}'}, False, "partition numbers"),
    ({**BS, "subscribe": "t", "startingOffsets": "{"}, False, "JSON"),
    ({**BS, "subscribe": "t", "startingOffsets": '{"t": {"x": 1}}'}, False, "not a number"),
    ({**BS, "subscribe": "t", "startingOffsets": '{"t": {"0": -3}}'}, False, "-2"),
    ({**BS, "subscribe": "t", "startingOffsets": '{"u": {"0": 1}}'}, False, "not subscribed"),
    ({**BS, "subscribe": "t", "startingOffsets": "latest"}, False, "batch"),
    ({**BS, "subscribe": "t", "endingOffsets": "earliest"}, False, "batch"),
    ({**BS, "subscribe": "t", "startingOffsets": '{"t": {"0": -1}}'}, False, "latest"),
    ({**BS, "subscribe": "t", "endingOffsets": "latest"}, True, "streaming"),
    ({**BS, "subscribe": "t", "maxOffsetsPerTrigger": "0"}, True, ">= 1"),
    ({**BS, "subscribe": "t", "maxOffsetsPerTrigger": "many"}, True, "integer"),
    ({**BS, "subscribe": "t", "includeHeaders": "yes"}, False, "true or false"),
    ({**BS, "subscribe": "t", "kafka.enable.auto.commit": "true"}, False, "never commits"),
    ({**BS, "subscribe": "t", "minOffsetsPerTrigger": "1"}, True, "not served"),
    ({**BS, "subscribe": "t", "startingTimestamp": "-1"}, False, ">= 0"),
    ({**BS, "subscribe": "t", "startingTimestamp": "yesterday"}, False, "integer"),
    ({**BS, "subscribe": "t", "startingOffsetsByTimestamp": '{"t": {"0": -5}}'}, False, "epoch milliseconds"),
    ({**BS, "subscribe": "t", "startingOffsetsByTimestamp": '{"u": {"0": 5}}'}, False, "not subscribed"),
    ({**BS, "subscribe": "t", "endingOffsetsByTimestamp": "{"}, False, "JSON"),
    ({**BS, "subscribe": "t", "endingTimestamp": "5"}, True, "streaming"),
    ({**BS, "subscribe": "t", "startingOffsetsByTimestampStrategy": "maybe"}, False, "error or latest"),
    ({**BS, "subscribe": "t", "kafka.group.id": "g", "groupIdPrefix": "p"}, False, "not both"),
    ({**BS, "subscribe": "t", "kafka.group.id": " "}, False, "empty group id"),
    ({**BS, "subscribe": "t", "colour": "blue"}, False, "unknown option"),
])
def test_bad_options_are_refused(options, streaming, match):
    with pytest.raises(SourceOptionError, match=match):
        parse_options(options, streaming=streaming)


def test_jvm_only_options_pass_for_the_jvm_engine():
    parsed = parse_options({**BS, "subscribe": "t", "minOffsetsPerTrigger": "1"}, streaming=True, jvm=True)
    assert parsed.raw["minOffsetsPerTrigger"] == "1"


def test_offsets_json_round_trip_is_sparks_format():
    offsets = {("b", 1): 7, ("a", 10): 3, ("a", 2): 5}
    encoded = encode_offsets(offsets)
    assert list(encoded) == ["a", "b"] and list(encoded["a"]) == ["2", "10"]
    assert decode_offsets(encoded) == offsets


def test_split_ranges_reaches_min_partitions_and_caps_records():
    ranges = [KafkaRange("t", p, 0, 100) for p in range(3)]
    split = split_ranges(ranges, min_partitions=7, max_records=None)
    assert len(split) == 7 and sum(r.end - r.start for r in split) == 300
    for p in range(3):  # contiguous, no gaps or overlaps
        pieces = sorted((r.start, r.end) for r in split if r.partition == p)
        assert pieces[0][0] == 0 and pieces[-1][1] == 100
        assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
    capped = split_ranges([KafkaRange("t", 0, 5, 100)], min_partitions=None, max_records=30)
    assert [(r.start, r.end) for r in capped] == [(5, 28), (28, 52), (52, 76), (76, 100)]


def test_rate_limit_shares_by_lag_like_spark():
    starts = {("t", 0): 0, ("t", 1): 0, ("t", 2): 50}
    ends = {("t", 0): 900, ("t", 1): 100, ("t", 2): 50}
    limited = rate_limit(starts, ends, 100)
    assert limited == {("t", 0): 90, ("t", 1): 10, ("t", 2): 50}
    assert rate_limit(starts, ends, 10_000) == ends
    tiny = rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 1000, ("t", 1): 1}, 10)
    assert tiny[("t", 1)] == 1  # small partitions are not starved
