"""The root command's ``-b``/``--redis`` hold for the command it runs, and no longer: a command run
in-process (a test's ``CliRunner``, a script calling ``main``) leaves its caller's environment as it was."""

from __future__ import annotations

import os

import click
import pytest
from click.testing import CliRunner

from rocketkafka.tools.cli import main
from rocketkafka.tools.settings import BOOTSTRAP_ENV, REDIS_ENV


@pytest.fixture(autouse=True)
def _print_connection_flags():
    """A command that prints what it sees, on the root group for this module's tests only."""

    @click.command("print-connection-flags")
    def show() -> None:
        """Print the connection variables."""
        click.echo(f"{os.environ.get(BOOTSTRAP_ENV)} {os.environ.get(REDIS_ENV)}")

    main.add_command(show)
    yield
    main.commands.pop("print-connection-flags")


def test_flags_hold_during_the_command_and_the_variables_come_back(monkeypatch):
    monkeypatch.setenv(BOOTSTRAP_ENV, "caller:9092")
    monkeypatch.delenv(REDIS_ENV, raising=False)
    result = CliRunner().invoke(main, ["-b", "127.0.0.1:1", "--redis", "redis://127.0.0.1:1",
                                       "print-connection-flags"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "127.0.0.1:1 redis://127.0.0.1:1"
    assert os.environ[BOOTSTRAP_ENV] == "caller:9092"
    assert REDIS_ENV not in os.environ


def test_without_flags_the_variables_are_untouched(monkeypatch):
    monkeypatch.setenv(BOOTSTRAP_ENV, "caller:9092")
    monkeypatch.setenv(REDIS_ENV, "redis://caller:6379")
    result = CliRunner().invoke(main, ["print-connection-flags"])
    assert result.output.strip() == "caller:9092 redis://caller:6379"
    assert (os.environ[BOOTSTRAP_ENV], os.environ[REDIS_ENV]) == ("caller:9092", "redis://caller:6379")
