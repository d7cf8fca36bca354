"""Interleaved rounds: every contender once per round, in a rotated order, each in a fresh process.

The embedded broker's speed drifts by 2-3x between minutes (docs/benchmarks/history.md), so one run of A
against one run of B compares two moments, not two clients. Here each round runs every
contender back to back, the order rotating from round to round, and a ratio is taken
*within* a round (contender / baseline of the same round); the figure is the median
over rounds and the spread its min-max. A contender runs in its own Python process
(:mod:`~rocketkafka.tools.bench.contenders`), so no contender inherits another's
threads, heap or librdkafka instance.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rocketkafka.config import Settings

Log = Callable[[str], Any]


class ContenderError(RuntimeError):
    """A contender process failed or printed no result."""


def run_contender(settings: Settings, spec: Mapping[str, Any], timeout: float = 600.0) -> dict[str, Any]:
    """Run one contender (``spec["kind"]`` and its arguments) in a fresh process; its result dict.

    The spec (no secret: names and counts) is the command line; the settings go through the environment.
    """
    proc = subprocess.run([sys.executable, "-m", "rocketkafka.tools.bench.contenders", json.dumps(dict(spec))],
                          capture_output=True, text=True, timeout=timeout, env=settings.child_environment())
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise ContenderError(f"contender {spec.get('kind')} failed (exit {proc.returncode}): {' | '.join(tail)}")
    return json.loads(lines[-1])


def interleave(names: Sequence[str], run_one: Callable[[str], dict[str, Any]], rounds: int,
               log: Log = print) -> dict[str, list[dict[str, Any]]]:
    """Run every name once per round, rotating the order and reversing it every other round (no name always
    follows the same one); the results per name, in round order."""
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for r in range(rounds):
        order = list(names[r % len(names):]) + list(names[:r % len(names)])
        if r % 2:
            order.reverse()
        for name in order:
            results[name].append(run_one(name))
        log(f"round {r + 1}/{rounds}: " + ", ".join(f"{n} {_short(results[n][-1])}" for n in names))
    return results


def _short(result: Mapping[str, Any]) -> str:
    if "rate" in result:
        return f"{result['rate']:,.0f}/s"
    if "cpu_pct" in result:
        return f"{result['cpu_pct']:.2f}% of a core"
    if "beside_p50_ms" in result:
        return (f"p50 {result['p50_ms']:.1f} ms p99 {result['p99_ms']:.1f} ms "
                f"(raw tuned beside: p50 {result['beside_p50_ms']:.1f} ms p99 {result['beside_p99_ms']:.1f} ms)")
    if "p50_ms" in result:
        return f"p50 {result['p50_ms']:.1f} ms p99 {result['p99_ms']:.1f} ms"
    return "?"


@dataclass(frozen=True)
class Figure:
    """One contender's samples of one measure over the rounds, and its ratios to a baseline round by round."""

    samples: tuple[float, ...]
    ratios: tuple[float, ...] = ()

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def spread(self) -> tuple[float, float]:
        return min(self.samples), max(self.samples)


def figure(results: Mapping[str, list[dict[str, Any]]], name: str, measure: str,
           baseline: str | None = None) -> Figure:
    """``name``'s ``measure`` per round, with its ratio to ``baseline``'s in the same round."""
    samples = tuple(float(r[measure]) for r in results[name])
    if baseline is None:
        return Figure(samples)
    base = [float(r[measure]) for r in results[baseline]]
    return Figure(samples, tuple(s / b for s, b in zip(samples, base) if b))


def percentile(ordered: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) of sorted values, nearest rank."""
    if not ordered:
        raise ValueError("no values")
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]
