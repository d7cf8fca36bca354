"""A URL echoed in an error shows no password, whether it is valid or not: a typo in the scheme, a missing
colon, an ``@`` inside the password, credentials put into ``bootstrap.servers``.

Each row failed before issue 21: only well-formed ``scheme://user:password@host`` URLs were masked.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from rocketkafka import ConfigError, Settings
from rocketkafka.admin import TopicAdmin
from rocketkafka.errors import BrokerUnavailableError
from rocketkafka.ordering.locks.nodes import LockNode
from rocketkafka.redaction import redact_url
from rocketkafka.tools.cli import main

SECRET = "Pa55-w0rd"

#: Redis URLs a user may type wrong, each with the secret in its user-info.
TYPOS = {
    "one slash": f"redis:/:{SECRET}@host:6379",
    "no colon after the scheme": f"redis//user:{SECRET}@host:6379",
    "an @ in the password": f"redis://:pa@{SECRET}@host:port",
    "no user, bad port": f"redis://{SECRET}@host:port",
    "another scheme, one slash": f"http:/app:{SECRET}@host",
}


@pytest.mark.parametrize("url", list(TYPOS.values()), ids=list(TYPOS))
def test_settings_errors_mask_the_user_info_of_urls_typed_wrong(url) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.load({"bootstrap.servers": "127.0.0.1:1"}, [url])
    assert SECRET not in str(info.value) and "***" in str(info.value), str(info.value)


@pytest.mark.parametrize("url", list(TYPOS.values()), ids=list(TYPOS))
def test_redaction_keeps_the_rest_of_the_url_to_recognise_it(url) -> None:
    shown = redact_url(f"bad Redis URL {url!r}: it does not parse")
    assert SECRET not in shown and "host" in shown and shown.startswith("bad Redis URL '")


def test_a_lock_node_of_a_url_typed_wrong_shows_no_password() -> None:
    with pytest.raises(ConfigError) as info:
        LockNode(0, TYPOS["one slash"], 0.2)
    assert SECRET not in str(info.value)


def test_credentials_in_bootstrap_servers_do_not_show_when_no_broker_answers() -> None:
    settings = Settings.load({"bootstrap.servers": f"SASL_SSL://app:{SECRET}@127.0.0.1:1"})
    with TopicAdmin(settings) as admin, pytest.raises(BrokerUnavailableError) as info:
        admin.list(timeout=0.5)
    assert SECRET not in str(info.value) and "127.0.0.1:1" in str(info.value)


def test_the_cli_shows_no_password_of_a_redis_url_typed_wrong() -> None:
    result = CliRunner().invoke(main, ["-b", "127.0.0.1:1", "--redis", TYPOS["one slash"], "topics", "list"])
    assert result.exit_code == 1 and "not a redis://" in result.output, result.output
    assert SECRET not in result.output
