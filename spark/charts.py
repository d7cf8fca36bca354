"""The lateness histogram as a PNG: matplotlib when installed, else a small built-in renderer.

matplotlib is not a dependency of rocketkafka; without it the chart is drawn
with :mod:`facade.png` (zlib and a 3x5 pixel font): grouped bars per delay level, a legend,
bucket labels and the y-axis maximum, enough to read the shape of the tail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from facade.png import Canvas

_PALETTE = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75),
            (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)]


def lateness_chart(histogram: Sequence[Mapping[str, Any]], buckets: Sequence[str], path: Path) -> Path:
    """Draw ``histogram`` rows (``level``, ``bucket``, ``count``) as grouped bars into ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    levels = sorted({int(r["level"]) for r in histogram})
    counts = {(int(r["level"]), r["bucket"]): int(r["count"]) for r in histogram}
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _draw_png(levels, buckets, counts, path)
        return path
    fig, ax = plt.subplots(figsize=(10, 5))
    width = 0.8 / max(len(levels), 1)
    for i, level in enumerate(levels):
        xs = [b + i * width for b in range(len(buckets))]
        ax.bar(xs, [counts.get((level, b), 0) for b in buckets], width=width, label=f"level {level}")
    ax.set_xticks([b + 0.4 - width / 2 for b in range(len(buckets))], buckets, rotation=30)
    ax.set_xlabel("lateness (ms)")
    ax.set_ylabel("messages")
    ax.set_title("delay lateness per level")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


# -- the fallback renderer: facade.png's canvas and 3x5 font ------------------------------------
def _draw_png(levels: list[int], buckets: Sequence[str], counts: dict[tuple[int, str], int], path: Path) -> None:
    group = max(60, 14 * max(len(levels), 1) + 16)
    left, right, top, bottom = 70, 150, 40, 60
    width, height = left + group * max(len(buckets), 1) + right, 360
    canvas = Canvas(width, height)
    peak = max(counts.values(), default=0) or 1
    plot_h = height - top - bottom
    canvas.text(left, 12, "delay lateness per level: messages per bucket (ms)")
    canvas.rect(left - 2, top, left, height - bottom, (0, 0, 0))
    canvas.rect(left - 2, height - bottom, width - right, height - bottom + 2, (0, 0, 0))
    canvas.text(8, top, str(peak))
    canvas.text(8, height - bottom - 10, "0")
    bar = max(4, (group - 16) // max(len(levels), 1))
    for b, name in enumerate(buckets):
        x = left + b * group + 8
        for i, level in enumerate(levels):
            n = counts.get((level, name), 0)
            h = round(plot_h * n / peak)
            color = _PALETTE[i % len(_PALETTE)]
            canvas.rect(x + i * bar, height - bottom - h, x + (i + 1) * bar - 1, height - bottom, color)
        canvas.text(left + b * group + 4, height - bottom + 8 + (b % 2) * 14, name)
    for i, level in enumerate(levels):
        y = top + i * 18
        canvas.rect(width - right + 16, y, width - right + 28, y + 10, _PALETTE[i % len(_PALETTE)])
        canvas.text(width - right + 34, y, f"level {level}")
    path.write_bytes(canvas.png())
