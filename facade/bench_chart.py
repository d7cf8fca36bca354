"""``bench.png``: every figure that has a target, as a bar from the target to where the figure landed.

The axis is the factor by which a figure beats (right, green) or misses (left, red)
its target -- figure / threshold for ``>=`` targets, threshold / figure for ``<``
ones -- on a log2 scale clipped to 1/8x .. 8x, so a 0.54x-raw producer and a lock
renewal 3x under its limit read on one chart. Failed benchmarks are listed in red.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from facade.bench_report import format_value
from facade.bench_rows import BenchRow
from facade.png import BLACK, Canvas, text_width

GREEN, RED, GREY, LIGHT = (44, 160, 44), (214, 39, 40), (127, 127, 127), (225, 225, 225)
SCALE = 2  # font scale: 8 px per character, 10 px high
LABEL_CHARS, NOTE_CHARS = 52, 40
ROW_H, TOP, BOTTOM, PAD = 22, 56, 40, 12
PLOT_W = 480
CLIP = 3  # log2 of the axis' ends: 1/8x .. 8x


def charted_rows(rows: Sequence[BenchRow]) -> list[BenchRow]:
    """The rows the chart shows: those with a target, and failed ones."""
    return [r for r in rows if r.target is not None or r.error]


def chart_size(n_rows: int) -> tuple[int, int]:
    """Width and height in pixels of a chart of ``n_rows`` charted rows."""
    label_w, note_w = text_width("x" * LABEL_CHARS, SCALE), text_width("x" * NOTE_CHARS, SCALE)
    return PAD + label_w + PAD + PLOT_W + PAD + note_w + PAD, TOP + max(n_rows, 1) * ROW_H + BOTTOM


def bench_chart(rows: Sequence[BenchRow], path: Path, title: str = "rocketkafka bench all") -> Path:
    """Draw the chart of ``rows`` into ``path`` (PNG) and return ``path``."""
    shown = charted_rows(rows)
    width, height = chart_size(len(shown))
    canvas = Canvas(width, height)
    plot_x0 = PAD + text_width("x" * LABEL_CHARS, SCALE) + PAD
    center = plot_x0 + PLOT_W // 2
    note_x = plot_x0 + PLOT_W + PAD
    canvas.text(PAD, 10, _fit(title, (width - 2 * PAD) // (4 * SCALE)), SCALE)
    canvas.text(PAD, 28, "factor by which each figure meets (right) or misses (left) its target, log scale", SCALE,
                GREY)
    plot_top, plot_bottom = TOP, TOP + max(len(shown), 1) * ROW_H
    for k in range(-CLIP, CLIP + 1):  # grid lines and their labels
        x = _x(center, 2.0 ** k)
        canvas.rect(x, plot_top, x + 1, plot_bottom, LIGHT if k else BLACK)
        label = "target" if k == 0 else (f"{2 ** k}x" if k > 0 else f"1/{2 ** -k}x")
        canvas.text(x - text_width(label, SCALE) // 2, plot_bottom + 8, label, SCALE, BLACK if k == 0 else GREY)
    for i, row in enumerate(shown):
        y = plot_top + i * ROW_H
        canvas.text(PAD, y + 6, _fit(f"{row.bench}: {row.figure}", LABEL_CHARS), SCALE, RED if row.error else BLACK)
        score = None if row.error or row.target is None else row.target.score(row.value, row.ratio)
        if score is None:
            canvas.text(note_x, y + 6, _fit(f"failed: {row.error}" if row.error else "no figure", NOTE_CHARS), SCALE, RED)
            continue
        x = _x(center, score)
        color = GREEN if row.met else RED
        canvas.rect(min(center, x), y + 4, max(center, x) + 1, y + ROW_H - 4, color)
        canvas.text(note_x, y + 6, _fit(_note(row), NOTE_CHARS), SCALE, color)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(canvas.png())
    return path


def _x(center: int, score: float) -> int:
    if score <= 0:
        exponent = -CLIP
    elif math.isinf(score):
        exponent = CLIP
    else:
        exponent = max(-CLIP, min(CLIP, math.log2(score)))
    return center + round(exponent / CLIP * (PLOT_W // 2 - 4))


def _note(row: BenchRow) -> str:
    measured = f"{row.ratio:.2f}x {row.baseline_name}" if row.target and row.target.of == "ratio" and row.ratio \
        is not None else f"{format_value(row.value)} {row.unit}".strip()
    return f"{measured} ({row.target_text})"


def _fit(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars - 2] + ".."
