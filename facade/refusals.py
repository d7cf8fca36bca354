"""Refusals, named: what a secured Kafka or Redis refused, as one error that says what is missing.

A secured cluster refuses two things, and each client library says them its own way:

- **who we are** (:class:`~rocketkafka.errors.AuthenticationError`): librdkafka logs it and then
  fails a metadata call with ``_TRANSPORT`` "Broker transport failure", naming nothing;
  :mod:`rocketkafka.connection_check` reads its log lines and names the cause.
- **what we may do** (:class:`~rocketkafka.errors.AuthorizationError`): Kafka answers an error code
  (29 ``TOPIC_``, 30 ``GROUP_``, 31 ``CLUSTER_``, 53 ``TRANSACTIONAL_ID_AUTHORIZATION_FAILED``) that names
  a resource type but not the resource; Redis answers ``NOPERM`` naming the command, or "one of the
  keys" without saying which (``ACL LOG``, which would, is for admins). Here the caller says what it was
  doing (the topic, group, id, command and keys), so the error names the resource, the operation and the
  principal, and what grants it.

A service that meets a refusal while it runs keeps waiting where it is and tells it through
:data:`REFUSALS`: once a minute per refusal in the log, and in its ``health()`` while it lasts.
No message carries a secret: principals are user names, URLs lose their passwords.

>>> err = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Broker: Topic authorization failed")
>>> str(kafka_refusal(err, "orders", "WRITE", "User:app"))  # doctest: +ELLIPSIS
"Kafka refused WRITE on topic 'orders' to User:app (TOPIC_AUTHORIZATION_FAILED); ..."
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlparse

import redis
from confluent_kafka import KafkaError

from rocketkafka.errors import (AuthorizationError, RedisAuthError, RedisCredentialsError, RedisPermissionError,
                                SendError, SendNotAuthorizedError)
from rocketkafka.redaction import redact_url

log = logging.getLogger("rocketkafka.refusals")

#: What a refusal message adds about granting the permission (the permissions model prints every role's grants).
GRANT_HINT = "grant it (`rocketkafka acls` prints what each role needs)"
#: Kafka's authorization error codes and the ACL resource type each is about.
RESOURCE_OF: dict[int, str] = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "group",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "cluster",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "transactional id",
    KafkaError.DELEGATION_TOKEN_AUTHORIZATION_FAILED: "delegation token",
}
#: The name of the cluster resource in Kafka's ACLs.
CLUSTER = "kafka-cluster"
#: A refusal a service met is "standing" (its health shows it) this long after it was last met (s).
STANDING_S = 30.0


# -- Kafka ---------------------------------------------------------------------------------------------
def principal_of(config: Mapping[str, Any]) -> str | None:
    """``User:<sasl.username>`` of a confluent-kafka config, else ``None`` (no SASL user given)."""
    user = config.get("sasl.username")
    return f"User:{user}" if user else None


def secured(config: Mapping[str, Any]) -> bool:
    """Whether a confluent-kafka config speaks TLS or SASL (``security.protocol`` other than ``PLAINTEXT``)."""
    return str(config.get("security.protocol") or "plaintext").lower() != "plaintext"


def is_authorization(error: Any) -> bool:
    """Whether ``error`` (a KafkaError, or anything else) is one of Kafka's ``*_AUTHORIZATION_FAILED``."""
    return isinstance(error, KafkaError) and error.code() in RESOURCE_OF


def kafka_refusal(error: Any, resource: str | None, operation: str, principal: str | None = None) -> \
        AuthorizationError | None:
    """The :class:`AuthorizationError` ``error`` stands for, naming ``resource`` (the topic, group or id the caller
    was using; ignored for the cluster) and ``operation``; ``None`` when ``error`` is no authorization error.

    A cluster refusal of an idempotent producer's id (``InitProducerId``) names what Kafka accepts instead (and
    the topic the caller was writing).
    """
    if not is_authorization(error):
        return None
    kind = RESOURCE_OF[error.code()]
    detail = None
    if kind == "cluster":
        writing = f" ({resource!r} here)" if resource and operation == "WRITE" else ""
        resource = CLUSTER
        if "idempoten" in error.str().lower():
            operation, detail = "IDEMPOTENT_WRITE", (f"an idempotent producer needs WRITE on the topics it writes"
                                                     f"{writing}, or IDEMPOTENT_WRITE on the cluster")
    return AuthorizationError("kafka", error.name(), kind, resource or "?", operation, principal, hint=GRANT_HINT,
                              detail=detail, error=error)


def send_error(topic: str, error: KafkaError, principal: str | None = None) -> SendError:
    """The :class:`SendError` of a failed delivery report: a :class:`SendNotAuthorizedError` naming the topic
    (or the cluster) and the principal when an ACL is missing."""
    if not is_authorization(error):
        return SendError(topic, error.str(), error)
    refusal = kafka_refusal(error, topic, "WRITE", principal)
    assert refusal is not None
    return SendNotAuthorizedError(topic, error, principal, hint=refusal.hint, resource_type=refusal.resource_type,
                                  resource=refusal.resource, operation=refusal.operation, detail=refusal.detail)


