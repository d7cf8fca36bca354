"""``bench.png``: every figure that has a target, as a bar from the target to where the figure landed.

The axis is the factor by which a figure beats (right, green) or misses (left, red)
its target -- figure / threshold for ``>=`` targets, threshold / figure for ``<``
ones -- on a log2 scale clipped to 1/8x .. 8x, so a 0.54x-raw producer and a lock
renewal 3x under its limit read on one chart. Failed benchmarks are listed in red.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rocketkafka.tools.bench.report import format_value
from rocketkafka.tools.bench.rows import BenchRow
from rocketkafka.tools.charts import factor_chart


def charted_rows(rows: Sequence[BenchRow]) -> list[BenchRow]:
    """The rows the chart shows: those with a target, and failed ones."""
    return [r for r in rows if r.target is not None or r.error]


def bench_chart(rows: Sequence[BenchRow], path: Path, title: str = "rocketkafka bench all") -> Path:
    """Draw the chart of ``rows`` into ``path`` (PNG) and return ``path``."""
    bars = []
    for row in charted_rows(rows):
        score = None if row.error or row.target is None else row.target.score(row.value, row.ratio)
        note = f"failed: {row.error}" if row.error else _note(row) if score is not None else "no figure"
        bars.append((f"{row.bench}: {row.figure}"[:70], score, bool(row.met), note))
    return factor_chart(bars, path, title)


def _note(row: BenchRow) -> str:
    measured = f"{row.ratio:.2f}x {row.baseline_name}" if row.target and row.target.of == "ratio" and row.ratio \
        is not None else f"{format_value(row.value)} {row.unit}".strip()
    return f"{measured} ({row.target_text})"
