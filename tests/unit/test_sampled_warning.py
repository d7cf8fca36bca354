"""A stream of like warnings: the first in a window at WARNING with how many came since, the rest at DEBUG."""

from __future__ import annotations

import logging

from rocketkafka.logs import SampledWarning


def test_one_warning_a_window_says_how_many_came_since(caplog, monkeypatch):
    clock = iter([0.0, 1.0, 2.0, 61.0])
    monkeypatch.setattr("rocketkafka.logs.time.monotonic", lambda: next(clock))
    warn = SampledWarning(logging.getLogger("rocketkafka.test"), window_s=60.0)
    with caplog.at_level(logging.DEBUG, logger="rocketkafka.test"):
        for i in range(4):
            warn("skipped record %d", i)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, "skipped record 0"), (logging.DEBUG, "skipped record 1"), (logging.DEBUG, "skipped record 2"),
        (logging.WARNING, "skipped record 3 (2 more like it since the last warning)")]
    assert all(r.filename == "test_sampled_warning.py" for r in caplog.records)  # the caller, not logs.py
