"""MkDocs hook: the settings reference is generated from the settings models and the command line.

``reference/settings.md`` holds the marker ``<!-- settings-reference -->``; this hook replaces it with:

- one table per settings model (:data:`MODELS`): every field with its type, default, the
  environment variable that sets it (for ``BaseSettings`` models, and options classes that a
  ``BaseSettings`` subclass reads from the environment) and its meaning, taken from the
  ``Parameters:`` section of the model's docstring (or a base model's);
- the keys of a drop-in client's config dict (``rocketkafka.config.CLIENT_KEYS``);
- every command-line option that reads a variable (click's ``envvar``), walked over the whole
  ``rocketkafka`` command tree, lazily loaded commands included;
- every other ``ROCKETKAFKA_*`` variable the library reads, described in :data:`OTHER_VARIABLES`.

The build fails when a field has no description, or when the library's source names a
``ROCKETKAFKA_*`` variable that none of these covers: a new setting is documented, or the docs
do not build. Defaults are computed with every ``ROCKETKAFKA_*`` variable unset, so the
machine that builds the site does not leak into it.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import os
import re
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

MARKER = "<!-- settings-reference -->"
ROOT = Path(__file__).resolve().parents[2]
#: The folders of the installed package (pyproject.toml maps them onto ``rocketkafka``).
SOURCES = ("facade", "ordering", "delay", "txn", "spark")

#: (title, "module:Class", how the model is given) in page order.
MODELS = [
    ("Settings", "rocketkafka.config:Settings",
     "Connection settings every client, sidecar and command shares: `Settings(...)`, `Settings.load(config, "
     "redis_urls)`, or the `ROCKETKAFKA_*` variables."),
    ("DelayConfig", "rocketkafka.schedule.levels:DelayConfig",
     "Delay levels and routing limits (`Settings(delay=DelayConfig(...))`); producers, consumers' retries and "
     "forwarders of one deployment must agree on them."),
    ("ConsumerOptions", "rocketkafka.ordering.engine.options:ConsumerOptions",
     "Options of a push consumer: `PushConsumer(..., options=ConsumerOptions(...))` or single fields as keyword "
     "arguments (`PushConsumer(..., lock_lease_ms=3000)`). The ownership fields (down to `pull_threshold_total`) "
     "are shared by every member of the engine: the drop-in consumer, the forwarder and the checker."),
    ("TransactionOptions", "rocketkafka.txn.options:TransactionOptions",
     "Options of a `TransactionMQProducer` (`options=` or keyword arguments)."),
    ("CheckerOptions", "rocketkafka.txn.options:CheckerOptions",
     "Options of the transaction checker (`TransactionChecker(settings, CheckerOptions(...))`, "
     "`rocketkafka txn-checker`)."),
    ("Delay forwarder service", "rocketkafka.tools.forwarder_cli:ForwarderSettings",
     "Settings of `rocketkafka delay-forwarder` beyond the connection and the delay levels (its flags win)."),
]

#: Every other variable the library reads: name -> (default, meaning). The build fails on one missing here.
OTHER_VARIABLES: dict[str, tuple[str, str]] = {
    "ROCKETKAFKA_CONFIG_FILE": ("unset", "a properties file (`key=value` lines) of client settings that code and "
                                "`ROCKETKAFKA_*` variables have not set (`rocketkafka.config_file`)"),
    "ROCKETKAFKA_GRANT_PASSWORD": ("unset: asked at a prompt", "the password `rocketkafka admin grant` gives the new "
                                   "user (Kafka SCRAM and Redis ACL), kept off the command line"),
    "ROCKETKAFKA_HOME": ("`~/.rocketkafka`", "where `rocketkafka dev up` records its stack"),
    "ROCKETKAFKA_SPARK_ENGINE": ("`auto`", "the Spark reader: `auto` (Spark's JVM source where its connector "
                                 "loads), `jvm` or `python`"),
    "ROCKETKAFKA_SPARK_CONNECTOR": ("`auto`", "put Spark's Kafka connector on a classic session's classpath: "
                                    "`auto` (where `mvn` can fetch it), `on` (or fail), `off`"),
    "ROCKETKAFKA_SPARK_JARS_DIR": ("`~/.cache/rocketkafka/spark-kafka/<version>`", "where the connector's jars are "
                                   "kept (a container image sets it to jars it ships)"),
    "ROCKETKAFKA_SPARK_MASTER": ("`local[2]`", "the Spark master of `spark_session()` and the `spark` commands"),
    "ROCKETKAFKA_SPARK_REMOTE": ("unset", "a Spark Connect URL (`sc://host:15002`); wins over the master"),
    "ROCKETKAFKA_METRICS_PORT": ("unset", "the sidecars' Prometheus port when their own variable and flag are unset"),
    "ROCKETKAFKA_TEST_BACKEND": ("`external` when `ROCKETKAFKA_BOOTSTRAP_SERVERS` is set, else `embedded`",
                                 "the pytest plugin's backend: `embedded`, `kafka`, `external` or `testcontainers`"),
    "ROCKETKAFKA_TEST_KAFKA_NODES": ("`1`", "broker nodes of the `kafka` test backend (3: a cluster)"),
    "ROCKETKAFKA_TEST_SECURE": ("unset", "`1`: the `kafka` test backend runs secured (SASL/SCRAM over TLS with "
                                "ACLs, Redis on TLS with ACL users)"),
    "ROCKETKAFKA_TEST_CLOCK_FILE": ("unset", "the test helper that shifts a process's wall clock "
                                    "(`rocketkafka.testing.clock`; chaos and fault tests)"),
    "ROCKETKAFKA_TC_KAFKA_IMAGE": ("`rocketkafka/tansu:dev` when the engine has it, else `apache/kafka:<version>`",
                                   "the broker image of the `testcontainers` test backend"),
    "ROCKETKAFKA_TC_REDIS_IMAGE": ("`rocketkafka/redis:dev` when the engine has it, else `redis:7`",
                                   "the Redis image of the `testcontainers` test backend"),
    "ROCKETKAFKA_KAFKA_VERSION": ("the version `rocketkafka.testing.apache_kafka` pins",
                                  "the Apache Kafka release of `dev up --broker kafka` and the `kafka` backend"),
    "ROCKETKAFKA_KAFKA_LIBS": ("unset: jars from Maven Central", "a folder of Kafka's jars to run instead (a Kafka "
                               "distribution's `libs/`)"),
    "ROCKETKAFKA_KAFKA_HEAP": ("`512m`", "heap of each embedded Apache Kafka node"),
    "ROCKETKAFKA_TLS_REDIS_SERVER": ("`redis-server` on `PATH`", "a `redis-server` built with TLS, for the secured "
                                     "dev stack (the embedded one has no TLS)"),
}


# -- models ---------------------------------------------------------------------------------------------------------

def _load(spec: str) -> type:
    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)


def _parameters(cls: type) -> dict[str, str]:
    """``name -> description`` from the ``Parameters:`` sections of ``cls`` and its bases (nearest wins)."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        doc = inspect.cleandoc(klass.__dict__.get("__doc__") or "")
        if "Parameters:" not in doc:
            continue
        section = doc.split("Parameters:", 1)[1].splitlines()[1:]
        entries: list[tuple[list[str], list[str]]] = []
        indent = None
        for line in section:
            if not line.strip():
                continue
            depth = len(line) - len(line.lstrip())
            if indent is None:
                indent = depth
            if depth < indent:
                break
            entry = re.match(r"([\w, ]+):\s*(.*)$", line.strip()) if depth == indent else None
            if entry:
                entries.append(([n.strip() for n in entry.group(1).split(",")], [entry.group(2)]))
            elif entries:
                entries[-1][1].append(line.strip())
        for names, text in entries:
            for name in names:
                found[name] = " ".join(text)
    return found


