"""MkDocs hook: the security guide's per-role grants are generated from the least-privilege model.

``guides/security.md`` holds the marker ``<!-- role-grants -->``; this hook replaces it with one table per
role of :data:`SAMPLE` -- every Kafka ACL with its pattern, operation and why, and the Redis rule -- as
``rocketkafka.operations.permissions`` gives them (and ``rocketkafka acls`` prints them), so the page cannot
drift from what the tests apply.
"""

from __future__ import annotations

from typing import Any

MARKER = "<!-- role-grants -->"
#: The deployment the page shows: one topic, one consumer group, one producer group, default prefixes.
SAMPLE = dict(topics=("orders",), consumer_groups=("billing",), producer_groups=("payments",))


def role_grants() -> str:
    from rocketkafka.operations import Deployment, Role, permissions

    deployment = Deployment(**SAMPLE)
    out = []
    for role in Role:
        granted = permissions(role, deployment)
        out.append(f"### {role.value}\n\n{role.summary}\n\n| resource | name | pattern | operation | why |\n"
                   "|---|---|---|---|---|")
        for acl in granted.kafka:
            why = acl.why.replace("|", r"\|")
            out.append(f"| {acl.resource.value} | `{acl.name}` | {acl.pattern.value.lower()} | {acl.operation.value} "
                       f"| {why} |")
        if granted.redis is None:
            out.append("\nRedis: none (this role touches no Redis).\n")
        else:
            rule = granted.redis
            out.append(f"\nRedis keys {', '.join(f'`~{k}`' for k in rule.keys)}"
                       + (f"; channels {', '.join(f'`&{c}`' for c in rule.channels)}" if rule.channels else "")
                       + f"; commands {' '.join(f'`+{c}`' for c in rule.commands)}.\n")
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, role_grants())
