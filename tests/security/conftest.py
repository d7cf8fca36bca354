"""Users of a secured backend for the security tests: a Kafka SCRAM user with exactly the ACLs a test gives, and a
Redis ACL user with exactly the rule it gives; and the secret scan every test here passes through (no password of
the stack or of a user in what a test printed, logged at any level, or what the processes it started wrote).

Every test here needs the secured backend (``ROCKETKAFKA_TEST_BACKEND=kafka ROCKETKAFKA_TEST_SECURE=1``) and
skips with that reason elsewhere.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)

from rocketkafka.config import Settings
from rocketkafka.operations import Deployment, KafkaAcl, RedisRule, Role, apply_kafka_acls, permissions, remove_kafka_acls
from rocketkafka.testing.backends import Backend
from rocketkafka.testing.secure import new_password

#: One Kafka ACL as the tests write it: (resource type, name, pattern type, operation), e.g.
#: ``("TOPIC", "rk.", "PREFIXED", "WRITE")``.
Acl = tuple[str, str, str, str]


@dataclass
class SecureUser:
    """A user made for one test: its name, its client settings, and the ACLs it was given."""

    name: str
    password: str = field(repr=False)
    settings: Settings
    acls: list[Acl] = field(default_factory=list)
    redis_rule: list[str] = field(default_factory=list)

    @property
    def principal(self) -> str:
        return f"User:{self.name}"


def binding(principal: str, acl: Acl) -> AclBinding:
    """confluent-kafka's ``AclBinding`` allowing ``principal`` what ``acl`` says, from any host."""
    resource, name, pattern, operation = acl
    return AclBinding(ResourceType[resource], name, ResourcePatternType[pattern], principal, "*",
                      AclOperation[operation], AclPermissionType.ALLOW)


def grant(admin: AdminClient, principal: str, acls: list[Acl]) -> None:
    if not acls:
        return
    for future in admin.create_acls([binding(principal, acl) for acl in acls], request_timeout=30).values():
        future.result()


def revoke(admin: AdminClient, principal: str, acls: list[Acl]) -> None:
    if not acls:
        return
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in (binding(principal, acl) for acl in acls)]
    for future in admin.delete_acls(filters, request_timeout=30).values():
        future.result()


@pytest.fixture
def rk_admin(rk_settings: Settings) -> Iterator[AdminClient]:
    """An admin client of the super user."""
    admin = AdminClient(rk_settings.kafka_config())
    yield admin
    del admin


@pytest.fixture
def rk_user(rk_backend: Backend, rk_settings: Settings, rk_admin: AdminClient) -> Iterator[Callable[..., SecureUser]]:
    """Factory: ``rk_user(acls=[...], redis_rule=[...], name=None)`` makes a Kafka user with exactly ``acls`` and a Redis
    user of the same name with exactly ``redis_rule`` (none: it cannot log in to Redis), with the test's prefixes.
    Its ACLs are deleted after the test."""
    made: list[SecureUser] = []

    def make(acls: list[Acl] = (), redis_rule: list[str] = (), name: str | None = None) -> SecureUser:
        name = name or f"u-{uuid.uuid4().hex[:8]}"
        password, settings = _new_user(rk_backend, rk_settings, name, list(redis_rule) or ["off"])
        grant(rk_admin, f"User:{name}", list(acls))
        user = SecureUser(name, password, settings, list(acls), list(redis_rule))
        made.append(user)
        return user

    yield make
    for user in made:
        try:
            revoke(rk_admin, user.principal, user.acls)
        except Exception:  # a broker down after a fault test keeps them; the next session's broker is new
            pass


# -- the secret scan: nothing a test or a process it started printed may hold a password ------------------
_SECRETS: set[str] = set()  # every password of this session's secured stack and users


@pytest.fixture(autouse=True)
def _known_secrets(rk_backend: Backend, caplog: pytest.LogCaptureFixture) -> None:
    """Record the stack's passwords for the scan, and capture every log line (DEBUG and up) so the scan reads all."""
    material = getattr(getattr(rk_backend, "stack", None), "material", None)
    if material is not None:
        _SECRETS.update({material.admin_password, material.controller_password})
    caplog.set_level(logging.DEBUG)