def _rst_to_md(text: str) -> str:
    """A docstring fragment as Markdown for a table cell: roles and double backticks as code, pipes escaped
    outside code (a pipe inside a code span does not split a cell)."""
    text = re.sub(r":\w+:`~?([^`]+)`", lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", text).replace("``", "`")
    parts = text.split("`")
    return "`".join(part if index % 2 else part.replace("|", "\\|") for index, part in enumerate(parts))


def _type_name(annotation: Any) -> str:
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        shown = [("..." if a is Ellipsis else _type_name(a)) for a in args]
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(shown)}]"
    return str(annotation).replace("typing.", "")


def _default(cls: type, name: str, field: Any) -> str:
    from rocketkafka.schedule.levels import format_duration

    factory = field.default_factory
    if factory is not None:
        if factory in (list, dict, tuple, set):
            return f"`{factory()!r}`"
        if inspect.isclass(factory):
            return f"[`{factory.__name__}()`](#{factory.__name__.lower()})" \
                if factory.__name__ in {t for t, *_ in MODELS} else f"`{factory.__name__}()`"
        owner = getattr(factory, "__self__", None)
        if inspect.isclass(owner):
            return f"[`{owner.__name__}()`](#{owner.__name__.lower()}), from its variables"
        summary = inspect.getdoc(factory) or factory.__name__
        return _rst_to_md(summary.split("\n")[0].rstrip("."))
    value = field.default
    if isinstance(value, enum.Enum):
        return f"`{value.name}`"
    if name in ("levels", "steps") and isinstance(value, tuple):
        return "`" + " ".join(format_duration(ms) for ms in value) + "`"
    if name == "max_delay":
        return f"`{value}` ({format_duration(value)})"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10_000:
        return f"`{value:,}`".replace(",", "_")
    return f"`{value!r}`"


