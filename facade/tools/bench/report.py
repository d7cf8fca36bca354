"""Benchmark rows as a terminal table, as the benchmarks page's markdown table, and as ``bench.json``.

The JSON file holds the rows (with derived ratio and met) and what they ran on:
machine, Python, confluent-kafka/librdkafka, broker, date; ``rocketkafka bench all``
writes it and ``rocketkafka bench show`` renders it again.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from rocketkafka.tools.bench.rows import BenchRow

#: Bumped when the JSON layout changes incompatibly.
SCHEMA_VERSION = 1


def format_value(value: float | None) -> str:
    """Thousands separators for big figures, three significant digits for small ones."""
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _ratio_text(row: BenchRow) -> str:
    """``0.93x raw (0.88-0.97)``, and the floor ratio when there is one."""
    if row.ratio is None:
        return ""
    text = f"{row.ratio:.2f}x {row.baseline_name}"
    if row.ratio_spread:
        text += f" ({row.ratio_spread[0]:.2f}-{row.ratio_spread[1]:.2f})"
    if row.floor_ratio is not None:
        text += f", {row.floor_ratio:.2f}x {row.floor_name}"
    return text


def _value_text(row: BenchRow) -> str:
    """``512,000`` or ``512,000 (480,000-530,000)`` over rounds."""
    text = format_value(row.value)
    if row.spread and row.spread[0] != row.spread[1]:
        text += f" ({format_value(row.spread[0])}-{format_value(row.spread[1])})"
    return text


def _mark(row: BenchRow) -> str:
    if row.error:
        return "ERROR"
    return {None: "", True: "ok", False: "MISS"}[row.met]


def table_lines(rows: Sequence[BenchRow], title: str | None = None) -> list[str]:
    """The rows as fixed-width lines: bench, figure, value, unit, ratio, target, ok/MISS, detail."""
    def width(texts: Iterable[str], header: str) -> int:
        return max([len(t) for t in texts] + [len(header)])

    fw, vw, rw, tw = (width((r.figure for r in rows), "figure"), width(map(_value_text, rows), "value"),
                      width(map(_ratio_text, rows), "ratio"), width((r.target_text for r in rows), "target"))
    lines = [title] if title else []
    lines.append(f"{'bench':<8} {'figure':<{fw}} {'value':>{vw}} {'unit':<6} {'ratio':<{rw}} {'target':<{tw}} "
                 f"{'':<5} detail")
    for r in rows:
        detail = r.error or r.detail
        lines.append(f"{r.bench:<8} {r.figure:<{fw}} {_value_text(r):>{vw}} {r.unit:<6} "
                     f"{_ratio_text(r):<{rw}} {r.target_text:<{tw}} {_mark(r):<5} {detail}".rstrip())
    return lines


def print_rows(rows: Sequence[BenchRow], title: str | None = None, echo: Callable[[str], Any] = print) -> None:
    """The common printer of every ``rocketkafka bench`` command."""
    for line in table_lines(rows, f"\n{title}" if title else None):
        echo(line)


def markdown_table(rows: Sequence[BenchRow], machine: dict[str, Any] | None = None) -> str:
    """The benchmarks page's table: command (on a bench's first row), figure, measured (and ratio), target."""
    lines = []
    if machine:
        lines += [f"Ran {machine_summary(machine)}.", ""]
    lines += ["| command | figure | measured | target |", "|---|---|---|---|"]
    previous = None
    for r in rows:
        command = f"`rocketkafka bench {r.bench}`" if r.bench != previous else ""
        previous = r.bench
        if r.error:
            measured, target = f"failed: {r.error}", r.target_text
        else:
            measured = f"{_value_text(r)} {r.unit}".strip()
            if r.ratio is not None:
                measured += f"; {_ratio_text(r)}"
            target = r.target_text + (": **missed**" if r.met is False else "")
        figure = f"{r.figure} ({r.detail})" if r.detail else r.figure
        lines.append(f"| {command} | {_cell(figure)} | {_cell(measured)} | {_cell(target)} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# -- what the figures ran on -----------------------------------------------------------------------
def machine_info(broker: dict[str, Any]) -> dict[str, Any]:
    """Cores, RAM, CPU model, OS, Python, confluent-kafka/librdkafka versions, the broker, the date, the load."""
    import confluent_kafka

    info: dict[str, Any] = {
        "cores": os.cpu_count(),
        "ram_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "cpu": _cpu_model(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
        "broker": broker,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    if hasattr(os, "getloadavg"):  # other work on the machine moves the figures: say how busy it was
        info["load_average_at_start"] = [round(x, 2) for x in os.getloadavg()]
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_summary(machine: dict[str, Any]) -> str:
    """One sentence for the benchmarks page: ``on 2 cores (CPU), 24 GiB, Python 3.11.7, ...``."""
    broker = machine.get("broker", {})
    parts = [f"on {machine.get('cores')} cores ({machine.get('cpu')})", f"{machine.get('ram_gib')} GiB RAM",
             f"Python {machine.get('python')}",
             f"confluent-kafka {machine.get('confluent_kafka')} (librdkafka {machine.get('librdkafka')})",
             broker.get("description", "broker ?"), str(machine.get("date", ""))]
    if "load_average_at_start" in machine:
        parts.append(f"load average {machine['load_average_at_start'][0]} at start")
    return ", ".join(p for p in parts if p)


def chart_title(machine: dict[str, Any]) -> str:
    """A short heading for the chart: the date, cores, RAM, Python and the broker's kind."""
    info = machine.get("broker", {})
    broker = " ".join(filter(None, [info.get("kind", "?"), {"kafka": "Apache Kafka", "tansu": "Tansu"}.get(
        info.get("broker", ""), "")]))
    return (f"rocketkafka bench all, {str(machine.get('date', ''))[:10]}: {machine.get('cores')} cores, "
            f"{machine.get('ram_gib')} GiB, Python {machine.get('python')}, {broker} broker")


# -- bench.json ------------------------------------------------------------------------------------
def report_dict(rows: Iterable[BenchRow], machine: dict[str, Any], runs: dict[str, dict[str, Any]],
                scale: float) -> dict[str, Any]:
    """The JSON document: schema, scale, machine, per-bench run info (seconds, ok), rows."""
    rows = list(rows)
    return {
        "schema": SCHEMA_VERSION,
        "scale": scale,
        "machine": machine,
        "runs": runs,
        "failed": sorted(name for name, run in runs.items() if not run.get("ok", True)),
        "rows": [r.to_dict() for r in rows],
    }


def write_json(path: Path, document: dict[str, Any]) -> Path:
    """Write ``document`` atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n")
    tmp.replace(path)
    return path


def read_json(path: Path) -> tuple[list[BenchRow], dict[str, Any]]:
    """Rows and the whole document of a ``bench.json``."""
    document = json.loads(Path(path).read_text())
    return [BenchRow.from_dict(r) for r in document["rows"]], document
