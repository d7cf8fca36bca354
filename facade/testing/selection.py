"""Which backend a test session uses: ``--rk-backend`` or ``ROCKETKAFKA_TEST_BACKEND``.

Unset, it is ``external`` when the environment names a broker, else ``embedded``.
"""

from __future__ import annotations

import os

from rocketkafka.errors import ConfigError
from rocketkafka.extras import require
from rocketkafka.testing.backends import Backend, EmbeddedBackend, ExternalBackend, KafkaBackend, secure_requested

#: The backend names ``--rk-backend`` and ``ROCKETKAFKA_TEST_BACKEND`` accept.
BACKENDS = ("embedded", "kafka", "external", "testcontainers")


def select_backend(name: str | None = None) -> Backend:
    """The backend named by ``name`` or ``ROCKETKAFKA_TEST_BACKEND`` (see module docstring)."""
    name = name or os.environ.get("ROCKETKAFKA_TEST_BACKEND") or (
        "external" if os.environ.get("ROCKETKAFKA_BOOTSTRAP_SERVERS") else "embedded"
    )
    if secure_requested() and name not in ("kafka", "external"):
        raise ConfigError(f"ROCKETKAFKA_TEST_SECURE=1 needs the kafka backend (SASL_SSL, ACLs; Redis TLS + ACL users), "
                          f"not {name}: ROCKETKAFKA_TEST_BACKEND=kafka")
    if name == "embedded":
        return EmbeddedBackend()
    if name == "kafka":
        return KafkaBackend()
    if name == "external":
        return ExternalBackend()
    if name == "testcontainers":
        require("docker", "testing", "the testcontainers backend")
        require("testcontainers", "testing", "the testcontainers backend")
        from rocketkafka.testing.containers import ContainersBackend

        return ContainersBackend()
    raise ConfigError(f"unknown test backend {name!r}: use embedded, kafka, external or testcontainers")
