"""The verdict pattern of ``.ci/run``: a failure whose message matches it is never run again. A timing
failure must not match it by accident (stop 38's CI: a lateness bound missed under load quoted ``early=[]``,
so the pass failed without the one rerun it gives a timing failure), and a real verdict must."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.delay.conftest import LatenessReport

CI_RUN = Path(__file__).parents[2] / ".ci" / "run"


def _verdict() -> re.Pattern[str]:
    line = next(ln for ln in CI_RUN.read_text().splitlines() if ln.startswith("VERDICT="))
    return re.compile(line.split("=", 1)[1].strip("'"))


def _failure(report: LatenessReport) -> str:
    """What pytest-rerunfailures matches: the type and message of the rewritten assertion, as the delay tests write it."""
    with pytest.raises(AssertionError) as caught:
        assert report.within_bound(), report.summary()
    return f"{type(caught.value).__name__}: {caught.value}"


def test_a_lateness_bound_missed_is_not_a_verdict() -> None:
    late = LatenessReport(count=2500, early=[], p50=10, p99=384, max=572, forward_p99=304, transport_p99=189,
                          stall_ms=51)
    message = _failure(late)
    assert "forwarder p99 304 ms" in message
    assert not _verdict().search(message), message


def test_an_early_delivery_is_a_verdict() -> None:
    early = LatenessReport(count=2500, early=["id-1"], p50=10, p99=384, max=572, forward_p99=304, transport_p99=189)
    assert _verdict().search(_failure(early))
