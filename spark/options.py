"""The options of Spark's Kafka source, parsed and checked without a broker.

The same option names and value formats as Spark's ``kafka`` source
(Structured Streaming + Kafka Integration Guide), so a pipeline moves between
the JVM connector and the project's Python reader unchanged:

- ``kafka.bootstrap.servers`` (required) and any other ``kafka.<setting>``,
  handed to the Kafka client: confluent-kafka's settings (``kafka.security.protocol``,
  ``kafka.sasl.mechanism``, ``kafka.sasl.username``, ``kafka.sasl.password``,
  ``kafka.ssl.ca.location``, ...), which the JVM engine translates to the Java client's
  (:mod:`rocketkafka.spark.jvm_security`). Java's own security settings are read too
  (a PLAIN/SCRAM ``kafka.sasl.jaas.config``, PEM truststores and keystores, translated
  for librdkafka); any other Java-only setting is refused by confluent-kafka with a
  :class:`SourceOptionError` naming it (``engine='jvm'`` hands it to Spark's source as is);
- exactly one of ``subscribe`` (comma list), ``subscribePattern`` (Java-style
  regex, whole-name match) or ``assign`` (JSON ``{"topicA":[0,1]}``);
- ``startingOffsets`` / ``endingOffsets``: ``earliest``, ``latest`` or JSON
  ``{"topicA":{"0":23,"1":-1}}`` with ``-2`` = earliest and ``-1`` = latest;
- ``startingTimestamp`` / ``startingOffsetsByTimestamp`` (JSON ``{"topicA":{"0":1700000000000}}``,
  epoch ms) with ``startingOffsetsByTimestampStrategy`` (``error`` or ``latest``), and
  ``endingTimestamp`` / ``endingOffsetsByTimestamp`` (batch only): served with the
  broker's ``offsets_for_times`` (the first offset whose timestamp is at or after the
  time). They win over ``startingOffsets`` / ``endingOffsets`` as in Spark
  (``...Timestamp`` over ``...OffsetsByTimestamp`` over ``...Offsets``). Caveat: the broker
  decides what a record's time is; Kafka uses the record timestamps, while Tansu (the
  embedded broker) answers with the time each batch was written;
- ``kafka.group.id``: honoured as in Spark: every consumer of the query (planner and
  readers) uses exactly this group id instead of ``groupIdPrefix-<random>``. The reader
  still never joins the group nor commits to it; the id is what the broker sees (group
  ACLs, quotas, monitoring). Setting both it and ``groupIdPrefix`` is refused;
- ``maxOffsetsPerTrigger``, ``minPartitions``, ``maxRecordsPerPartition``,
  ``includeHeaders``, ``failOnDataLoss``, ``kafkaConsumer.pollTimeoutMs``,
  ``fetchOffset.numRetries``, ``fetchOffset.retryIntervalMs``, ``groupIdPrefix``.

Unlike Spark, an unknown option is an error, not silently ignored.
``minOffsetsPerTrigger`` / ``maxTriggerDelay`` are known but not served by the
Python reader; they raise :class:`SourceOptionError`.

>>> o = parse_options({"kafka.bootstrap.servers": "h:9092", "subscribe": "a,b"}, streaming=False)
>>> o.topics, o.starting, o.ending
(('a', 'b'), 'earliest', 'latest')
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rocketkafka.logs import redact_config
from rocketkafka.spark.errors import SourceOptionError
from rocketkafka.spark.jvm_security import librdkafka_settings

#: Kafka's offset sentinels inside offset JSON (Spark's convention).
EARLIEST = -2
LATEST = -1

#: Option names (lower case) the Python reader serves.
SUPPORTED = frozenset({
    "subscribe", "subscribepattern", "assign",
    "startingoffsets", "endingoffsets",
    "maxoffsetspertrigger", "minpartitions", "maxrecordsperpartition",
    "includeheaders", "failondataloss",
    "kafkaconsumer.polltimeoutms", "fetchoffset.numretries", "fetchoffset.retryintervalms",
    "groupidprefix",
    "startingtimestamp", "endingtimestamp", "startingoffsetsbytimestamp", "endingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy",
})

#: Spark options the Python reader knows but does not serve.
NOT_SERVED = frozenset({"minoffsetspertrigger", "maxtriggerdelay"})

#: ``kafka.*`` settings Spark itself refuses (the source manages them).
REFUSED_KAFKA = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "enable.auto.commit": "the source never commits offsets to Kafka",
    "key.deserializer": "keys are always returned as binary",
    "value.deserializer": "values are always returned as binary",
    "interceptor.classes": "interceptors are not supported",
}

#: Settings the Python reader's consumers own (``group.id`` is set from ``kafka.group.id`` or ``groupIdPrefix``).
_MANAGED_KAFKA = ("group.id", "enable.partition.eof", "enable.auto.offset.store")

#: ``startingOffsetsByTimestampStrategy`` values: what a partition without a record at or after the time does.
TIMESTAMP_STRATEGIES = ("error", "latest")

_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_TIMES_EXAMPLE = '{"topicA":{"0":1700000000000,"1":1700000000000}}'
_ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[2,4]}'


@dataclass(frozen=True)
class SourceOptions:
    """The checked options of one Kafka source (picklable; shipped to Spark workers)."""

    bootstrap_servers: str
    kafka_params: dict[str, str]
    topics: tuple[str, ...] = ()  # subscribe
    pattern: str | None = None  # subscribePattern
    assignment: dict[str, tuple[int, ...]] | None = None  # assign
    starting: str | dict[str, dict[int, int]] = "earliest"
    ending: str | dict[str, dict[int, int]] = "latest"
    streaming: bool = False
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120_000
    fetch_retries: int = 3
    fetch_retry_interval_ms: int = 10
    group_id_prefix: str = "spark-kafka-source"
    group_id: str | None = None  # kafka.group.id: every consumer uses it
    #: startingTimestamp (one time for every partition) or startingOffsetsByTimestamp (per partition), epoch ms
    starting_times: int | dict[str, dict[int, int]] | None = None
    ending_times: int | dict[str, dict[int, int]] | None = None
    timestamp_strategy: str = "error"
    raw: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        """The options with secret ``kafka.*`` values (``sasl.password``, ...) shown as ``***``."""
        shown = {**vars(self), "kafka_params": redact_config(self.kafka_params), "raw": redact_config(self.raw)}
        return f"SourceOptions({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    @property
    def strategy(self) -> str:
        """``subscribe``, ``subscribePattern`` or ``assign``."""
        if self.assignment is not None:
            return "assign"
        return "subscribePattern" if self.pattern is not None else "subscribe"

    def group(self, purpose: str, unique: str) -> str:
        """The ``group.id`` of one consumer: ``kafka.group.id`` when given, else ``groupIdPrefix-purpose-unique``."""
        return self.group_id if self.group_id is not None else f"{self.group_id_prefix}-{purpose}-{unique}"

    @property
    def read_committed(self) -> bool:
        """``kafka.isolation.level`` is read_committed: reads end at the last stable offset."""
        return str(self.kafka_params.get("isolation.level", "")).strip().lower() == "read_committed"

    @property
    def user(self) -> str | None:
        """The SASL user name the client logs in with (``kafka.sasl.username`` or the JAAS string's), if any."""
        try:
            return librdkafka_settings(self.kafka_params).get("sasl.username")
        except SourceOptionError:
            return None

    def consumer_config(self, **extra: Any) -> dict[str, Any]:
        """confluent-kafka settings: ``kafka.*`` (Java security settings translated) plus the reader's own.

        Raises:
            SourceOptionError: a Java security setting librdkafka cannot honour (named).
        """
        config: dict[str, Any] = {
            # Spark's JVM source reads with the Java client's default, read_uncommitted;
            # librdkafka would default to read_committed.
            "isolation.level": "read_uncommitted",
            **{k: v for k, v in librdkafka_settings(self.kafka_params).items() if k not in _MANAGED_KAFKA},
            "bootstrap.servers": self.bootstrap_servers,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
        }
        config.update(extra)
        return config


def _bool(name: str, value: str) -> bool:
    lowered = str(value).strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise SourceOptionError(name, f"expected true or false, got {value!r}")


def _int(name: str, value: str, minimum: int) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise SourceOptionError(name, f"expected an integer, got {value!r}") from None
    if number < minimum:
        raise SourceOptionError(name, f"must be >= {minimum}, got {number}")
    return number


def parse_offsets(name: str, value: str) -> str | dict[str, dict[int, int]]:
    """``earliest``, ``latest`` or Spark's per-partition offset JSON."""
    text = str(value).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SourceOptionError(name, f"expected earliest, latest or JSON like {_OFFSETS_EXAMPLE}, got {text!r} ({exc})") from None
    if not isinstance(data, dict) or not data:
        raise SourceOptionError(name, f"expected a non-empty JSON object like {_OFFSETS_EXAMPLE}, got {text!r}")
    parsed: dict[str, dict[int, int]] = {}
    for topic, partitions in data.items():
        if not isinstance(partitions, dict) or not partitions:
            raise SourceOptionError(name, f"topic {topic!r} must map partitions to offsets, like {_OFFSETS_EXAMPLE}")
        parsed[topic] = {}
        for partition, offset in partitions.items():
            try:
                number = int(partition)
            except ValueError:
                raise SourceOptionError(name, f"partition {partition!r} of topic {topic!r} is not a number") from None
            if number < 0:
                raise SourceOptionError(name, f"partition {number} of topic {topic!r} is negative")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise SourceOptionError(
                    name, f"offset {offset!r} of {topic}-{partition} must be an integer >= 0, -1 (latest) or -2 (earliest)")
            parsed[topic][number] = offset
    return parsed


def parse_times(name: str, value: str) -> dict[str, dict[int, int]]:
    """Spark's per-partition timestamp JSON (``{"topicA":{"0":1700000000000}}``, epoch ms)."""
    text = str(value).strip()
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SourceOptionError(name, f"expected JSON like {_TIMES_EXAMPLE}, got {text!r} ({exc})") from None
    if not isinstance(data, dict) or not data:
        raise SourceOptionError(name, f"expected a non-empty JSON object like {_TIMES_EXAMPLE}, got {text!r}")
    parsed: dict[str, dict[int, int]] = {}
    for topic, partitions in data.items():
        if not isinstance(partitions, dict) or not partitions:
            raise SourceOptionError(name, f"topic {topic!r} must map partitions to timestamps, like {_TIMES_EXAMPLE}")
        parsed[topic] = {}
        for partition, stamp in partitions.items():
            try:
                number = int(partition)
            except ValueError:
                raise SourceOptionError(name, f"partition {partition!r} of topic {topic!r} is not a number") from None
            if isinstance(stamp, bool) or not isinstance(stamp, int) or stamp < 0:
                raise SourceOptionError(name, f"timestamp {stamp!r} of {topic}-{partition} must be epoch milliseconds >= 0")
            parsed[topic][number] = stamp
    return parsed


def _parse_assign(value: str) -> dict[str, tuple[int, ...]]:
    try:
        data = json.loads(str(value))
    except ValueError as exc:
        raise SourceOptionError("assign", f"expected JSON like {_ASSIGN_EXAMPLE}, got {value!r} ({exc})") from None
    if not isinstance(data, dict) or not data:
        raise SourceOptionError("assign", f"expected a non-empty JSON object like {_ASSIGN_EXAMPLE}, got {value!r}")
    assignment: dict[str, tuple[int, ...]] = {}
    for topic, partitions in data.items():
        if (not isinstance(partitions, list) or not partitions
                or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions)):
            raise SourceOptionError("assign", f"topic {topic!r} must map to a list of partition numbers, like {_ASSIGN_EXAMPLE}")
        assignment[topic] = tuple(sorted(set(partitions)))
    return assignment


