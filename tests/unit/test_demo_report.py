"""The demo's report: a claim whose check failed, or a step that raised, makes the exit code 1."""

from __future__ import annotations

from rocketkafka.tools.demo_report import DemoReport


def test_passing_checks_exit_0(capsys):
    report = DemoReport(steps=1)
    with report.step("one"):
        report.check("fine", True, "measured")
    assert report.finish() == 0
    out = capsys.readouterr().out
    assert "[1/1] one" in out and "[ok] fine: measured" in out and "all 1 demo checks passed" in out


def test_a_failed_check_or_a_step_that_raises_exits_1_and_says_so(capsys):
    report = DemoReport(steps=3)
    with report.step("first"):
        report.check("claim", False, "it was not so")
    with report.step("broken: it raises"):
        raise TimeoutError("no answer")
    with report.step("never counted"):
        pass
    assert report.finish() == 1
    out = capsys.readouterr().out
    assert "[FAILED] claim: it was not so" in out and "[FAILED] broken: TimeoutError: no answer" in out
    assert "2 of 2 demo checks failed (claim, broken)" in out