def remember_secret(secret: str) -> None:
    """Add a password made by a test (a user's) to the scan."""
    _SECRETS.add(secret)


def leaked_in(text: str) -> list[str]:
    """The recorded secrets found in ``text`` (shown by their first two characters only)."""
    return [f"{secret[:2]}..." for secret in _SECRETS if secret and secret in text]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """Fail a test whose captured output, logs, or files under its ``tmp_path`` (logs of the processes it started)
    hold a password of the secured stack or of a user it made."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "teardown" or not _SECRETS:
        return
    found = [f"{title}: {', '.join(hits)}" for title, text in report.sections if (hits := leaked_in(text))]
    folder = getattr(item, "funcargs", {}).get("tmp_path")
    if folder is not None:
        for path in Path(folder).rglob("*"):
            if path.is_file() and path.stat().st_size < 50_000_000 and (hits := leaked_in(path.read_text(errors="replace"))):
                found.append(f"{path}: {', '.join(hits)}")
    if found:
        report.outcome = "failed"
        report.longrepr = "secret leaked: " + "; ".join(found)


# -- users of a role, with exactly what `rocketkafka acls` prints for it (or one ACL less) ------------------
@dataclass
class RoleUser:
    """A user made for one role of a deployment: its settings, and the ACLs and Redis rule it was given."""

    role: Role
    name: str
    settings: Settings
    acls: tuple[KafkaAcl, ...]
    redis: RedisRule | None

    @property
    def principal(self) -> str:
        return f"User:{self.name}"


def _new_user(rk_backend: Backend, rk_settings: Settings, name: str, redis_rule: list[str]) -> tuple[str, Settings]:
    """A Kafka SCRAM user and a Redis ACL user ``name`` with ``redis_rule`` and a new password (remembered for the
    secret scan), and its settings under the test's prefixes."""
    password = new_password()
    remember_secret(password)
    rk_backend.add_kafka_user(name, password)
    rk_backend.add_redis_user(name, password, redis_rule)
    return password, rk_backend.user_settings(name, password, topic_prefix=rk_settings.topic_prefix,
                                              redis_prefix=rk_settings.redis_prefix)


def deployment_of(settings: Settings, **fields: object) -> Deployment:
    """A deployment under the test's prefixes; Redis 7.0 (Debian's, the secured stack's) has no CLIENT SETINFO."""
    return Deployment(topic_prefix=settings.topic_prefix, redis_prefix=settings.redis_prefix, redis_setinfo=False,
                      **fields)


@pytest.fixture
def rk_role(rk_backend: Backend, rk_settings: Settings, rk_admin: AdminClient) -> Iterator[Callable[..., RoleUser]]:
    """Factory: ``rk_role(role, deployment, without=None, redis_without=None)`` makes a user with exactly the Kafka ACLs
    and the Redis rule :func:`rocketkafka.operations.permissions` gives ``role`` (less ``without``, a KafkaAcl of
    it, or ``redis_without``, a command); its ACLs are deleted after the test."""
    made: list[RoleUser] = []

    def make(role: Role | str, deployment: Deployment, without: KafkaAcl | None = None,
             redis_without: str | None = None) -> RoleUser:
        role = Role(role)
        granted = permissions(role, deployment)
        acls = tuple(acl for acl in granted.kafka if acl != without)
        rule = granted.redis.without(redis_without) if granted.redis and redis_without else granted.redis
        name = f"{role.value}-{uuid.uuid4().hex[:6]}"
        # the role's rule less its leading "reset on ><password>", which add_redis_user gives itself
        _, settings = _new_user(rk_backend, rk_settings, name,
                                rule.rules("")[3:] if rule is not None else ["off"])
        apply_kafka_acls(rk_admin, f"User:{name}", acls)
        user = RoleUser(role, name, settings, acls, rule)
        made.append(user)
        return user

    yield make
    for user in made:
        try:
            remove_kafka_acls(rk_admin, user.principal, user.acls)
        except Exception:  # a broker down after a fault test keeps them; the next session's broker is new
            pass
