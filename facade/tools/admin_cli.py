"""``rocketkafka admin``: the operator's commands (``mqadmin`` equivalents) over :mod:`rocketkafka.operations`.

Every command prints a table for people, or with ``--json`` one JSON document for scripts
(times as epoch ms there, as local ISO times in tables). Expected failures end as one
``Error:`` line (the root group, :mod:`rocketkafka.tools.cli`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import click

from rocketkafka import operations as ops
from rocketkafka.schedule.levels import format_duration, parse_duration
from rocketkafka.tools.acls_cli import deployment_from, deployment_options
from rocketkafka.tools.settings import command_settings
from rocketkafka.tools.spark_report import format_table

_json_option = click.option("--json", "as_json", is_flag=True, help="one JSON document instead of a table")
_topic_option = click.option("--topic", "topics", multiple=True, metavar="TOPIC",
                             help="a topic of the group besides those its members and commits name (repeatable)")


def _plain(value: Any) -> Any:
    """A result as JSON-ready data (dataclasses to dicts, bytes to text)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    return value


def _when(ms: int | None) -> str | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000).isoformat(sep=" ", timespec="milliseconds")


def _ago(ms: int | None) -> str | None:
    """``ms`` relative to now: ``in 4.2s`` or ``3.1s ago``."""
    if ms is None:
        return None
    delta = ms - time.time() * 1000
    return f"in {delta / 1000:.1f}s" if delta >= 0 else f"{-delta / 1000:.1f}s ago"


def _show(result: Any, as_json: bool, rows: Callable[[Any], Sequence[Mapping[str, Any]]], empty: str) -> None:
    if as_json:
        click.echo(json.dumps(_plain(result), indent=2))
        return
    table = rows(result)
    click.echo(format_table(table) if table else empty)


def _progress(what: str) -> Callable[[int], None]:
    return lambda n: click.echo(f"... {n} records of {what} read", err=True)


def _ms_option(text: str | None) -> int | None:
    """A time option (ISO 8601) as epoch ms."""
    if text is None:
        return None
    target = ops.parse_target(text)
    if not isinstance(target, datetime):
        raise click.BadParameter(f"{text!r} is not an ISO 8601 time")
    return int(target.timestamp() * 1000)


@click.group()
def admin() -> None:
    """Inspect and operate groups, locks, delays, transactions, dead letters, messages and traces."""


# -- groups ------------------------------------------------------------------------------
@admin.command("consumer-progress")
@click.argument("group")
@_topic_option
@_json_option
def consumer_progress(group: str, topics: tuple[str, ...], as_json: bool) -> None:
    """Per partition of GROUP: committed offset, log end, lag, owner, fencing token, lease left."""
    rows = ops.consumer_progress(command_settings(), group, topics)
    _show(rows, as_json, lambda rs: [
        {"topic": r.topic, "partition": r.partition, "committed": "-" if r.committed is None else r.committed,
         "end": r.end, "lag": r.lag, "owner": r.owner or "-", "fence": r.fencing_token,
         "lease left": None if r.lease_left_ms is None else f"{r.lease_left_ms / 1000:.1f}s"} for r in rs]
        + [{"topic": "total", "partition": "", "committed": "", "end": "", "lag": sum(r.lag for r in rs),
            "owner": "", "fence": None, "lease left": None}], "(no partitions)")


@admin.command("consumer-status")
@click.argument("group")
@_topic_option
@_json_option
def consumer_status(group: str, topics: tuple[str, ...], as_json: bool) -> None:
    """Members of GROUP (what each runs, its allocation, heartbeat age) and the partitions each owns."""
    status = ops.consumer_status(command_settings(), group, topics)

    def rows(s: ops.GroupStatus) -> list[dict[str, Any]]:
        out = [{"member": m.id, "client": m.info.get("client"), "allocation": m.info.get("allocation"),
                "room": m.info.get("room") or "-", "heartbeat": f"{m.heartbeat_age_ms / 1000:.1f}s ago",
                "owns": _partitions(s.assignment.get(m.id, []))} for m in s.members]
        out += [{"member": owner, "client": "(not a live member)", "allocation": None, "room": None,
                 "heartbeat": None, "owns": _partitions(tps)}
                for owner, tps in s.assignment.items() if owner not in {m.id for m in s.members}]
        if s.unowned:
            out.append({"member": "(nobody)", "client": None, "allocation": None, "room": None, "heartbeat": None,
                        "owns": _partitions(s.unowned)})
        return out

    _show(status, as_json, rows, f"group {group}: no members")


