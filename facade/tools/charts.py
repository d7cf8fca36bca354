"""Charts of the command line (``bench``, ``chaos``, ``spark audit-delay``), drawn with matplotlib.

matplotlib is the ``[bench]`` extra; :func:`pyplot` says so when it is missing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rocketkafka.errors import ConfigError

GREEN, RED, GREY = "#2ca02c", "#d62728", "#7f7f7f"
#: The bench chart's axis ends: log2 of the factor, 1/8x .. 8x.
CLIP = 3


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend.

    Raises:
        ConfigError: matplotlib is not installed (``pip install 'rocketkafka[bench]'``).
    """
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("charts need matplotlib: pip install 'rocketkafka[bench]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def factor_chart(rows: Sequence[tuple[str, float | None, bool, str]], path: Path, title: str) -> Path:
    """Horizontal bars from 1x (the target) to each row's factor, log2 axis clipped to 1/8x..8x.

    ``rows`` are ``(label, factor or None when it failed, met, note)``: the factor by which a
    figure beats (> 1, green) or misses (< 1, red) its target.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(13, 0.42 * max(len(rows), 1) + 1.6))
    for y, (_label, factor, met, note) in enumerate(rows):
        if factor is None:
            ax.text(0, y, f"  {note}", va="center", color=RED, fontsize=8)
            continue
        exponent = CLIP if math.isinf(factor) else -CLIP if factor <= 0 else max(-CLIP, min(CLIP, math.log2(factor)))
        color = GREEN if met else RED
        ax.barh(y, exponent, color=color, height=0.6)
        ax.text(CLIP + 0.1, y, note, va="center", color=color, fontsize=8)
    ax.set_yticks(range(len(rows)), [label for label, *_ in rows], fontsize=8)
    ax.set_ylim(max(len(rows), 1) - 0.5, -0.5)  # first row on top, every row inside the frame
    ticks = list(range(-CLIP, CLIP + 1))
    ax.set_xticks(ticks, ["target" if k == 0 else f"{2 ** k}x" if k > 0 else f"1/{2 ** -k}x" for k in ticks])
    ax.set_xlim(-CLIP, CLIP)
    ax.axvline(0, color="black", linewidth=1)
    ax.grid(axis="x", color="#e1e1e1")
    ax.set_title(title, fontsize=10, loc="left")
    ax.set_xlabel("factor by which each figure meets (right) or misses (left) its target, log scale", color=GREY)
    return _save(plt, fig, path)


def lateness_chart(histogram: Sequence[Mapping[str, Any]], buckets: Sequence[str], path: Path) -> Path:
    """``histogram`` rows (``level``, ``bucket``, ``count``) as grouped bars per delay level."""
    plt = pyplot()
    levels = sorted({int(r["level"]) for r in histogram})
    counts = {(int(r["level"]), r["bucket"]): int(r["count"]) for r in histogram}
    fig, ax = plt.subplots(figsize=(10, 5))
    width = 0.8 / max(len(levels), 1)
    for i, level in enumerate(levels):
        xs = [b + i * width for b in range(len(buckets))]
        ax.bar(xs, [counts.get((level, b), 0) for b in buckets], width=width, label=f"level {level}")
    ax.set_xticks([b + 0.4 - width / 2 for b in range(len(buckets))], list(buckets), rotation=30)
    ax.set_xlabel("lateness (ms)")
    ax.set_ylabel("messages")
    ax.set_title("delay lateness per level")
    if levels:
        ax.legend()
    return _save(plt, fig, path)


def _save(plt: Any, fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
