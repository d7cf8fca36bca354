"""What an audit returns, how its table is written, and the rule that an audit never reports on nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rocketkafka.errors import ConfigError
from rocketkafka.spark.audit.reading import ReadReport
from rocketkafka.spark.errors import AuditEmptyError


@dataclass
class AuditResult:
    """What an audit found.

    Attributes:
        name: the audit.
        summary: headline counts, in print order.
        table: the per-item Spark DataFrame (per key, per level, per transaction).
        rows: ``table``'s rows worth a look, collected (audits produce small tables), dicts in print order.
        reads: what was read: topics, partitions, offset ranges and rows of each source.
        notes: lines that say how the figures came about (joins, what was left out).
        output: where ``table`` was written, if anywhere.
        chart: the PNG chart, if one was drawn.
        extra: further tables (e.g. the lateness histogram), collected.
    """

    name: str
    summary: dict[str, Any]
    table: DataFrame
    rows: list[dict[str, Any]]
    reads: list[ReadReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    output: Path | None = None
    chart: Path | None = None
    extra: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def describe_reads(reads: list[ReadReport]) -> str:
    """Every source of an audit, one line per topic."""
    return "\n".join(r.describe() for r in reads)


def nothing_to_report(audit: str, problem: str, reads: list[ReadReport], allow_empty: bool) -> None:
    """Raise :class:`AuditEmptyError` (``audit: problem`` first, then what was read) unless ``allow_empty``."""
    if allow_empty:
        return
    raise AuditEmptyError(f"{audit}: {problem}\n{describe_reads(reads)}")


def write_table(table: DataFrame, output: str | Path | None, fmt: str = "parquet") -> Path | None:
    """Write ``table`` as one Parquet or CSV file inside the Spark output directory ``output``."""
    if output is None:
        return None
    if fmt not in ("parquet", "csv"):
        raise ConfigError(f"output format must be parquet or csv, got {fmt!r}")
    if fmt == "csv":  # CSV has no nested types: those columns become JSON text
        flat = table.select([F.to_json(F.col(c)).alias(c) if _is_complex(table, c) else F.col(c) for c in table.columns])
        flat.coalesce(1).write.mode("overwrite").option("header", "true").csv(str(output))
    else:
        table.coalesce(1).write.mode("overwrite").parquet(str(output))
    return Path(output)


def _is_complex(df: DataFrame, column: str) -> bool:
    return df.schema[column].dataType.typeName() in ("array", "map", "struct")
