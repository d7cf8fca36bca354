"""``rocketkafka txn-checker``: run the transaction checker until SIGTERM.

Connection settings come from ``-b``/``--redis``, ``ROCKETKAFKA_*`` environment variables, or a
live ``rocketkafka dev up`` stack; checker options from ``ROCKETKAFKA_TXN_*`` or the flags.
Every option is checked before anything starts.
"""

from __future__ import annotations

import logging

import click

from rocketkafka.tools.service_run import serve, start_when_reachable, stop_on_signals
from rocketkafka.tools.settings import command_settings
from rocketkafka.logs import configure_logging
from rocketkafka.txn.checker import TransactionChecker
from rocketkafka.txn.options import CheckerOptions

log = logging.getLogger(__name__)


@click.command("txn-checker")
@click.option("--timeout-ms", type=int, help="transaction timeout before a check-back [6000]")
@click.option("--interval-ms", type=int, help="scan interval per half partition [60000]")
@click.option("--max-checks", type=int, help="checks before the max-check topic [15]")
@click.option("--half-partitions", type=int, help="partitions of the half/op topics if created here [8]")
@click.option("--instance-name", help="this instance's id in the checker group [host@pid@random]")
@click.option("--lock-lease-ms", type=int, help="partition lock lease [60000]")
@click.option("--lock-renew-interval-ms", type=int, help="partition lock renewal [20000]")
@click.option("--lock-client-expiry-ms", type=int, help="lock treated as lost after this long unrenewed [30000]")
@click.option("--heartbeat-interval-ms", type=int, help="membership heartbeat [1000]")
@click.option("--member-timeout-ms", type=int, help="member considered dead after this long silent [10000]")
@click.option("--metrics-port", type=click.IntRange(0, 65_535), envvar=["ROCKETKAFKA_TXN_METRICS_PORT", "ROCKETKAFKA_METRICS_PORT"],
              help="serve Prometheus metrics on this port [ROCKETKAFKA_TXN_METRICS_PORT or ROCKETKAFKA_METRICS_PORT]")
@click.option("-v", "--verbose", count=True, help="-v info, -vv debug logging")
def txn_checker(timeout_ms: int | None, interval_ms: int | None, max_checks: int | None, half_partitions: int | None,
                instance_name: str | None, lock_lease_ms: int | None, lock_renew_interval_ms: int | None,
                lock_client_expiry_ms: int | None, heartbeat_interval_ms: int | None, member_timeout_ms: int | None,
                metrics_port: int | None, verbose: int) -> None:
    """Check back transactional half messages that were not ended in time (SIGTERM: finish, commit, exit)."""
    if verbose:
        configure_logging(logging.WARNING - 10 * min(verbose, 2))  # keeps the --log-format chosen
    flags = {"transaction_timeout_ms": timeout_ms, "check_interval_ms": interval_ms, "max_check_times": max_checks,
             "half_partitions": half_partitions, "instance_name": instance_name, "lock_lease_ms": lock_lease_ms,
             "lock_renew_interval_ms": lock_renew_interval_ms, "lock_client_expiry_ms": lock_client_expiry_ms,
             "heartbeat_interval_ms": heartbeat_interval_ms, "member_timeout_ms": member_timeout_ms}
    options = CheckerOptions.from_env(**flags)  # ConfigError before anything starts
    settings = command_settings()
    stop = stop_on_signals()
    checker = start_when_reachable(lambda: TransactionChecker(settings, options).start(), stop, "txn-checker")
    if checker is None:
        return
    if metrics_port is not None:
        serve_metrics(checker, metrics_port)
    click.echo(f"txn-checker {options.instance_name} running", err=True)
    if serve(checker, stop) is not None:
        raise SystemExit(1)


def serve_metrics(checker: TransactionChecker, port: int) -> int:
    """Expose the checker's ``rocketkafka_txn_*`` series (:mod:`rocketkafka.txn.metrics`) on ``port``; returns the port."""
    return checker.metrics.serve(port)


if __name__ == "__main__":
    txn_checker()
