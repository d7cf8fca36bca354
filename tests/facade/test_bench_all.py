"""``rocketkafka bench all`` end to end on the test broker, at a tiny scale (about 20 s)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from facade.bench_cli import bench

pytestmark = pytest.mark.integration


def test_bench_all_writes_figures_with_raw_ratios(rk_settings, monkeypatch, tmp_path):
    # the session's broker and Redis nodes, given as a cluster: no second embedded stack
    for name, value in rk_settings.environment().items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(bench, ["all", "--scale", "0.02", "--only", "produce,consume", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "[1/2] produce: running" in result.output and "[2/2] consume: done" in result.output

    document = json.loads((tmp_path / "bench.json").read_text())
    assert document["failed"] == [] and set(document["runs"]) == {"produce", "consume"}
    assert document["machine"]["broker"]["bootstrap_servers"] == rk_settings.bootstrap_servers
    rows = {(r["bench"], r["figure"]): r for r in document["rows"]}
    assert all(r["value"] > 0 for r in rows.values())
    drop_in = rows[("produce", "drop-in Producer.produce")]
    assert drop_in["ratio"] > 0 and drop_in["baseline_name"] == "raw" and isinstance(drop_in["met"], bool)
    consumer = rows[("consume", "PushConsumer (concurrent, no-op listener)")]
    assert consumer["ratio"] > 0 and consumer["target"]["threshold"] == 0.7
    assert (tmp_path / "bench.png").stat().st_size > 0 and (tmp_path / "bench.md").exists()
