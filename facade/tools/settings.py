"""Where a command's connection settings come from: flags, then ``ROCKETKAFKA_*``, then a live ``dev up`` stack.

The root command puts ``-b/--bootstrap-servers`` and ``--redis`` into the process
environment for as long as the command runs (flags override variables), so every
command, service and subprocess reads one source; the previous values come back when
it ends, so a command run in-process (``CliRunner``, a script calling ``main``) leaves
its caller's environment as it was. When neither names a broker, a stack that
``rocketkafka dev up`` started is used -- only while every one of its processes is
alive, and it is said on stderr -- so the development loop needs no exports and a dead
stack is never dialled.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import click

from rocketkafka.config import Settings
from rocketkafka.errors import ConfigError
from rocketkafka.testing.devstack import dev_status

#: The variables the root command's connection flags set.
BOOTSTRAP_ENV = "ROCKETKAFKA_BOOTSTRAP_SERVERS"
REDIS_ENV = "ROCKETKAFKA_REDIS_URLS"


def apply_connection_flags(bootstrap_servers: str | None, redis: str | None) -> Callable[[], None]:
    """Make the root command's flags the process's settings (they win over the variables);
    returns what puts the variables back as they were."""
    given = {name: value for name, value in ((BOOTSTRAP_ENV, bootstrap_servers), (REDIS_ENV, redis)) if value}
    before = {name: os.environ.get(name) for name in given}
    os.environ.update(given)

    def restore() -> None:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    return restore


def command_settings(**overrides: Any) -> Settings:
    """The settings of a command run now (see the module docstring).

    Raises:
        ConfigError: no flag, no variable and no live dev stack names a broker.
    """
    if os.environ.get(BOOTSTRAP_ENV):
        return Settings.load(**overrides)
    stack = dev_status()
    if stack.get("running"):
        click.echo(f"using the dev stack of `rocketkafka dev up` (broker {stack['bootstrap_servers']})", err=True)
        redis = os.environ.get(REDIS_ENV) or stack["redis_urls"]
        return Settings.load({"bootstrap.servers": stack["bootstrap_servers"]}, redis, **overrides)
    raise ConfigError("no broker: pass -b/--bootstrap-servers, set ROCKETKAFKA_BOOTSTRAP_SERVERS, "
                      "or start one with `rocketkafka dev up`")
