"""One benchmark figure as data: :class:`BenchRow`, held against a machine-checkable :class:`Target`.

Every ``rocketkafka bench ...`` returns a list of rows, so one printer, one JSON file
and one chart serve them all. A row's ratio is its value over a baseline measured in
the same run (raw confluent-kafka unless ``baseline_name`` says otherwise, e.g.
``serial`` or ``plain``). A target compares either the value (in the row's unit) or
that ratio with a threshold; the thresholds are the issues' Benchmark sections.

>>> row = BenchRow("produce", "drop-in Producer.produce", 90_000, "msg/s", baseline=100_000,
...                target=Target(">=", 0.85, "ratio"))
>>> round(row.ratio, 2), row.met, row.target_text
(0.9, True, '>= 0.85x raw')
"""

from __future__ import annotations

import operator
import statistics
from dataclasses import dataclass
from typing import Any, Literal

Op = Literal[">=", ">", "<=", "<"]
_OPS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}


@dataclass(frozen=True)
class Target:
    """``value op threshold`` (``of="value"``, in the row's unit) or ``ratio op threshold`` (``of="ratio"``).

    ``note`` says where a threshold comes from when it is derived (``"lease + 1 s"``).
    """

    op: Op
    threshold: float
    of: Literal["value", "ratio"] = "value"
    note: str = ""

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"unknown target operator {self.op!r}")

    def met(self, value: float | None, ratio: float | None) -> bool | None:
        """Whether the figure meets the target; None when the figure it needs is missing."""
        subject = ratio if self.of == "ratio" else value
        return None if subject is None else _OPS[self.op](subject, self.threshold)

    def score(self, value: float | None, ratio: float | None) -> float | None:
        """How far the figure is from the threshold, as a factor where >= 1 means met (for charts).

        ``>=``: figure / threshold; ``<``: threshold / figure (how many times under the limit).
        """
        subject = ratio if self.of == "ratio" else value
        if subject is None:
            return None
        if self.op in (">=", ">"):
            return subject / self.threshold if self.threshold else float("inf")
        return self.threshold / subject if subject > 0 else float("inf")

    def text(self, unit: str, baseline_name: str = "raw") -> str:
        """``">= 0.85x raw"``, ``"< 50 ms"``, ``"<= 4 s (lease + 1 s)"``."""
        amount = f"{self.threshold:g}x {baseline_name}" if self.of == "ratio" else f"{self.threshold:g} {unit}".rstrip()
        return f"{self.op} {amount}" + (f" ({self.note})" if self.note else "")

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "threshold": self.threshold, "of": self.of, "note": self.note}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Target:
        return cls(data["op"], float(data["threshold"]), data.get("of", "value"), data.get("note", ""))


@dataclass(frozen=True)
class BenchRow:
    """One figure of one benchmark.

    Parameters:
        bench: the benchmark's name (``produce``, ``orderly``...).
        figure: what was measured.
        value: the measurement in ``unit``; None when the benchmark failed (see ``error``).
        baseline: the same run's reference figure in the same unit, when the figure has one.
        baseline_name: what the baseline is (``raw`` confluent-kafka, ``serial``, ``plain``...).
        target: the issue's target for this figure, if it has one.
        detail: free text printed beside the figure (counts, settings).
        error: why the benchmark produced no figure.
        spread: min and max of ``value`` over interleaved rounds (``value`` is their median).
        ratios: value / baseline round by round; ``ratio`` is then their median, not a ratio of medians.
        floor_name, floor_ratios, floor_target: a second reference measured in the same rounds -- the
            floor of what any Python client doing this work can reach (``raw + call``) -- and a target on it.
    """

    bench: str
    figure: str
    value: float | None
    unit: str = ""
    baseline: float | None = None
    baseline_name: str = "raw"
    target: Target | None = None
    detail: str = ""
    error: str | None = None
    spread: tuple[float, float] | None = None
    ratios: tuple[float, ...] = ()
    floor_name: str = ""
    floor_ratios: tuple[float, ...] = ()
    floor_target: Target | None = None

    @property
    def ratio(self) -> float | None:
        """The median of the per-round ratios, else value / baseline, when both exist."""
        if self.ratios:
            return statistics.median(self.ratios)
        if self.value is None or not self.baseline:
            return None
        return self.value / self.baseline

    @property
    def ratio_spread(self) -> tuple[float, float] | None:
        return (min(self.ratios), max(self.ratios)) if self.ratios else None

    @property
    def floor_ratio(self) -> float | None:
        return statistics.median(self.floor_ratios) if self.floor_ratios else None

    @property
    def met(self) -> bool | None:
        """Whether every target is met; None without a target or without a figure."""
        verdicts = [] if self.target is None else [self.target.met(self.value, self.ratio)]
        if self.floor_target is not None:
            verdicts.append(self.floor_target.met(self.value, self.floor_ratio))
        if not verdicts or None in verdicts:
            return None
        return all(verdicts)

    @property
    def target_text(self) -> str:
        texts = [self.target.text(self.unit, self.baseline_name)] if self.target else []
        if self.floor_target:
            texts.append(self.floor_target.text(self.unit, self.floor_name))
        return ", ".join(texts)

    @classmethod
    def failed(cls, bench: str, error: BaseException | str) -> BenchRow:
        """The row recording that ``bench`` failed."""
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        return cls(bench, "benchmark failed", None, error=text)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the fields plus the derived ``ratio``, ``met`` and ``target_text``."""
        return {
            "bench": self.bench, "figure": self.figure, "value": self.value, "unit": self.unit,
            "baseline": self.baseline, "baseline_name": self.baseline_name, "ratio": self.ratio,
            "target": self.target.to_dict() if self.target else None, "target_text": self.target_text,
            "met": self.met, "detail": self.detail, "error": self.error,
            "spread": list(self.spread) if self.spread else None, "ratios": list(self.ratios),
            "floor_name": self.floor_name, "floor_ratios": list(self.floor_ratios), "floor_ratio": self.floor_ratio,
            "floor_target": self.floor_target.to_dict() if self.floor_target else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchRow:
        target, floor_target, spread = data.get("target"), data.get("floor_target"), data.get("spread")
        return cls(data["bench"], data["figure"], data.get("value"), data.get("unit", ""), data.get("baseline"),
                   data.get("baseline_name", "raw"), Target.from_dict(target) if target else None,
                   data.get("detail", ""), data.get("error"), tuple(spread) if spread else None,
                   tuple(data.get("ratios") or ()), data.get("floor_name", ""), tuple(data.get("floor_ratios") or ()),
                   Target.from_dict(floor_target) if floor_target else None)