def _environment_reader(cls: type) -> type | None:
    """``cls`` itself when it reads the environment, else a ``BaseSettings`` subclass that reads it for ``cls``."""
    from pydantic_settings import BaseSettings

    if issubclass(cls, BaseSettings):
        return cls
    readers = [sub for sub in cls.__subclasses__() if issubclass(sub, BaseSettings)]
    return readers[0] if readers else None


def _env_format(field: Any) -> str:
    text = _type_name(field.annotation)
    decoded_as_text = any(type(m).__name__ == "NoDecode" for m in field.metadata)
    if text.startswith("list[") and decoded_as_text:
        return " (comma separated)"
    if text.startswith("tuple[") and decoded_as_text:
        return " (durations, space separated)"
    if text.startswith("dict["):
        return " (JSON object)"
    return ""


def model_table(title: str, spec: str, intro: str) -> tuple[str, set[str]]:
    """The section of one model, and the environment variables it reads."""
    cls = _load(spec)
    described = _parameters(cls)
    reader = _environment_reader(cls)
    prefix = reader.model_config.get("env_prefix", "") if reader is not None else None
    rows, variables = [], set()
    for name, field in cls.model_fields.items():
        if name not in described:
            raise LookupError(f"{spec}: field {name!r} has no description in a Parameters: section of its docstring")
        variable = ""
        nested = field.annotation if inspect.isclass(field.annotation) else None
        if nested is not None and hasattr(nested, "model_fields"):
            own = _environment_reader(nested)
            if prefix is not None and own is not None:
                variable = f"`{own.model_config.get('env_prefix', '')}*`"
        elif prefix is not None:
            variable = f"`{(prefix + name).upper()}`{_env_format(field)}"
            variables.add((prefix + name).upper())
        where_set = f"`{name}`: `{_type_name(field.annotation)}`" + (f"<br>{variable}" if variable else "")
        rows.append(f"| {where_set} | {_default(cls, name, field)} | {_rst_to_md(described[name])} |")
    where = f"`{cls.__module__}.{cls.__name__}`"
    column = "field: type<br>environment variable" if prefix is not None else "field: type"
    head = [f"## {title}", "", f"{intro} ({where})", "",
            f"| {column} | default | meaning |", "|---|---|---|"]
    return "\n".join(head + rows), variables


