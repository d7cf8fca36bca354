"""Benchmark rows, targets, the table/markdown/JSON report, the PNG chart and ``bench all`` with fake benchmarks."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocketkafka.tools.bench import cli as bench_cli, run_all as bench_all
from rocketkafka.tools.bench.run_all import Bench, run_benches, scaled, select
from rocketkafka.tools.bench.chart import bench_chart, charted_rows
from rocketkafka.tools.bench.report import (markdown_table, read_json, report_dict, table_lines, write_json)
from rocketkafka.tools.bench.rows import BenchRow, Target
from rocketkafka.config import Settings

RAW = 100_000.0


def rows() -> list[BenchRow]:
    return [
        BenchRow("produce", "raw", RAW, "msg/s"),
        BenchRow("produce", "drop-in", 54_000, "msg/s", RAW, target=Target(">=", 0.85, "ratio")),
        BenchRow("orderly", "renew | 1000 locks", 7.3, "ms", target=Target("<", 20)),
        BenchRow("orderly", "sigkill", 2.5, "s", target=Target("<=", 4, note="lease 3 s + 1 s")),
        BenchRow.failed("txn", RuntimeError("broker gone")),
    ]


# -- targets -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("target", "value", "ratio", "met"), [
    (Target(">=", 0.85, "ratio"), 1.0, 0.85, True),
    (Target(">=", 0.85, "ratio"), 1e9, 0.84, False),  # a ratio target ignores the value
    (Target(">", 1, "value"), 1, None, False),
    (Target("<", 50), 49.9, None, True),
    (Target("<", 50), 50, None, False),
    (Target("<=", 4), 4, None, True),
    (Target(">=", 0.6, "ratio"), 5.0, None, None),  # no baseline: unknown, not missed
])
def test_target_met(target, value, ratio, met):
    assert target.met(value, ratio) is met


def test_target_text():
    assert Target(">=", 0.85, "ratio").text("msg/s") == ">= 0.85x raw"
    assert Target(">=", 20, "ratio").text("msg/s", "serial") == ">= 20x serial"
    assert Target("<", 50).text("ms") == "< 50 ms"
    assert Target("<=", 4, note="lease 3 s + 1 s").text("s") == "<= 4 s (lease 3 s + 1 s)"


def test_target_score_is_at_least_one_exactly_when_met():
    assert Target(">=", 0.5, "ratio").score(None, 1.0) == 2.0
    assert Target("<", 20).score(5, None) == 4.0
    assert Target("<", 20).score(40, None) == 0.5
    assert Target("<", 20).score(0, None) == float("inf")


def test_unknown_operator_is_refused():
    with pytest.raises(ValueError):
        Target("==", 1)  # type: ignore[arg-type]


# -- rows ----------------------------------------------------------------------------------------------
def test_row_ratio_and_met():
    row = rows()[1]
    assert row.ratio == pytest.approx(0.54) and row.met is False and row.target_text == ">= 0.85x raw"
    assert rows()[0].ratio is None and rows()[0].met is None
    assert BenchRow("x", "y", 5.0, baseline=0.0).ratio is None  # a zero baseline gives no ratio


def test_failed_row_carries_the_error():
    row = BenchRow.failed("txn", RuntimeError("broker gone"))
    assert row.value is None and row.error == "RuntimeError: broker gone" and row.met is None


def test_row_round_trips_through_a_dict():
    for row in rows():
        assert BenchRow.from_dict(json.loads(json.dumps(row.to_dict()))) == row


# -- table and markdown --------------------------------------------------------------------------------
def test_table_marks_met_missed_and_failed_rows():
    lines = table_lines(rows())
    assert lines[0].split()[:3] == ["bench", "figure", "value"]
    assert "MISS" in lines[2] and "0.54x raw" in lines[2] and "54,000" in lines[2]
    assert lines[3].endswith(" ok") and "7.3" in lines[3]
    assert "ERROR" in lines[5] and "broker gone" in lines[5]


def test_markdown_names_each_command_once_and_marks_misses():
    text = markdown_table(rows(), {"cores": 2, "python": "3.11.7", "broker": {"description": "embedded Tansu"}})
    lines = text.splitlines()
    assert lines[0].startswith("Ran on 2 cores") and "embedded Tansu" in lines[0]
    assert lines[2:4] == ["| command | figure | measured | target |", "|---|---|---|---|"]
    assert len(lines) == 4 + len(rows())
    assert text.count("`rocketkafka bench produce`") == 1 and text.count("`rocketkafka bench orderly`") == 1
    assert "54,000 msg/s; 0.54x raw | >= 0.85x raw: **missed** |" in text
    assert "renew \\| 1000 locks" in text  # a pipe in a cell is escaped
    assert "failed: RuntimeError: broker gone" in text


# -- JSON ----------------------------------------------------------------------------------------------
def test_json_shape_and_round_trip(tmp_path):
    machine = {"cores": 2, "broker": {"kind": "embedded"}}
    runs = {"produce": {"seconds": 1.0, "ok": True, "error": None},
            "txn": {"seconds": 2.0, "ok": False, "error": "RuntimeError: broker gone"}}
    path = write_json(tmp_path / "out" / "bench.json", report_dict(rows(), machine, runs, 0.05))
    document = json.loads(path.read_text())
    assert set(document) == {"schema", "scale", "machine", "runs", "failed", "rows"}
    assert document["scale"] == 0.05 and document["failed"] == ["txn"] and document["machine"] == machine
    drop_in = document["rows"][1]
    assert drop_in["ratio"] == pytest.approx(0.54) and drop_in["met"] is False
    assert drop_in["target"] == {"op": ">=", "threshold": 0.85, "of": "ratio", "note": ""}
    assert drop_in["target_text"] == ">= 0.85x raw"
    back, _ = read_json(path)
    assert back == rows()


def test_machine_info_says_what_the_figures_ran_on():
    from rocketkafka.tools.bench.report import machine_info

    info = machine_info({"kind": "given", "description": "broker b:9092"})
    assert info["cores"] >= 1 and info["ram_gib"] > 0 and info["python"].count(".") == 2
    assert info["confluent_kafka"][0].isdigit() and info["librdkafka"][0].isdigit()
    assert info["broker"]["kind"] == "given" and info["date"][:2] == "20"


# -- PNG -----------------------------------------------------------------------------------------------
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _colors(path) -> set[tuple[int, int, int]]:
    """The RGB colours a PNG uses (read back with matplotlib, which drew it)."""
    import matplotlib.image

    pixels = (matplotlib.image.imread(path)[:, :, :3] * 255).round().astype(int).reshape(-1, 3)
    return {tuple(p) for p in pixels.tolist()}


def test_chart_is_a_png_with_a_bar_per_target_red_when_missed_green_when_met(tmp_path):
    shown = charted_rows(rows())
    assert [r.figure for r in shown] == ["drop-in", "renew | 1000 locks", "sigkill", "benchmark failed"]
    path = bench_chart(rows(), tmp_path / "bench.png")
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    colors = _colors(path)
    assert (0xD6, 0x27, 0x28) in colors and (0x2C, 0xA0, 0x2C) in colors  # red (missed) and green (met) bars


def test_chart_of_no_targets_still_draws(tmp_path):
    path = bench_chart([BenchRow("p", "raw", 1.0)], tmp_path / "b.png")
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    assert (0xD6, 0x27, 0x28) not in _colors(path)


# -- selection, scaling and the runner -----------------------------------------------------------------
def test_select_keeps_the_run_order():
    assert select() == list(bench_all.BENCHES)
    assert select(["spark", "produce"]) == ["produce", "spark"]
    assert select(skip=["spark", "delay"]) == ["produce", "consume", "latency", "orderly", "txn", "memory", "idle", "scale"]
    assert "idle" not in select(skip=["idle"]) and select(["idle"]) == ["idle"]
    with pytest.raises(ValueError, match="nope"):
        select(["nope"])


def test_scaled_has_a_floor():
    assert scaled(200_000, 1.0, 2_000) == 200_000
    assert scaled(200_000, 0.05, 2_000) == 10_000
    assert scaled(200_000, 0.001, 2_000) == 2_000


def _fake_benches(calls: list[str]) -> dict[str, Bench]:
    def ok(name: str):
        def run(settings, scale, log):
            calls.append(name)
            log("working")
            return [BenchRow(name, "raw", 10.0 * scale, "msg/s"),
                    BenchRow(name, "ours", 9.0 * scale, "msg/s", 10.0 * scale, target=Target(">=", 0.85, "ratio"))]
        return run

    def broken(settings, scale, log):
        calls.append("broken")
        raise RuntimeError("no broker")

    return {"a": Bench("a", ok("a")), "broken": Bench("broken", broken), "c": Bench("c", ok("c"))}


def test_a_failing_bench_becomes_an_error_row_and_the_rest_still_run():
    calls, lines, seen = [], [], []
    result = run_benches(Settings(), ["a", "broken", "c"], 2.0, lines.append, _fake_benches(calls),
                         after_each=lambda r: seen.append(len(r.rows)))
    assert calls == ["a", "broken", "c"] and seen == [2, 3, 5]
    assert result.failed == ["broken"] and result.runs["a"]["ok"] and result.runs["a"]["seconds"] >= 0
    assert result.rows[2] == BenchRow.failed("broken", "RuntimeError: no broker")
    assert result.rows[0].value == 20.0  # the scale reached the runner
    assert "[1/3] a: running (scale 2)" in lines and "    working" in lines
    assert any(line.startswith("[2/3] broken: FAILED: RuntimeError: no broker") for line in lines)


def test_bench_all_command_with_fake_benches(tmp_path, monkeypatch):
    calls: list[str] = []
    fakes = _fake_benches(calls)
    monkeypatch.setattr(bench_all, "BENCHES", fakes)
    monkeypatch.setattr(bench_cli, "BENCHES", fakes)
    monkeypatch.setattr(bench_cli, "bench_settings", lambda: contextlib.nullcontext(Settings()))
    monkeypatch.setenv("ROCKETKAFKA_BOOTSTRAP_SERVERS", "b:9092")  # a given cluster: no embedded stack is described
    result = CliRunner().invoke(bench_cli.bench, ["all", "--scale", "0.5", "--skip", "c", "--out", str(tmp_path),
                                                  "--markdown"])
    assert result.exit_code == 1, result.output  # a benchmark failed
    assert calls == ["a", "broken"]
    assert "| `rocketkafka bench a` | raw | 5 msg/s |" in result.output
    document = json.loads((tmp_path / "bench.json").read_text())
    assert document["failed"] == ["broken"] and document["machine"]["broker"]["kind"] == "given"
    assert [r["bench"] for r in document["rows"]] == ["a", "a", "broken"]
    assert (tmp_path / "bench.png").read_bytes()[:8] == PNG_SIGNATURE
    assert (tmp_path / "bench.md").read_text().startswith("Ran on")

    shown = CliRunner().invoke(bench_cli.bench, ["show", str(tmp_path / "bench.json")])
    assert shown.exit_code == 0, shown.output
    assert "MISS" not in shown.output and " ok\n" in shown.output and "ERROR" in shown.output


def test_unknown_bench_names_are_a_usage_error():
    result = CliRunner().invoke(bench_cli.bench, ["all", "--only", "produce,nope"])
    assert result.exit_code == 2 and "nope" in result.output


# -- the benches' own rows -----------------------------------------------------------------------------
def test_delay_rows_hold_issue_4s_targets():
    from rocketkafka.tools.bench.delay import DelayBenchResult

    result = DelayBenchResult(sent=100, received=100, p99_ms=80, forward_p99_ms=20, raw_p99_ms=40,
                              pipe_rates=[1000, 2000, 1500], forwarder_rates=[700, 1000, 1200])
    by_figure = {r.figure: r for r in result.rows()}
    e2e = by_figure["end-to-end lateness p99 (receive - due)"]
    assert e2e.met is False and e2e.ratio == 2.0 and e2e.target_text == "<= 70 ms (raw p99 + 30 ms)"
    assert by_figure["forwarder's own lateness p99 (produce - due)"].met is True
    forwarder = by_figure["forwarder, already-due records"]
    # the median of per-round ratios (0.7, 0.5, 0.8), not the ratio of the medians (1000 / 1500)
    assert forwarder.ratio == pytest.approx(0.7) and forwarder.ratio_spread == (0.5, 0.8)
    assert forwarder.met and forwarder.target_text == ">= 0.6x pipe" and forwarder.spread == (700, 1200)


def test_spark_rows_hold_issue_6s_target():
    from rocketkafka.tools.bench.spark import spark_rows

    figures = {"messages": 1000, "size": 100, "partitions": 8, "master": "local[2]", "raw_rows_per_s": 1000.0,
               "spark_rows_per_s": 400.0, "spark_cold_rows_per_s": 100.0}
    warm = spark_rows(figures)[1]
    assert warm.ratio == 0.4 and warm.met is False and warm.target_text == ">= 0.5x raw"


def test_every_issue_target_is_declared_once_where_its_bench_lives():
    from rocketkafka.tools.bench.delay import FORWARDER_TARGET, LATENESS_TARGET
    from rocketkafka.tools.bench.produce import FLOOR_TARGET, PLAIN_TARGET, RAW_TARGET
    from rocketkafka.tools.bench.consume import TARGETS
    from rocketkafka.tools.bench.txn import TXN_TARGET

    thresholds = {mode: target.threshold for mode, (_, target, _) in TARGETS.items()}
    assert thresholds == {"push-concurrent": 0.9, "push-orderly": 0.9, "push-keyed": 0.8, "push-batch": 1.0,
                          "dropin-poll": 0.95, "dropin-consume": 0.9,  # issue 34's goals
                          "push-async-concurrent": 0.8, "push-async-orderly": 0.8}  # issue 35's: of the sync twin
    assert {mode: reference for mode, (_, _, reference) in TARGETS.items() if mode.startswith("push-")} == \
        {**dict.fromkeys(("push-concurrent", "push-orderly", "push-keyed", "push-batch"), "raw+call-engine"),
         "push-async-concurrent": "push-concurrent", "push-async-orderly": "push-orderly"}
    assert (PLAIN_TARGET.threshold, FLOOR_TARGET.threshold, RAW_TARGET.threshold) == (0.95, 0.85, 0.5)
    assert TXN_TARGET.threshold == 0.3
    assert (LATENESS_TARGET.op, LATENESS_TARGET.threshold, FORWARDER_TARGET.threshold) == ("<", 50.0, 0.6)


def test_idle_rows_hold_issue_34s_goals_against_raw_floors():
    from rocketkafka.tools.bench.idle import IDLE_TARGET, TITLES, idle_rows

    def cpu(*values, owned=8):
        return [{"cpu_pct": v, "ready_s": 2.0, "owned": owned} for v in values]

    results = {"raw-default": cpu(0.2, 0.1, 0.4), "raw-engine": cpu(0.5, 0.4, 1.0),
               "push-concurrent": cpu(1.5, 1.2, 1.5), "forwarder": cpu(3.8, 4.0, 3.0, owned=96)}
    rows = {mode: row for mode, row in zip(TITLES, idle_rows(results, 10.0, 3, "fetch.wait.max.ms=10"))}
    assert [r.figure for r in rows.values()] == list(TITLES.values())
    assert {r.bench for r in rows.values()} == {"idle"} and {r.unit for r in rows.values()} == {"% core"}
    assert (IDLE_TARGET.op, IDLE_TARGET.threshold) == ("<=", 0.5)
    assert rows["raw-default"].value == 0.2 and rows["raw-default"].target is None
    engine = rows["raw-engine"]
    assert "fetch.wait.max.ms=10" in engine.detail and engine.ratio == pytest.approx(2.5) and engine.baseline_name == "raw, defaults" and engine.met is None
    push = rows["push-concurrent"]
    # per round 1.5/0.5, 1.2/0.4, 1.5/1.0: median 3.0 (not 1.5 / 0.5 of the medians); to raw at defaults 7.5, 12, 3.75
    assert push.value == 1.5 and push.spread == (1.2, 1.5) and push.ratio == pytest.approx(3.0)
    assert push.floor_ratio == pytest.approx(7.5) and push.floor_name == "raw, defaults"
    assert push.met is False and push.target_text == "<= 0.5 % core (issue 34)"  # the goal is missed, and says so
    forwarder = rows["forwarder"]
    assert forwarder.value == 3.8 and forwarder.met is False and forwarder.ratio is None
    assert "96 level and step partitions" in forwarder.detail
    met = idle_rows({**results, "push-concurrent": cpu(0.3, 0.5, 0.4)}, 10.0, 3)[2]
    assert met.met is True and "MISS" not in table_lines([met])[-1]


def test_scale_rows_hold_issue_34s_scale_goals():
    from rocketkafka.tools.bench.scale import scale_rows

    def members(cpu, take, split, spread, counted):
        return {"cpu_pct": cpu, "take_s": take, "split_s": split, "spread_s": spread, "sent_s": 0.25,
                "lag_s": spread - 0.25, "counted": counted,
                "window_s": 10.0, "owned": 2048}

    results = {"members": [members(2.0, 0.8, 1.2, 0.4, 500.0), members(3.0, 0.9, 0.6, 0.7, 700.0),
                           members(4.0, 1.5, 0.5, 0.3, 600.0)],
               "raw-pair": [{"cpu_pct": c, "counted": 6.0, "window_s": 10.0, "owned": 2048} for c in (1.0, 1.0, 2.0)]}
    rows = {r.figure: r for r in scale_rows(results, 2048, 10.0, 3)}
    take = rows["take all 2,048 partitions: one orderly member"]
    assert (take.value, take.spread, take.unit, take.met) == (0.9, (0.8, 1.5), "s", True)
    assert rows["split 2,048 partitions on a join"].value == 0.6 and rows["split 2,048 partitions on a join"].met
    spread = rows["one record to each of 2,048 partitions: from the first send until every one is handled"]
    assert spread.value == 0.4 and spread.target is None and "flush took 0.25 s of it" in spread.detail
    after = rows["one record to each of 2,048 partitions: longest from its acknowledgement to its handling"]
    assert after.value == pytest.approx(0.15) and after.spread == pytest.approx((0.05, 0.45))
    assert after.target.threshold == 0.5 and after.met is True
    idle = rows["two orderly members idle, 2,048 partitions"]
    # per round 2/1, 3/1, 4/2: the median ratio is 2.0 against a goal of 1.5x the raw pair: missed
    assert idle.value == 3.0 and idle.ratio == pytest.approx(2.0) and idle.met is False
    assert idle.baseline_name == "raw pair" and rows["raw pair idle, 2,048 partitions"].value == 1.0
    commands = rows["Redis commands, two idle members, 2,048 partitions"]
    assert commands.value == pytest.approx(60.0) and commands.target is None and "0.6/s" in commands.detail


def test_idle_cpu_is_read_from_the_process_cpu_clock():
    import os
    import time

    from rocketkafka.tools.bench.idle import cpu_seconds, cpu_share

    before, own = cpu_seconds(os.getpid()), time.process_time()
    sum(range(300_000))  # some CPU
    assert cpu_seconds(os.getpid()) - before == pytest.approx(time.process_time() - own, abs=0.005)
    assert cpu_share(0.05, 10.0) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        cpu_share(1.0, 0.0)


def test_the_benchmarks_page_explains_bench_all():
    page = (Path(__file__).resolve().parents[2] / "docs" / "benchmarks" / "index.md").read_text()
    intro = page.split("\n## ", 1)[0]
    assert "rocketkafka bench all" in intro and "bench.json" in intro and "bench.png" in intro


def test_a_push_consumer_is_judged_against_raw_plus_call_at_the_engines_fetch_settings():
    """Not against raw at librdkafka's defaults, whose loop stalls on a full prefetch queue (issue 34's fair floors)."""
    from rocketkafka.tools.bench.consume import consume_rows

    def rates(*values):
        return [{"rate": v, "first_s": 1.0} for v in values]

    results = {"raw": rates(200, 200, 900), "raw+call": rates(200, 190, 800), "raw-engine": rates(1000, 1000, 1000),
               "raw+call-engine": rates(800, 700, 900), "push-concurrent": rates(400, 420, 450),
               "dropin-consume": rates(190, 200, 850)}
    rows = {r.figure: r for r in consume_rows(results, ("push-concurrent", "dropin-consume"), 1000, 3)}
    push = rows["PushConsumer concurrent, no-op listener"]
    assert push.ratio == pytest.approx(0.5) and push.met is False  # 400/800, 420/700, 450/900: median 0.5
    assert push.target_text == ">= 0.9x raw + call, engine's fetch" and not push.floor_ratios
    assert "2.00x raw at librdkafka's defaults (0.50-2.10)" in push.detail
    drop_in = rows["drop-in Consumer.consume(1000)"]
    assert drop_in.ratio == pytest.approx(0.95) and drop_in.met is True and drop_in.floor_name == "floor"