def parse_options(options: Mapping[str, str], streaming: bool, jvm: bool = False) -> SourceOptions:
    """Check every option of one Kafka source; raises :class:`SourceOptionError`.

    Parameters:
        options: the reader options (any letter case, values as strings).
        streaming: ``readStream`` (True) or ``read`` (False); some offsets are only valid in one.
        jvm: the options go to Spark's JVM source, which also serves ``minOffsetsPerTrigger`` / ``maxTriggerDelay``.
    """
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    kafka_params: dict[str, str] = {}
    for key in sorted(opts):
        if key.startswith("kafka."):
            setting = key[len("kafka."):]
            if setting in REFUSED_KAFKA:
                raise SourceOptionError(key, f"not supported: {REFUSED_KAFKA[setting]}")
            kafka_params[setting] = opts[key]
        elif key in NOT_SERVED and not jvm:
            raise SourceOptionError(key, "known to Spark's JVM Kafka source but not served by the Python reader (engine='jvm' needs spark-sql-kafka-0-10)")
        elif key not in SUPPORTED and key not in NOT_SERVED:
            known = ", ".join(sorted(SUPPORTED | {"kafka.*"}))
            raise SourceOptionError(key, f"unknown option (known: {known})")
    bootstrap = kafka_params.pop("bootstrap.servers", "").strip()
    if not bootstrap:
        raise SourceOptionError("kafka.bootstrap.servers", "required (e.g. 127.0.0.1:9092)")

    strategies = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(strategies) != 1:
        raise SourceOptionError(
            "subscribe", "exactly one of 'subscribe', 'subscribePattern' or 'assign' must be given"
            + (f", got {strategies}" if strategies else ""))
    topics: tuple[str, ...] = ()
    pattern = None
    assignment = None
    if "subscribe" in opts:
        topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not topics:
            raise SourceOptionError("subscribe", f"no topics in {opts['subscribe']!r}")
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"].strip()
        if not pattern:
            raise SourceOptionError("subscribePattern", "empty pattern")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise SourceOptionError("subscribePattern", f"bad regular expression {pattern!r}: {exc}") from None
    else:
        assignment = _parse_assign(opts["assign"])

    starting = parse_offsets("startingOffsets", opts.get("startingoffsets", "latest" if streaming else "earliest"))
    if streaming:
        if "endingoffsets" in opts:
            raise SourceOptionError("endingOffsets", "not valid in streaming queries")
        ending: str | dict[str, dict[int, int]] = "latest"
    else:
        ending = parse_offsets("endingOffsets", opts.get("endingoffsets", "latest"))
        if starting == "latest":
            raise SourceOptionError("startingOffsets", "cannot be 'latest' for batch queries")
        if ending == "earliest":
            raise SourceOptionError("endingOffsets", "cannot be 'earliest' for batch queries")
        if isinstance(starting, dict) and any(o == LATEST for parts in starting.values() for o in parts.values()):
            raise SourceOptionError("startingOffsets", "-1 (latest) is not allowed for batch queries")
        if isinstance(ending, dict) and any(o == EARLIEST for parts in ending.values() for o in parts.values()):
            raise SourceOptionError("endingOffsets", "-2 (earliest) is not allowed for batch queries")
    starting_times: int | dict[str, dict[int, int]] | None = None
    ending_times: int | dict[str, dict[int, int]] | None = None
    if "startingtimestamp" in opts:  # Spark's precedence: the single time over the JSON over startingOffsets
        starting_times = _int("startingTimestamp", opts["startingtimestamp"], 0)
    elif "startingoffsetsbytimestamp" in opts:
        starting_times = parse_times("startingOffsetsByTimestamp", opts["startingoffsetsbytimestamp"])
    if "endingtimestamp" in opts or "endingoffsetsbytimestamp" in opts:
        if streaming:
            name = "endingTimestamp" if "endingtimestamp" in opts else "endingOffsetsByTimestamp"
            raise SourceOptionError(name, "not valid in streaming queries")
        if "endingtimestamp" in opts:
            ending_times = _int("endingTimestamp", opts["endingtimestamp"], 0)
        else:
            ending_times = parse_times("endingOffsetsByTimestamp", opts["endingoffsetsbytimestamp"])
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in TIMESTAMP_STRATEGIES:
        raise SourceOptionError("startingOffsetsByTimestampStrategy",
                                f"expected {' or '.join(TIMESTAMP_STRATEGIES)}, got {strategy!r}")
    for name, offsets in (("startingOffsets", starting), ("endingOffsets", ending),
                          ("startingOffsetsByTimestamp", starting_times), ("endingOffsetsByTimestamp", ending_times)):
        if isinstance(offsets, dict):
            _check_offset_topics(name, offsets, topics, pattern, assignment)

    group_id = kafka_params.pop("group.id", None)
    if group_id is not None:
        group_id = group_id.strip()
        if not group_id:
            raise SourceOptionError("kafka.group.id", "empty group id")
        if "groupidprefix" in opts:
            raise SourceOptionError("kafka.group.id", "set either kafka.group.id or groupIdPrefix, not both "
                                                      "(Spark would silently ignore groupIdPrefix)")

    def number(key: str, minimum: int, default: int | None) -> int | None:
        return _int(key, opts[key], minimum) if key in opts else default

    return SourceOptions(
        bootstrap_servers=bootstrap,
        kafka_params=kafka_params,
        topics=topics,
        pattern=pattern,
        assignment=assignment,
        starting=starting,
        ending=ending,
        streaming=streaming,
        max_offsets_per_trigger=number("maxoffsetspertrigger", 1, None),
        min_partitions=number("minpartitions", 1, None),
        max_records_per_partition=number("maxrecordsperpartition", 1, None),
        include_headers=_bool("includeHeaders", opts.get("includeheaders", "false")),
        fail_on_data_loss=_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        poll_timeout_ms=number("kafkaconsumer.polltimeoutms", 1, 120_000) or 120_000,
        fetch_retries=number("fetchoffset.numretries", 0, 3) or 0,
        fetch_retry_interval_ms=number("fetchoffset.retryintervalms", 0, 10) or 0,
        group_id_prefix=opts.get("groupidprefix", "spark-kafka-source"),
        group_id=group_id,
        starting_times=starting_times,
        ending_times=ending_times,
        timestamp_strategy=strategy,
        raw=dict(options),
    )


def _check_offset_topics(name: str, offsets: dict[str, dict[int, int]], topics: tuple[str, ...], pattern: str | None,
                         assignment: dict[str, tuple[int, ...]] | None) -> None:
    for topic in offsets:
        if topics and topic not in topics:
            raise SourceOptionError(name, f"topic {topic!r} is not subscribed (subscribe={','.join(topics)})")
        if pattern is not None and not re.fullmatch(pattern, topic):
            raise SourceOptionError(name, f"topic {topic!r} does not match subscribePattern {pattern!r}")
        if assignment is not None:
            if topic not in assignment:
                raise SourceOptionError(name, f"topic {topic!r} is not assigned")
            extra = set(offsets[topic]) - set(assignment[topic])
            if extra:
                raise SourceOptionError(name, f"partitions {sorted(extra)} of {topic!r} are not assigned")