def refusal_in(error: BaseException, resource: str | None, operation: str, principal: str | None = None) -> \
        AuthorizationError | None:
    """The :class:`AuthorizationError` a ``KafkaException`` (or one already mapped) stands for, else ``None``."""
    if isinstance(error, AuthorizationError):
        return error
    cause = error.args[0] if error.args else None
    return kafka_refusal(cause, resource, operation, principal)


# -- Redis ---------------------------------------------------------------------------------------------
def redis_principal(url: str) -> str:
    """``Redis user 'name'`` of a Redis URL (``'default'`` when it names no user)."""
    try:
        user = urlparse(url).username
    except ValueError:
        user = None
    return f"Redis user {unquote(user) if user else 'default'!r}"


def is_redis_permission(exc: BaseException) -> bool:
    """Redis answered ``NOPERM`` (a command or a key the ACL user may not use)."""
    return isinstance(exc, redis.exceptions.NoPermissionError) or \
        isinstance(exc, redis.ResponseError) and str(exc).upper().startswith("NOPERM")


def redis_credentials_reason(exc: BaseException) -> str | None:
    """``credentials`` when Redis refused who we are, ``tls-trust``/``tls`` when TLS to it failed, else ``None``."""
    if isinstance(exc, redis.AuthenticationError) or \
            isinstance(exc, redis.ResponseError) and str(exc).upper().startswith(("NOAUTH", "WRONGPASS")):
        return "credentials"
    text = str(exc)
    if isinstance(exc, (redis.ConnectionError, OSError)) and "CERTIFICATE_VERIFY_FAILED" in text:
        return "tls-trust"
    if isinstance(exc, (redis.ConnectionError, OSError)) and ("[SSL" in text or "SSL:" in text):
        return "tls"
    return None


def redis_refusal(problems: Mapping[str, BaseException], action: str, command: str, keys: list[str],
                  pattern: str, url: str) -> RedisAuthError | None:
    """The error of Redis nodes that refused us (``problems``: node name without password -> exception), or
    ``None`` when none did (they did not answer). A ``NOPERM`` names the command or the key and the key
    ``pattern`` the ACL user needs (``~pattern``); refused credentials or TLS name the user.
    """
    nodes = {name: redact_url(f"{type(exc).__name__}: {exc}") for name, exc in problems.items()}
    who = redis_principal(url)
    denied = [exc for exc in problems.values() if is_redis_permission(exc)]
    if denied:
        text = str(denied[0])
        if "command" in text and "key" not in text:
            named = text.split("'")[1] if text.count("'") >= 2 else command
            return RedisPermissionError(nodes, named.upper(), named, who, resource_type="command",
                                        hint=f"{action} needs the command {named!r} (+{named}); {GRANT_HINT}")
        return RedisPermissionError(nodes, command, keys[0] if keys else pattern, who,
                                    hint=f"{action} needs the key pattern ~{pattern}; {GRANT_HINT}")
    for exc in problems.values():
        reason = redis_credentials_reason(exc)
        if reason is not None:
            return RedisCredentialsError(nodes, action, reason=reason, principal=who)
    return None


# -- a running service's refusals ------------------------------------------------------------------------
class RefusalLog:
    """The refusals a running client or service meets again and again (a partition retrying a write it may not
    make): each is logged once per ``window_s`` with how often it came meanwhile, and is *standing* for
    :data:`STANDING_S` after it was last met (``health()`` shows the standing ones).

    Process-wide (:data:`REFUSALS`): what a principal may not do holds for every client of the process.
    """

    def __init__(self, window_s: float = 60.0) -> None:
        self.window_s = window_s
        self._lock = threading.Lock()
        self._seen: dict[str, list[float]] = {}  # message -> [last logged at, last met at, met since logged]

    def note(self, refusal: BaseException, where: str = "") -> bool:
        """``refusal`` was met (at ``where``: ``"delay forwarder: ('rk.delay.1s', 0)@42"``); True when logged now."""
        text = f"{where}: {refusal}" if where else str(refusal)
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(text)
            if seen is not None and now - seen[0] < self.window_s:
                seen[1], seen[2] = now, seen[2] + 1
                return False
            held = int(seen[2]) if seen is not None else 0
            self._seen[text] = [now, now, 0]
            if len(self._seen) > 256:  # bounded: forget the oldest
                for old in sorted(self._seen, key=lambda k: self._seen[k][1])[:128]:
                    del self._seen[old]
        more = f" (met {held} more times in the last {self.window_s:g} s)" if held else ""
        log.error("%s; waiting and retrying, nothing past it is committed%s", text, more)
        return True

    def standing(self, within_s: float = STANDING_S) -> tuple[str, ...]:
        """The refusals met in the last ``within_s`` seconds, newest first."""
        now = time.monotonic()
        with self._lock:
            recent = sorted(((seen[1], text) for text, seen in self._seen.items() if now - seen[1] < within_s),
                            reverse=True)
        return tuple(text for _, text in recent)

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


#: The process's refusal log.
REFUSALS = RefusalLog()
