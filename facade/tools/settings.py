"""Where a command's connection settings come from: flags, then ``ROCKETKAFKA_*`` (and the properties file
``ROCKETKAFKA_CONFIG_FILE`` names), then a live ``dev up`` stack.

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
from rocketkafka.config_file import CONFIG_FILE_ENV, config_file_values
from rocketkafka.errors import ConfigError
from rocketkafka.testing.devstack import dev_status

#: The variables the root command's connection flags set.
BOOTSTRAP_ENV = "ROCKETKAFKA_BOOTSTRAP_SERVERS"
REDIS_ENV = "ROCKETKAFKA_REDIS_URLS"


def password_in_flags(redis: str | None) -> str | None:
    """The warning for a password given on the command line (``--redis`` URLs with one), else None.

    It still works: the flag wins as always. But ``ps`` shows a process's arguments to every user of the
    host, so the warning names where a password belongs instead. No other flag of ``rocketkafka`` takes a
    secret: Kafka credentials come only from ``ROCKETKAFKA_KAFKA`` or ``ROCKETKAFKA_CONFIG_FILE``.
    """
    if not redis or not any(_has_password(url.strip()) for url in redis.split(",")):
        return None
    return ("warning: --redis holds a password, and `ps` shows a command line to every user of this host: put the "
            "URLs in ROCKETKAFKA_REDIS_URLS, or as rocketkafka.redis.urls in the owner-only properties file "
            f"{CONFIG_FILE_ENV} names")


def _has_password(url: str) -> bool:
    """Whether a Redis URL carries a secret: a password in its user-info (a lone name there may be a password
    too: ``redis://pw@h``) or its query (``?password=``, which redis-py reads)."""
    from urllib.parse import parse_qs, urlsplit

    try:
        parts = urlsplit(url)
        return parts.username is not None or parts.password is not None or "password" in parse_qs(parts.query)
    except ValueError:  # a URL that does not parse: the settings refuse it later; any user-info may be a secret
        return "@" in url


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
    if os.environ.get(BOOTSTRAP_ENV) or config_file_values().get("bootstrap_servers"):
        return Settings.load(**overrides)
    stack = dev_status()
    if stack.get("running"):
        click.echo(f"using the dev stack of `rocketkafka dev up` (broker {stack['bootstrap_servers']})", err=True)
        if stack.get("config_file"):  # a secured stack: its super user's settings, passwords in an owner-only file
            os.environ.setdefault(CONFIG_FILE_ENV, stack["config_file"])
            return Settings.load(**overrides)
        redis = os.environ.get(REDIS_ENV) or stack["redis_urls"]
        if "fetch_wait_ms" in stack and not os.environ.get("ROCKETKAFKA_FETCH_WAIT_MS"):
            overrides.setdefault("fetch_wait_ms", stack["fetch_wait_ms"])  # as probed when the stack started
        return Settings.load({"bootstrap.servers": stack["bootstrap_servers"]}, redis, **overrides)
    raise ConfigError("no broker: pass -b/--bootstrap-servers, set ROCKETKAFKA_BOOTSTRAP_SERVERS, "
                      "or start one with `rocketkafka dev up`")
