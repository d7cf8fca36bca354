"""The ``spark`` command group and the benchmark, end to end on the test broker."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from rocketkafka.tools.bench.spark import bench_spark
from rocketkafka.tools.spark_cli import spark_cli

pytestmark = pytest.mark.integration


def test_commands_are_listed():
    result = CliRunner().invoke(spark_cli, ["--help"])
    assert result.exit_code == 0
    for command in ("audit-order", "audit-delay", "audit-txn", "bench"):
        assert command in result.output


def test_audit_txn_command_on_an_empty_prefix(spark, rk_settings, tmp_path):
    args = ["audit-txn", "-b", rk_settings.bootstrap_servers, "--topic-prefix", rk_settings.topic_prefix]
    refused = CliRunner().invoke(spark_cli, args)
    assert refused.exit_code == 1 and refused.output.startswith("Error: audit-txn: no transaction topics"), refused.output
    out = tmp_path / "txn"
    result = CliRunner().invoke(spark_cli, [*args, "--output", str(out), "--strict", "--allow-empty"])
    assert result.exit_code == 0, result.output
    assert "transactions" in result.output and out.exists()


def test_audit_commands_report_a_missing_topic_cleanly(spark, rk_settings):
    result = CliRunner().invoke(spark_cli, ["audit-delay", "no-such-topic-here", "-b", rk_settings.bootstrap_servers])
    assert result.exit_code == 1 and "does not exist" in result.output


@pytest.mark.any_broker  # Spark's or the CLI's side, minutes long: CI runs it in the Tansu pass only
def test_bench_reports_spark_beside_raw_and_audits_cold_and_warm(spark, rk_settings, capsys):
    figures = bench_spark(rk_settings.bootstrap_servers, n=20_000, size=100, partitions=4, runs=1, spark=spark,
                          echo=True, audit_messages=5_000)
    assert figures["messages"] == 20_000 and figures["raw_rows_per_s"] > 0 and figures["spark_rows_per_s"] > 0
    # cold: a fresh `rocketkafka spark audit-order` process; warm: the same audit in this (warm) session
    assert figures["audit_cold_s"] > figures["audit_warm_s"] > 0
    out = capsys.readouterr().out
    assert "spark read, best warm query" in out and "cold: a fresh rocketkafka process" in out
    print(f"\naudit-order on 5,000 messages: cold {figures['audit_cold_s']:.1f} s, warm {figures['audit_warm_s']:.1f} s")
