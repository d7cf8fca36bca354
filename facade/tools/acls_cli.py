"""``rocketkafka acls``: what each role of a deployment needs on a secured Kafka and Redis, printed.

No broker and no Redis are asked: the grants follow from the deployment's names and features
(:mod:`rocketkafka.operations.permissions`). The deployment options are shared with
``rocketkafka admin provision`` (:func:`deployment_options`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import click
from pydantic import ValidationError

from rocketkafka.config import Settings
from rocketkafka.operations.acl_output import DEFAULT_PRINCIPAL_FORMAT, permissions_json, render_text
from rocketkafka.operations.permissions import Deployment, Role, all_permissions
from rocketkafka.validation import validation_summary

#: The options that describe a deployment, each named as its :class:`Deployment` field.
_OPTIONS: list[Callable[[Any], Any]] = [
    click.option("--topic-prefix", default=None, metavar="PREFIX",
                 help="internal topics' prefix [ROCKETKAFKA_TOPIC_PREFIX, the config file, else rk]"),
    click.option("--redis-prefix", default=None, metavar="PREFIX", help="Redis keys' prefix [ROCKETKAFKA_REDIS_PREFIX, the config file, else rk]"),
    click.option("--topic", "topics", multiple=True, metavar="TOPIC", help="a user topic (repeatable)"),
    click.option("--user-topic-prefix", "topic_prefixes", multiple=True, metavar="PREFIX",
                 help="user topics by prefix, e.g. for ^regex subscriptions (repeatable)"),
    click.option("--consumer-group", "consumer_groups", multiple=True, metavar="GROUP",
                 help="a consumer group (push or drop-in; repeatable)"),
    click.option("--producer-group", "producer_groups", multiple=True, metavar="GROUP",
                 help="a transaction producer group (repeatable)"),
    click.option("--exactly-once/--no-exactly-once", default=False, show_default=True,
                 help="consumers and forwarders exactly_once, transaction producers kafka_transactions"),
    click.option("--forwarder-group", default=None, metavar="GROUP", help="the delay forwarders' group [delay-forwarder]"),
    click.option("--delay/--no-delay", default=True, show_default=True, help="producers send delayed messages"),
    click.option("--retry-backoff/--no-retry-backoff", default=True, show_default=True,
                 help="consumers' retries wait in the delay levels"),
    click.option("--orderly", is_flag=True, help="the push consumers are orderly (no retry topic)"),
    click.option("--broadcasting", is_flag=True, help="the push consumers broadcast (no Redis)"),
    click.option("--trace", is_flag=True, help="clients write trace events"),
    click.option("--message-index", is_flag=True, help="producers index messages in Redis"),
    click.option("--idempotent-consume", is_flag=True, help="listeners use IdempotentConsumer"),
    click.option("--spark-group-prefix", default=None, metavar="PREFIX", help="Spark's groupIdPrefix [spark-kafka-source]"),
    click.option("--spark-audits", is_flag=True, help="Spark runs the audits (reads the internal topics)"),
    click.option("--redis-db", default=0, show_default=True, type=click.IntRange(0), help="database in the Redis URLs"),
    click.option("--redis-setinfo/--no-redis-setinfo", default=True, show_default=True,
                 help="allow CLIENT SETINFO (Redis 7.2+; 7.0 refuses the rule)"),
]


def deployment_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the deployment options to ``command``; it receives them as ``deployment_fields`` keyword arguments."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def deployment_from(fields: dict[str, Any]) -> Deployment:
    """The :class:`Deployment` of the options (prefixes, when not given, from the settings: ``ROCKETKAFKA_*``
    variables, then ``ROCKETKAFKA_CONFIG_FILE``).

    Raises:
        click.BadParameter: a name is not valid.
        ConfigError: the settings' sources are not valid.
    """
    values = {k: v for k, v in fields.items() if v is not None}
    if values.get("topic_prefix") is None or values.get("redis_prefix") is None:
        settings = Settings.load(require_broker=False)
        values.setdefault("topic_prefix", settings.topic_prefix)
        values.setdefault("redis_prefix", settings.redis_prefix)
    values = {k: tuple(v) if isinstance(v, (list, tuple)) else v for k, v in values.items() if v is not None}
    try:
        return Deployment(**values)
    except ValidationError as exc:
        raise click.BadParameter(validation_summary(exc, "bad deployment")) from None


def _principals(given: tuple[str, ...]) -> dict[Role, str]:
    out = {}
    for item in given:
        role, sep, principal = item.partition("=")
        if not sep or not principal:
            raise click.BadParameter(f"{item!r}: expected ROLE=User:NAME", param_hint="--principal")
        try:
            out[Role(role.strip())] = principal.strip()
        except ValueError:
            raise click.BadParameter(f"unknown role {role!r}: one of {', '.join(r.value for r in Role)}",
                                     param_hint="--principal") from None
    return out


@click.command("acls")
@deployment_options
@click.option("--role", "roles", multiple=True, type=click.Choice([r.value for r in Role]),
              help="only this role (repeatable) [every role]")
@click.option("--principal-format", default=DEFAULT_PRINCIPAL_FORMAT, show_default=True,
              help="each role's principal, {role} standing for its name")
@click.option("--principal", "principals", multiple=True, metavar="ROLE=User:NAME", help="one role's principal")
@click.option("--bootstrap-server", default=None, metavar="HOST:PORT",
              help="for the printed kafka-acls.sh lines [ROCKETKAFKA_BOOTSTRAP_SERVERS, else HOST:PORT]")
@click.option("--command-config", default="admin.properties", show_default=True,
              help="for the printed kafka-acls.sh lines: the super user's client properties")
@click.option("--format", "output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def acls(roles: tuple[str, ...], principal_format: str, principals: tuple[str, ...], bootstrap_server: str | None,
         command_config: str, output: str, **deployment_fields: Any) -> None:
    """Print what each role needs: Kafka ACLs as kafka-acls.sh commands, the Redis ACL SETUSER rule.

    Enough and no more, for the deployment the options describe; nothing is asked of a broker or Redis.
    Roles: producer, transactional-producer, push-consumer, drop-in-consumer, delay-forwarder,
    transaction-checker, admin (the one that creates topics: `rocketkafka admin provision`), spark-reader.
    """
    try:
        principal_format.format(role="x")
    except (KeyError, IndexError, ValueError):
        raise click.BadParameter(f"{principal_format!r}: only {{role}} may stand in it",
                                 param_hint="--principal-format") from None
    if "{role}" not in principal_format and not principals:
        click.echo("note: --principal-format has no {role}: every role gets the same principal", err=True)
    deployment = deployment_from(deployment_fields)
    named = _principals(principals)
    granted = all_permissions(deployment, roles or None)
    if output == "json":
        click.echo(json.dumps({"deployment": deployment.model_dump(mode="json"),
                               "roles": permissions_json(granted, named, principal_format)}, indent=2))
        return
    server = bootstrap_server or os.environ.get("ROCKETKAFKA_BOOTSTRAP_SERVERS") or "HOST:PORT"
    click.echo(render_text(granted, named, principal_format, server, command_config), nl=False)
