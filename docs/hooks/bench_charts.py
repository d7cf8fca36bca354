"""MkDocs hook: the benchmark pages' charts, drawn by the bench's own chart code from the published tables.

``rocketkafka bench all`` writes ``bench.png`` next to ``bench.md`` (its markdown table); the
site keeps the table of each published run, so this draws that run's chart again from it when the
site is built: each row with a target becomes a bar, scored as
:meth:`rocketkafka.tools.bench.rows.Target.score` scores it, and drawn by
:func:`rocketkafka.tools.charts.factor_chart`, the function behind ``bench.png``. A marker
``<!-- bench-chart: NAME -->`` right above a table makes ``assets/bench-NAME.png``; a row whose
target or figure cannot be read fails the build.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

PAGE = "benchmarks/index.md"
MARKER = re.compile(r"<!-- bench-chart: (\w+) -->\n((?:\|.*\n)+)")
TARGET = re.compile(r"^(>=|<=|<|>)\s*([\d.]+)(x)?\s*([\w+\-]+)?")


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def chart_rows(table: str) -> list[tuple[str, float, bool, str]]:
    """``(label, factor, met, note)`` for every row of a bench markdown table that has a target."""
    rows, bench = [], ""
    for line in table.strip().splitlines()[2:]:
        command, figure, measured, target = (cell.strip() for cell in line.strip().strip("|").split(" | "))
        bench = command.strip("`").removeprefix("rocketkafka bench ") or bench
        if not target:
            continue
        met = "**missed**" not in target
        target = target.replace(": **missed**", "")
        found = TARGET.match(target)
        if found is None:
            raise ValueError(f"{PAGE}: cannot read the target {target!r} of {figure!r}")
        op, threshold, ratio, baseline = found.group(1), float(found.group(2)), found.group(3), found.group(4)
        if ratio:
            subject = re.search(r"([\d.]+)x " + re.escape(baseline or "") + r"(?![\w+\-])", measured)
        else:
            subject = re.match(r"([\d,.]+)", measured)
        if subject is None:
            raise ValueError(f"{PAGE}: cannot read the figure {measured!r} of {figure!r} against {target!r}")
        value = _number(subject.group(1))
        factor = value / threshold if op in (">=", ">") else threshold / value if value else float("inf")
        shown = f"{value:g}x {baseline}" if ratio else re.sub(r"\s*\([^)]*\)", "", measured.split(";")[0])
        label = re.sub(r"\s+\(.*$", "", figure)  # the figure's name, without its details (counts, spreads)
        rows.append((f"{bench}: {label}"[:70], factor, met, f"{shown} ({target})"))
    return rows


def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    from rocketkafka.tools.charts import factor_chart

    source = Path(config["docs_dir"]) / PAGE
    for name, table in MARKER.findall(source.read_text()):
        with tempfile.TemporaryDirectory() as folder:
            path = factor_chart(chart_rows(table), Path(folder) / "chart.png", f"rocketkafka bench all: {name}")
            files.append(File.generated(config, f"assets/bench-{name}.png", content=path.read_bytes()))
    return files