# -- drop-in config keys ----------------------------------------------------------------------------------------------

def client_keys_table() -> str:
    from rocketkafka.config import CLIENT_KEYS

    sets = {"rocketkafka.delay.levels": "`delay` (its `levels`)",
            "rocketkafka.producer.group": "the drop-in producer's group name (`rocketkafka.kafka.Producer`)"}
    rows = [f"| `{key}` | {sets.get(key, '`' + key.removeprefix('rocketkafka.').replace('.', '_') + '`')} |"
            for key in CLIENT_KEYS]
    return "\n".join(["## Drop-in config keys", "",
                      "A drop-in client's confluent-kafka config dict takes rocketkafka's own settings under these "
                      "keys (`rocketkafka.redis.urls` comma separated, `rocketkafka.delay.levels` as "
                      '`"1s 5s 10s"`); an unknown `rocketkafka.*` key raises `ConfigError`. Unset keys come from '
                      "the variables above.", "", "| key | sets |", "|---|---|", *rows])


# -- the command line -------------------------------------------------------------------------------------------------

def _commands(group: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
    yield path, group
    if isinstance(group, click.Group):
        ctx = click.Context(group, info_name=path)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is not None:
                yield from _commands(command, f"{path} {name}")


def cli_variables() -> tuple[str, set[str]]:
    from rocketkafka.tools.cli import main

    rows, variables = [], set()
    for path, command in _commands(main, "rocketkafka"):
        for param in command.params:
            names = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or [])
            if not names:
                continue
            variables.update(names)
            flag = max(param.opts, key=len)
            text = _rst_to_md((getattr(param, "help", "") or "").split(" [")[0])
            rows.append(f"| {', '.join(f'`{n}`' for n in names)} | `{path} {flag}` | {text} |")
    table = ["## Command-line options from the environment", "",
             "Options of `rocketkafka` commands that a variable sets when the flag is not given (first variable "
             "first). Every option: [CLI](cli.md).", "", "| variable | option | meaning |", "|---|---|---|", *rows]
    return "\n".join(table), variables


# -- everything else --------------------------------------------------------------------------------------------------

def variables_in_source() -> set[str]:
    """Every complete ``ROCKETKAFKA_*`` name the library's source spells (prefixes ending in ``_`` are not names)."""
    found: set[str] = set()
    for folder in SOURCES:
        for path in (ROOT / folder).rglob("*.py"):
            found.update(re.findall(r"\bROCKETKAFKA_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    return found


def other_table(covered: set[str]) -> str:
    missing = sorted(variables_in_source() - covered - set(OTHER_VARIABLES))
    if missing:
        raise LookupError(f"the library reads {', '.join(missing)}, which the settings reference does not describe: "
                          "add each to OTHER_VARIABLES in docs/hooks/settings_reference.py")
    rows = [f"| `{name}` | {default} | {meaning} |" for name, (default, meaning) in sorted(OTHER_VARIABLES.items())]
    return "\n".join(["## Other environment variables", "", "| variable | default | meaning |", "|---|---|---|",
                      *rows])


def settings_reference() -> str:
    saved = {name: os.environ.pop(name) for name in list(os.environ) if name.startswith("ROCKETKAFKA_")}
    try:
        sections, covered = [], set()
        for title, spec, intro in MODELS:
            text, variables = model_table(title, spec, intro)
            sections.append(text)
            covered |= variables
        sections.append(client_keys_table())
        text, variables = cli_variables()
        sections.append(text)
        covered |= variables
        sections.append(other_table(covered))
        return "\n\n".join(sections)
    finally:
        os.environ.update(saved)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, settings_reference())


if __name__ == "__main__":  # print the generated part: python docs/hooks/settings_reference.py
    sys.stdout.write(settings_reference() + "\n")