def _partitions(tps: Sequence[tuple[str, int]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(tps):
        by_topic.setdefault(topic, []).append(partition)
    return " ".join(f"{t}[{','.join(map(str, ps))}]" for t, ps in by_topic.items()) or "-"


@admin.command("locks")
@click.argument("group")
@_topic_option
@_json_option
def locks(group: str, topics: tuple[str, ...], as_json: bool) -> None:
    """The lock table of GROUP: owner, fencing token, lease left, delivered/acked (transition state)."""
    settings = command_settings()
    from rocketkafka.operations.reading import LogReader

    with LogReader(settings) as reader:
        tps = [tp for t in ops.group_topics(settings, group, reader, topics) for tp in reader.partitions(t)]
    views = ops.lock_views(settings, group, tps)
    _show(views, as_json, lambda vs: [
        {"topic": v.topic, "partition": v.partition, "owner": v.owner or "-", "fence": v.fencing_token,
         "lease left": None if v.lease_left_ms is None else f"{v.lease_left_ms / 1000:.1f}s",
         "delivered": v.delivered, "acked": v.acked} for v in vs], "(no partitions)")


@admin.command("reset-offset")
@click.argument("group")
@click.argument("topic")
@click.option("--to", "to", required=True, metavar="TIME|earliest|latest|OFFSET",
              help="an ISO 8601 time (2026-05-01T09:00:00), earliest, latest or an offset")
@click.option("--partition", "partitions", multiple=True, type=click.IntRange(0), help="only this partition (repeatable)")
@click.option("--force", is_flag=True, help="reset to a time even where the broker's offsets_for_times is unreliable")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(1, 3600),
              help="seconds to wait for the owners to apply it")
@_json_option
def reset_offset(group: str, topic: str, to: str, partitions: tuple[int, ...], force: bool, timeout: float,
                 as_json: bool) -> None:
    """Make GROUP re-read TOPIC from a time or offset, safely while it runs (owners drain, then re-read)."""
    outcomes = ops.reset_offset(command_settings(), group, topic, to, partitions=list(partitions) or None,
                                force=force, timeout=timeout)
    _show(outcomes, as_json, lambda rs: [
        {"topic": r.topic, "partition": r.partition, "before": "-" if r.before is None else r.before,
         "after": r.after, "applied by": r.applied_by} for r in rs], "(no partitions)")


# -- delay and transactions -------------------------------------------------------------------
@admin.command("delay-backlog")
@click.option("--group", default="delay-forwarder", show_default=True, help="the forwarders' consumer group")
@_json_option
def delay_backlog(group: str, as_json: bool) -> None:
    """Per delay level: messages waiting, oldest and next due time, forwarder owners."""
    levels = ops.delay_backlog(command_settings(), group)
    _show(levels, as_json, lambda ls: [
        {"level": "step" if b.level is None else b.level, "delay": format_duration(b.delay_ms), "waiting": b.waiting,
         "oldest due": _when(b.oldest_due_ms), "next due": _ago(b.next_due_ms), "owners": " ".join(b.owners) or "-",
         "topic": b.topic} for b in ls], "(no delay topics: nothing was delayed yet)")


@admin.command("topics")
@_json_option
def internal_topics(as_json: bool) -> None:
    """Internal topics: partitions, replicas, smallest ISR, min.insync.replicas, and what is wrong."""
    found = ops.internal_topics(command_settings())
    _show(found, as_json, lambda ts: [
        {"topic": t.topic, "partitions": t.partitions, "replicas": t.replication_factor,
         "wanted": "-" if t.wanted is None else t.wanted, "ISR": t.smallest_isr,
         "min ISR": "-" if t.min_insync_replicas is None else t.min_insync_replicas,
         "under-replicated": ",".join(map(str, t.under_replicated)) or "-",
         "status": "ok" if t.problem is None else "WARN"} for t in ts],
        "(no internal topics yet)")
    problems = [t.problem for t in found if t.problem]
    if problems and not as_json:
        click.echo("\n".join(problems))


@admin.command("provision")
@deployment_options
@_json_option
def provision(as_json: bool, **deployment_fields: Any) -> None:
    """Create the deployment's internal topics that do not exist (the options as `rocketkafka acls` takes them).

    Run it as the admin role, the one allowed to create topics: every other role then finds its topics and
    needs no CREATE grant. The prefixes are the connection settings' (ROCKETKAFKA_TOPIC_PREFIX, ...).
    """
    settings = command_settings()
    fields = {**deployment_fields, "topic_prefix": deployment_fields.get("topic_prefix") or settings.topic_prefix,
              "redis_prefix": deployment_fields.get("redis_prefix") or settings.redis_prefix}
    made = ops.provision_topics(settings, deployment_from(fields))
    _show(made, as_json, lambda m: [{"topic": t, "status": "created" if new else "exists"} for t, new in m.items()],
          "(no internal topics: the deployment uses none)")


@admin.command("grant")
@click.argument("role", type=click.Choice([r.value for r in ops.Role]))
@click.argument("user")
@deployment_options
@click.option("--existing-user", is_flag=True, help="the SCRAM user exists: give it the ACLs and the Redis rule only")
@click.option("--write-config", type=click.Path(dir_okay=False, writable=True), default=None,
              help="write USER's settings (brokers, TLS, Redis nodes, its name and password) to this owner-only "
                   "properties file, for its ROCKETKAFKA_CONFIG_FILE")
def grant(role: str, user: str, existing_user: bool, write_config: str | None, **deployment_fields: Any) -> None:
    """Give USER the ROLE: a SCRAM credential, exactly the Kafka ACLs and the Redis rule `rocketkafka acls` prints.

    Run it as the super user (ROCKETKAFKA_CONFIG_FILE). The password comes from ROCKETKAFKA_GRANT_PASSWORD or a
    prompt, never the command line (which `ps` shows); the Redis ACL user gets the same name and password.
    """
    password = os.environ.get("ROCKETKAFKA_GRANT_PASSWORD") or click.prompt(
        f"password for {user}", hide_input=True, confirmation_prompt=True, err=True)
    settings = command_settings()
    fields = {**deployment_fields, "topic_prefix": deployment_fields.get("topic_prefix") or settings.topic_prefix,
              "redis_prefix": deployment_fields.get("redis_prefix") or settings.redis_prefix}
    done = ops.grant_role(settings, role, deployment_from(fields), user, password, create_user=not existing_user)
    click.echo(f"{done.principal} is {done.role.value}: {done.kafka_acls} Kafka ACL(s), the Redis rule on "
               f"{done.redis_nodes} node(s)")
    if write_config:
        fd = os.open(write_config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(ops.user_properties(settings, user, password))
        click.echo(f"{user}'s settings: {write_config} (owner-only): ROCKETKAFKA_CONFIG_FILE={write_config}")


@admin.command("txn-pending")
@click.option("--producer-group", default=None, help="only this producer group")
@_json_option
def txn_pending(producer_group: str | None, as_json: bool) -> None:
    """Open half messages by producer group: transaction, age, checks done."""
    halves = ops.pending_transactions(command_settings(), producer_group)
    _show(halves, as_json, lambda hs: [
        {"producer group": h.producer_group, "transaction": h.transaction_id, "topic": h.real_topic,
         "half": f"{h.half_partition}@{h.half_offset}", "age": f"{h.age_ms / 1000:.1f}s", "checks": h.checks}
        for h in hs], "(no open transactions)")


# -- dead letters -------------------------------------------------------------------------------
@admin.group("dlq")
def dlq() -> None:
    """A group's dead letters: list, show, re-send to their topic."""


@dlq.command("list")
@click.argument("group")
@click.option("--last", default=100, show_default=True, type=click.IntRange(1), help="newest per partition")
@_json_option
def dlq_list(group: str, last: int, as_json: bool) -> None:
    """Dead letters of GROUP, oldest first."""
    letters = ops.dead_letters(command_settings(), group, last)
    _show(letters, as_json, lambda ls: [
        {"at": d.location, "msg id": d.msg_id, "from": f"{d.origin_topic}[{d.origin_partition}]@{d.origin_offset}",
         "tries": d.reconsume_times, "stored": _when(d.stored_ms), "reason": d.reason[:80]} for d in ls],
          f"group {group}: no dead letters")


@dlq.command("show")
@click.argument("group")
@click.argument("which", metavar="PARTITION@OFFSET|MSG_ID")
@_json_option
def dlq_show(group: str, which: str, as_json: bool) -> None:
    """One dead letter of GROUP, all it carries."""
    d = ops.dead_letter(command_settings(), group, which)
    _show(d, as_json, lambda d: [{"field": k, "value": v} for k, v in (
        ("at", d.location), ("msg id", d.msg_id), ("origin", f"{d.origin_topic}[{d.origin_partition}]@{d.origin_offset}"),
        ("reason", d.reason), ("tries", d.reconsume_times), ("stored", _when(d.stored_ms)), ("tags", d.tags),
        ("keys", d.keys), *((f"property {k}", v) for k, v in d.properties.items()),
        ("body", d.body[:200].decode("utf-8", "replace")))], "")


@dlq.command("resend")
@click.argument("group")
@click.argument("which", nargs=-1, metavar="[PARTITION@OFFSET|MSG_ID]...")
@click.option("--all", "everything", is_flag=True, help="every dead letter of the group")
@click.option("--to-topic", default=None, help="send here instead of each message's original topic")
@_json_option
def dlq_resend(group: str, which: tuple[str, ...], everything: bool, to_topic: str | None, as_json: bool) -> None:
    """Send dead letters of GROUP back to their topic as a first try (message id kept)."""
    sent = ops.resend_dead_letters(command_settings(), group, which, everything, to_topic)
    _show(sent, as_json, lambda ss: [
        {"from": s.location, "msg id": s.msg_id, "to": f"{s.topic}[{s.partition}]@{s.offset}"} for s in ss],
          "(nothing sent)")


# -- messages -----------------------------------------------------------------------------------
@admin.command("query-msg")
@click.option("--id", "msg_id", default=None, help="a message id, or topic@partition@offset")
@click.option("--key", default=None, help="a message key (needs --topic)")
@click.option("--topic", default=None, help="the topic to look in (scans need it)")
@click.option("--window", default="10m", show_default=True, help="--id scans: how far from the id's creation time")
@click.option("--begin", default=None, help="--key: stored at or after this ISO time")
@click.option("--end", default=None, help="--key: stored at or before this ISO time")
@click.option("--max-records", default=1_000_000, show_default=True, type=click.IntRange(1),
              help="a scan reads at most this many records")
@_json_option
def query_msg(msg_id: str | None, key: str | None, topic: str | None, window: str, begin: str | None,
              end: str | None, max_records: int, as_json: bool) -> None:
    """Find messages by id (queryMsgById) or by key (queryMsgByKey): the index first, else a bounded scan."""
    settings = command_settings()
    if (msg_id is None) == (key is None):
        raise click.UsageError("give exactly one of --id and --key")
    if msg_id is not None:
        found = ops.query_by_id(settings, msg_id, topic, parse_duration(window), _progress(topic or "the topic"))
    else:
        if topic is None:
            raise click.UsageError("--key needs --topic")
        found = ops.query_by_key(settings, topic, key or "", _ms_option(begin), _ms_option(end), max_records,
                                 _progress(topic))
    _show(found, as_json, lambda fs: [
        {"msg id": f.msg_id, "at": f"{f.topic}[{f.partition}]@{f.offset}", "stored": _when(f.stored_ms),
         "tags": f.tags, "keys": f.keys, "found by": f.found_by,
         "body": f.body[:40].decode("utf-8", "replace")} for f in fs], "(no message found)")


@admin.command("trace")
@click.option("--id", "msg_id", required=True, help="the message id")
@_json_option
def trace(msg_id: str, as_json: bool) -> None:
    """The life of a message: sent, delayed, forwarded, delivered, consumed, retried, dead-lettered."""
    events = ops.trace_of(command_settings(), msg_id, _progress("the trace topic"))
    _show(events, as_json, lambda es: [
        {"time": _when(e.ts), "event": e.event, "client": e.client,
         "details": " ".join(f"{k}={v}" for k, v in e.fields.items() if k not in ("host",))} for e in es],
          f"no trace events for {msg_id}")
