"""``rocketkafka bench all`` end to end on the test broker, at a tiny scale (about 70 s)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rocketkafka.tools.bench.cli import bench

pytestmark = pytest.mark.integration


@pytest.mark.any_broker  # Spark's or the CLI's side, minutes long: CI runs it in the Tansu pass only
def test_bench_all_writes_figures_with_raw_ratios(rk_settings, monkeypatch, tmp_path):
    # the session's broker and Redis nodes, given as a cluster: no second embedded stack
    for name, value in rk_settings.environment().items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(bench, ["all", "--scale", "0.02", "--only", "produce,consume,latency,idle",
                                        "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "[1/4] produce: running" in result.output and "[4/4] idle: done" in result.output

    document = json.loads((tmp_path / "bench.json").read_text())
    assert document["failed"] == [] and set(document["runs"]) == {"produce", "consume", "latency", "idle"}
    assert document["machine"]["broker"]["bootstrap_servers"] == rk_settings.bootstrap_servers
    rows = {(r["bench"], r["figure"]): r for r in document["rows"]}
    assert all(r["value"] > 0 for r in rows.values())
    drop_in = rows[("produce", "drop-in Producer.produce vs raw")]
    assert drop_in["ratio"] > 0 and drop_in["baseline_name"] == "raw" and isinstance(drop_in["met"], bool)
    send_async = rows[("produce", "RocketMQ Producer.send_async vs raw+same work")]
    assert send_async["ratio"] > 0 and send_async["target"]["threshold"] == 0.85
    consumer = rows[("consume", "PushConsumer concurrent, no-op listener")]
    assert consumer["ratio"] > 0 and consumer["target"]["threshold"] == 0.9  # against raw + call, equal fetch settings
    assert consumer["baseline_name"] == "raw + call, engine's fetch" and "x raw at librdkafka's defaults" in consumer["detail"]
    equal = [r for (b, f), r in rows.items() if b == "consume" and f.startswith("raw + call, the engine's fetch")]
    assert len(equal) == 1 and "fetch.queue.backoff.ms=10" in equal[0]["detail"] and equal[0]["ratio"] > 0
    polled = rows[("consume", "drop-in Consumer.poll()")]
    assert polled["baseline_name"] == "raw-poll" and polled["ratio"] > 0
    latency = rows[("latency", "PushConsumer orderly, defaults: p99")]  # judged against the raw reader beside it
    beside = float(latency["detail"].split("same records at the same time: p99 ")[1].split(" ms")[0].replace(",", ""))
    assert latency["value"] > 0 and latency["target"]["note"] == "raw tuned beside p99 + 20 ms"
    assert latency["target"]["threshold"] == pytest.approx(beside + 20, rel=0.01)  # the detail rounds it
    assert rows[("latency", "raw, tuned (fetch.wait.max.ms=5): p99")]["target"] is None
    idle = {f: r for (b, f), r in rows.items() if b == "idle"}  # % of a core, measured in a child of its own
    push = idle["PushConsumer concurrent, no-op listener, defaults"]
    assert push["unit"] == "% core" and push["target"]["threshold"] == 0.5 and isinstance(push["met"], bool)
    assert push["baseline_name"] == "raw, engine's fetch" and push["ratio"] > 0
    assert idle["delay forwarder, no due records, defaults"]["target"]["threshold"] == 0.5 and len(idle) == 4
    assert (tmp_path / "bench.png").stat().st_size > 0 and (tmp_path / "bench.md").exists()
