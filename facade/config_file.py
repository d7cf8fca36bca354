"""Settings from a client properties file (``ROCKETKAFKA_CONFIG_FILE``), where secrets belong.

A service's password must not sit on its command line, which ``ps`` shows to every user of
the host. Kafka's own tools take a ``--command-config client.properties``; rocketkafka's
services, the CLI and every client read the same kind of file when ``ROCKETKAFKA_CONFIG_FILE``
names one: ``key=value`` lines of confluent-kafka settings (``security.protocol``,
``sasl.username``, ``sasl.password``, ``ssl.ca.location``, ...) plus rocketkafka's own keys,
spelled as in a drop-in client's config dict (``rocketkafka.redis.urls``,
``rocketkafka.topic.prefix``, ...), in Java's properties format (comments start with ``#`` or ``!``).

Values given in code and ``ROCKETKAFKA_*`` variables win over the file's; Kafka settings
from both are merged. A file that others than its owner may read is used, with a warning.

>>> values_of_properties("bootstrap.servers=b:9093\\nsasl.username=app\\nrocketkafka.redis.urls=rediss://h:6380")
{'bootstrap_servers': 'b:9093', 'redis_urls': 'rediss://h:6380', 'kafka': {'sasl.username': 'app'}}
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Any

from jproperties import Properties, PropertyError

from rocketkafka.errors import ConfigError

log = logging.getLogger(__name__)
_warned: set[Path] = set()  # files already warned about (settings are made often)

#: The variable naming the file.
CONFIG_FILE_ENV = "ROCKETKAFKA_CONFIG_FILE"

#: rocketkafka's own keys in the file, and the settings field each one sets (a drop-in client's config dict takes
#: these too, beside its per-client keys: ``rocketkafka.config.CLIENT_KEYS``).
OWN_KEYS = {
    "rocketkafka.redis.urls": "redis_urls",
    "rocketkafka.topic.prefix": "topic_prefix",
    "rocketkafka.redis.prefix": "redis_prefix",
    "rocketkafka.internal.replication.factor": "internal_replication_factor",
    "rocketkafka.internal.min.insync.replicas": "internal_min_insync_replicas",
    "rocketkafka.fetch.wait.ms": "fetch_wait_ms",
}


def values_of_properties(text: str, source: str = "the config file") -> dict[str, Any]:
    """Settings values (field name -> value; Kafka settings under ``kafka``) of a Java properties text (as Kafka's
    ``client.properties``: ``=`` or ``:``, ``\\`` continuation lines, escapes; read by ``jproperties``).

    Raises:
        ConfigError: the text is not a properties file, a key has no value, or a ``rocketkafka.*`` key is
            unknown (the key is named; values never, they may be secrets).
    """
    properties = Properties()
    try:
        properties.load(text)
    except (PropertyError, UnicodeError) as exc:
        raise ConfigError(f"{source}: not a properties file ({type(exc).__name__})") from None
    values: dict[str, Any] = {}
    kafka: dict[str, str] = {}
    for key, (value, _meta) in properties.items():
        key, value = key.strip(), value.strip()
        if not value:
            raise ConfigError(f"{source}: {key!r} has no value (a line `key=value` is meant)")
        if key == "bootstrap.servers":
            values["bootstrap_servers"] = value
        elif key.startswith("rocketkafka."):
            if key not in OWN_KEYS:
                raise ConfigError(f"{source}: unknown setting {key!r}: rocketkafka's are {', '.join(OWN_KEYS)}")
            values[OWN_KEYS[key]] = value
        else:
            kafka[key] = value
    if kafka:
        values["kafka"] = kafka
    return values


def config_file_values() -> dict[str, Any]:
    """The values of the file ``ROCKETKAFKA_CONFIG_FILE`` names, or nothing when it names none.

    Raises:
        ConfigError: the variable names a file that cannot be read, or whose content is not valid.
    """
    name = os.environ.get(CONFIG_FILE_ENV)
    if not name:
        return {}
    path = Path(name).expanduser()
    try:
        text = path.read_text()
        mode = path.stat().st_mode
    except OSError as exc:
        raise ConfigError(f"{CONFIG_FILE_ENV}={name}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{CONFIG_FILE_ENV}={name}: not UTF-8 text (write \\uXXXX escapes for other "
                          "characters, as Java's properties files do)") from None
    if mode & (stat.S_IRGRP | stat.S_IROTH) and path not in _warned:
        _warned.add(path)
        log.warning("%s is readable by other users than its owner: if it holds passwords, `chmod 600 %s`",
                    path, path)
    return values_of_properties(text, f"{CONFIG_FILE_ENV}={name}")
