"""What the documentation's examples run against: the session's backend, through the variables users export.

Every Python block of the README and of ``docs/``, and every script in ``examples/``, reads the
broker and the Redis nodes from ``ROCKETKAFKA_BOOTSTRAP_SERVERS`` and ``ROCKETKAFKA_REDIS_URLS``,
as after ``rocketkafka dev up`` and its ``export`` line. :func:`docs_env` sets them (and a topic and
Redis key prefix of the test's own) to the session's backend, and afterwards deletes every topic
the example created, so the next document starts from an empty broker as a reader would.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.testing.backends import Backend

REPO = Path(__file__).resolve().parents[2]
log = logging.getLogger(__name__)

#: Variables a reader of the docs may have set that would change what an example does.
_FOREIGN = ("ROCKETKAFKA_DELAY_", "ROCKETKAFKA_KAFKA", "ROCKETKAFKA_CONFIG_FILE", "ROCKETKAFKA_INTERNAL_")


@pytest.fixture
def docs_env(rk_backend: Backend, rk_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The environment an example runs in (also set in this process); the topics it made are deleted after it."""
    for name in list(os.environ):
        if name.startswith(_FOREIGN):
            monkeypatch.delenv(name)
    env = {"ROCKETKAFKA_BOOTSTRAP_SERVERS": rk_settings.bootstrap_servers,
           "ROCKETKAFKA_REDIS_URLS": ",".join(rk_settings.redis_urls),
           "ROCKETKAFKA_TOPIC_PREFIX": rk_settings.topic_prefix,
           "ROCKETKAFKA_REDIS_PREFIX": rk_settings.redis_prefix}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    before = _topics(rk_settings)
    yield env
    made = sorted(set(_topics(rk_settings)) - set(before))
    if made:
        try:
            with TopicAdmin(rk_settings) as admin:
                admin.delete(made, timeout=30)
        except Exception as exc:  # a broker a test broke keeps them; the next example then finds them
            log.warning("topics of the example not deleted: %s", exc)


def _topics(settings: Settings) -> list[str]:
    with TopicAdmin(settings) as admin:
        return list(admin.list(timeout=10))
