"""What an audit reads, pinned and reported: the offset range of every partition, then the rows Spark read.

An audit first takes a snapshot of the log (each partition's earliest and end offsets,
from fetched watermarks) and then reads exactly those ranges through
:func:`~rocketkafka.spark.engine.read_messages` (either engine), so what it reports
having read is what it counted, even while producers keep writing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame, SparkSession

from rocketkafka.errors import TopicNotFoundError
from rocketkafka.spark.engine import read_messages
from rocketkafka.spark.kafka_io import discover, log_ends, open_consumer
from rocketkafka.spark.options import parse_options
from rocketkafka.spark.schema import kafka_schema


@dataclass(frozen=True)
class PartitionRead:
    """One partition's offsets ``start <= o < end`` and the rows read from them (``None``: not counted)."""

    topic: str
    partition: int
    start: int
    end: int
    rows: int | None = None


@dataclass(frozen=True)
class ReadReport:
    """What one source of an audit covered.

    Attributes:
        role: what the records are to the audit (``real topics``, ``delay topics``, ``half topic``, ...).
        asked: the topics or the pattern asked for.
        partitions: every partition read, with its offset range and row count.
        missing: asked topics that do not exist (read as empty where the audit allows it).
    """

    role: str
    asked: str
    partitions: tuple[PartitionRead, ...] = ()
    missing: tuple[str, ...] = ()

    @property
    def topics(self) -> list[str]:
        return sorted({p.topic for p in self.partitions})

    @property
    def rows(self) -> int:
        return sum(p.rows or 0 for p in self.partitions)

    @property
    def offsets(self) -> int:
        """Offsets covered (rows plus transaction markers and compacted gaps)."""
        return sum(p.end - p.start for p in self.partitions)

    def with_rows(self, counts: Mapping[tuple[str, int], int]) -> ReadReport:
        """This report with the row counts of each partition (absent: 0)."""
        return replace(self, partitions=tuple(replace(p, rows=int(counts.get((p.topic, p.partition), 0)))
                                              for p in self.partitions))

    def describe(self) -> str:
        """``role topic: N partitions, offsets 0:[0, 120) 1:[3, 130), R rows`` (one line per topic)."""
        if not self.partitions:
            gone = f" (missing: {', '.join(self.missing)})" if self.missing else ""
            return f"{self.role} {self.asked}: no partitions{gone}, 0 rows"
        lines = []
        for topic in self.topics:
            parts = [p for p in self.partitions if p.topic == topic]
            ranges = " ".join(f"{p.partition}:[{p.start}, {p.end})" for p in parts)
            if all(p.rows is not None for p in parts):
                counted = f"{sum(p.rows or 0 for p in parts)} rows"
            else:
                counted = "rows not counted"
            lines.append(f"{self.role} {topic}: {len(parts)} partitions, offsets {ranges}, {counted}")
        for topic in self.missing:
            lines.append(f"{self.role} {topic}: missing, 0 rows")
        return "\n".join(lines)


@dataclass
class Source:
    """A pinned read: the DataFrame over exactly the snapshot's ranges and its report (rows filled by :func:`count_rows`)."""

    frame: DataFrame
    report: ReadReport


def _base_options(bootstrap_servers: str, kafka: Mapping[str, str] | None) -> dict[str, str]:
    """Source options of an audit's reads: read_committed unless ``kafka`` says otherwise.

    An audit counts what consumers are given: records of committed transactions, never those of aborted
    ones, and a snapshot ends at the last stable offset (the first record of a transaction still open),
    which a read_committed client learns as the partition's end. Where nothing was written in
    transactions the two levels read the same; a broker that does not hide aborted records (Tansu)
    is read as it answers.
    """
    return {"kafka.bootstrap.servers": bootstrap_servers, "includeHeaders": "true",
            "kafka.isolation.level": "read_committed", **{f"kafka.{k}": str(v) for k, v in (kafka or {}).items()}}


def snapshot(bootstrap_servers: str, *, topics: Sequence[str] = (), pattern: str | None = None,
             kafka: Mapping[str, str] | None = None, role: str = "read",
             allow_missing: bool = False) -> ReadReport:
    """Each partition's ``[earliest, end)`` now, for ``topics`` or the topics matching ``pattern``.

    Raises:
        TopicNotFoundError: a topic of ``topics`` does not exist (unless ``allow_missing``).
    """
    asked = pattern if pattern is not None else ",".join(topics)
    base = _base_options(bootstrap_servers, kafka)
    present = list(dict.fromkeys(topics))
    missing: list[str] = []
    while True:
        source = {"subscribePattern": pattern} if pattern is not None else {"subscribe": ",".join(present)}
        if pattern is None and not present:
            return ReadReport(role, asked, (), tuple(missing))
        options = parse_options({**base, **source}, streaming=False)
        consumer = open_consumer(options, "audit")
        try:
            tps = discover(consumer, options)
        except TopicNotFoundError as exc:
            if not allow_missing or exc.topic not in present:
                raise
            present.remove(exc.topic)
            missing.append(exc.topic)
            continue
        finally:
            consumer.close()
        break
    marks = log_ends(options, tps) if tps else {}
    parts = tuple(PartitionRead(t, p, *marks[(t, p)]) for t, p in tps)
    return ReadReport(role, asked, parts, tuple(missing))


def read_snapshot(spark: SparkSession, bootstrap_servers: str, report: ReadReport, *, engine: str | None = None,
                  kafka: Mapping[str, str] | None = None) -> Source:
    """The records of the snapshot's ranges (Spark's Kafka schema with headers); an empty frame for no partitions."""
    if not report.partitions:
        return Source(spark.createDataFrame([], kafka_schema(include_headers=True)), report)
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for p in report.partitions:
        starting.setdefault(p.topic, {})[str(p.partition)] = p.start
        ending.setdefault(p.topic, {})[str(p.partition)] = p.end
    options = {**_base_options(bootstrap_servers, kafka), "subscribe": ",".join(report.topics),
               "startingOffsets": starting, "endingOffsets": ending}
    return Source(read_messages(spark, options, engine=engine), report)


def read_topics(spark: SparkSession, bootstrap_servers: str, topics: Iterable[str] = (), *, pattern: str | None = None,
                engine: str | None = None, kafka: Mapping[str, str] | None = None, role: str = "read",
                allow_missing: bool = False) -> Source:
    """:func:`snapshot` then :func:`read_snapshot`."""
    report = snapshot(bootstrap_servers, topics=sorted(set(topics)), pattern=pattern, kafka=kafka, role=role,
                      allow_missing=allow_missing)
    return read_snapshot(spark, bootstrap_servers, report, engine=engine, kafka=kafka)


def count_rows(frame: DataFrame, report: ReadReport) -> ReadReport:
    """``report`` with the rows per partition that ``frame`` (with ``topic`` and ``partition``) holds."""
    if not report.partitions:
        return report
    counts = {(r["topic"], r["partition"]): r["count"] for r in frame.groupBy("topic", "partition").count().collect()}
    return report.with_rows(counts)
