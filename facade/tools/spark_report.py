"""Text of the Spark audits for the terminal: what was read, the figures, the rows worth a look."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A plain text table (columns from the first row; numbers right-aligned)."""
    if not rows:
        return "(no rows)"
    columns = list(rows[0].keys())

    def text(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.1f}"
        return "" if value is None else str(value)

    cells = [[text(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = "+".join("-" * (w + 2) for w in widths)
    out = ["|".join(f" {c.ljust(w)} " for c, w in zip(columns, widths)), line]
    out += ["|".join(f" {v.rjust(w) if _numeric(v) else v.ljust(w)} " for v, w in zip(row, widths)) for row in cells]
    return "\n".join(line.rstrip() for line in out)


def _numeric(value: str) -> bool:
    try:
        float(value)
        return True
    except ValueError:
        return False


def render_audit(result: Any, limit: int = 20) -> str:
    """An :class:`~rocketkafka.spark.audit.AuditResult` as text: reads, summary, rows, extra tables, notes."""
    parts = [f"== {result.name} =="]
    parts += [report.describe() for report in result.reads]
    parts.append(format_table([{"metric": k, "value": v} for k, v in result.summary.items()]))
    if result.rows:
        shown = result.rows[:limit]
        more = f"\n... {len(result.rows) - limit} more rows" if len(result.rows) > limit else ""
        parts.append(format_table(shown) + more)
    for title, rows in result.extra.items():
        if rows:
            parts.append(f"-- {title} --\n" + format_table(rows[:limit * 5]))
    parts += [f"note: {note}" for note in result.notes]
    if result.output:
        parts.append(f"table written to {result.output}")
    if result.chart:
        parts.append(f"chart written to {result.chart}")
    return "\n".join(parts)
