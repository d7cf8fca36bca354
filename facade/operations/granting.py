"""Giving a user a role: its SCRAM credential, the role's Kafka ACLs and its Redis ACL rule, in one call.

What ``rocketkafka acls`` prints, applied by the deployment's super user (``rocketkafka admin grant``), for
clusters where Kafka's own scripts (``kafka-configs.sh``, ``kafka-acls.sh``) are not at hand -- the embedded
secured stack among them. The password is given to the function, never read from a command line.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketkafka.config import Settings
from rocketkafka.operations.acl_model import Deployment, Role
from rocketkafka.operations.acl_output import apply_kafka_acls, apply_redis_rule
from rocketkafka.operations.permissions import permissions

#: SCRAM iterations of a new credential (Kafka's minimum is 4096; its tools' examples use 8192).
SCRAM_ITERATIONS = 8192


@dataclass(frozen=True)
class Granted:
    """What :func:`grant_role` did: the principal, how many Kafka ACLs, and the Redis nodes given the rule."""

    role: Role
    principal: str
    kafka_acls: int
    redis_nodes: int


def create_scram_user(settings: Settings, user: str, password: str, mechanism: str = "SCRAM-SHA-512",
                      timeout: float = 30.0) -> None:
    """Create ``user``'s SCRAM credential (or give it a new password), as the principal of ``settings``.

    Raises:
        KafkaException: the broker refused it (the principal may not ALTER the cluster, or SCRAM is off).
    """
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    kind = ScramMechanism.SCRAM_SHA_256 if mechanism.upper() == "SCRAM-SHA-256" else ScramMechanism.SCRAM_SHA_512
    admin = AdminClient(settings.kafka_config())
    try:
        upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(kind, SCRAM_ITERATIONS), password.encode())
        for future in admin.alter_user_scram_credentials([upsert], request_timeout=timeout).values():
            future.result(timeout)
    finally:
        del admin


def grant_role(settings: Settings, role: Role | str, deployment: Deployment, user: str, password: str,
               create_user: bool = True) -> Granted:
    """Give ``user`` exactly what ``role`` needs in ``deployment``: a SCRAM credential with ``password`` (unless
    ``create_user`` is false), the role's Kafka ACLs for ``User:<user>``, and its Redis rule on every node of
    ``settings`` (the same password). ``settings`` are the super user's.

    Raises:
        KafkaException: the broker refused a credential or an ACL.
        redis.RedisError: a Redis node refused the rule or did not answer.
    """
    import redis

    granted = permissions(Role(role), deployment)
    mechanism = str(settings.kafka.get("sasl.mechanism", "SCRAM-SHA-512"))
    if create_user:
        create_scram_user(settings, user, password, mechanism if mechanism.upper().startswith("SCRAM") else
                          "SCRAM-SHA-512")
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(settings.kafka_config())
    try:
        apply_kafka_acls(admin, f"User:{user}", granted.kafka)
    finally:
        del admin
    nodes = 0
    if granted.redis is not None:
        for url in settings.require_redis():
            with redis.Redis.from_url(url) as node:
                apply_redis_rule(node, user, password, granted.redis)
            nodes += 1
    return Granted(granted.role, f"User:{user}", len(granted.kafka), nodes)


def user_properties(settings: Settings, user: str, password: str) -> str:
    """The properties text (for ``ROCKETKAFKA_CONFIG_FILE``) of ``user``: the super user's ``settings`` -- brokers,
    TLS and SASL mechanism, Redis nodes and their CA -- with ``user``'s name and password in place of its own."""
    from urllib.parse import quote, urlsplit, urlunsplit

    kafka = {key: value for key, value in settings.client_properties().items()}
    kafka.update({"sasl.username": user, "sasl.password": password})
    urls = []
    for url in settings.redis_urls:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
        urls.append(urlunsplit(parts._replace(netloc=f"{quote(user, safe='')}:{quote(password, safe='')}@{host}")))
    lines = {"bootstrap.servers": settings.bootstrap_servers, **kafka,
             **({"rocketkafka.redis.urls": ",".join(urls)} if urls else {}),
             "rocketkafka.topic.prefix": settings.topic_prefix, "rocketkafka.redis.prefix": settings.redis_prefix}
    return "".join(f"{key}={value}\n" for key, value in lines.items())
