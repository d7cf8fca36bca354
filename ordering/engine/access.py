"""What an engine may do on a secured cluster: asked at its start, and told while it runs.

Kafka says nothing of a missing READ before the first fetch (an error event), and a consumer
without its group's ACL only times out asking for committed offsets (``_TIMED_OUT`` "Failed to get
committed offsets"), over and over. So an engine whose Kafka connection uses TLS or SASL asks at
start, in one DescribeTopics and one DescribeGroups request with the principal's authorized
operations, and refuses to start without READ on its topics and its group. An engine whose Redis
URLs name an ACL user (or TLS) reads one lock entry, so a user without the lock table's key
pattern is refused at start with ``NOPERM`` named, not left winning no lock. Nothing is asked
where nothing is secured.

While it runs, a refusal (a fetch, a commit) is told through
:data:`~rocketkafka.refusals.REFUSALS`: once a minute, and in ``health()``; nothing is committed
past what was refused.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any
from urllib.parse import urlparse

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.errors import AuthorizationError
from rocketkafka.ordering.locks import LockTable
from rocketkafka.refusals import GRANT_HINT, REFUSALS, kafka_refusal, principal_of, refusal_in, secured

log = logging.getLogger(__name__)

#: Seconds the start's access questions may take (a broker that does not answer them is no refusal).
ACCESS_TIMEOUT_S = 10.0
#: Seconds the start asks the lock table's nodes until each answered (or refused).
LOCK_CHECK_S = 3.0
_READS = frozenset({AclOperation.READ, AclOperation.ALL})
_WRITES = frozenset({AclOperation.WRITE, AclOperation.ALL})
#: Seconds a running service asks which topic it may not write (a failed transaction's refusal names none).
WRITE_PROBE_S = 3.0


def check_start_access(admin: TopicAdmin, topics: Iterable[str], group: str, settings: Settings,
                       locks: LockTable | None) -> None:
    """Refuse a start that could not read ``topics``, commit for ``group`` or hold a lock (see the module).

    Raises:
        AuthorizationError: a READ grant on a topic or the group is missing (Kafka), or the lock table's
            key pattern or commands (Redis ``NOPERM``: a ``RedisPermissionError``).
    """
    topics = sorted(set(topics))
    if secured(settings.kafka) and topics:
        principal = principal_of(settings.kafka)
        _check_topics(admin, topics, principal)
        _check_group(admin, group, principal)
    if locks is not None and topics and any(_acl_user(url) for url in settings.redis_urls):
        # raises the refusal when no quorum of nodes lets us read the entry; asked again while a node is still
        # connecting (a TLS handshake may take longer than a round: its node counts as not answering) and its
        # answer could still decide it (a quorum that granted decides: a node down costs no wait)
        deadline = time.monotonic() + LOCK_CHECK_S
        locks.describe((topics[0], 0))
        while locks._nodes.undecided(locks.quorum) and time.monotonic() < deadline:
            time.sleep(0.05)
            locks.describe((topics[0], 0))


def _acl_user(url: str) -> bool:
    """Whether a Redis URL logs in as a named ACL user or over TLS (where ``NOPERM`` is to be expected)."""
    try:
        parsed = urlparse(url)
    except ValueError:
        return False
    return bool(parsed.username) or parsed.scheme == "rediss"


def write_refusal(admin: TopicAdmin, topics: Sequence[str], principal: str | None,
                  timeout: float = WRITE_PROBE_S) -> AuthorizationError | None:
    """The refusal of a WRITE on the first of ``topics`` no grant lets ``principal`` write, else ``None`` (also
    when the broker does not answer within ``timeout`` s)."""
    try:
        _check_topics(admin, topics, principal, _WRITES, "WRITE", timeout)
    except AuthorizationError as refusal:
        return refusal
    except KafkaException as exc:
        log.debug("write access to %s not asked: %s", topics, exc)
    return None


def _check_topics(admin: TopicAdmin, topics: Sequence[str], principal: str | None,
                  allowed: frozenset[Any] = _READS, needed: str = "READ", timeout: float = ACCESS_TIMEOUT_S) -> None:
    futures = admin.client.describe_topics(TopicCollection(list(topics)), include_authorized_operations=True,
                                           request_timeout=timeout)
    for topic, future in futures.items():
        _check_described(future, "topic", topic, "DESCRIBE", allowed, needed, principal, timeout)


def _check_group(admin: TopicAdmin, group: str, principal: str | None) -> None:
    future = admin.client.describe_consumer_groups([group], include_authorized_operations=True,
                                                   request_timeout=ACCESS_TIMEOUT_S)[group]
    _check_described(future, "group", group, "READ", _READS, "READ", principal, ACCESS_TIMEOUT_S)


def _check_described(future: Any, kind: str, name: str, asking: str, allowed: frozenset[Any], needed: str,
                     principal: str | None, timeout: float) -> None:
    """Raise the refusal a described ``kind`` ``name`` tells: the description itself refused (``asking`` is the
    operation that asks it), or authorized operations without any of ``allowed`` (``needed`` is named). A broker
    that does not answer, or cannot tell, is no refusal."""
    try:
        described = future.result(timeout)
    except KafkaException as exc:
        refusal = refusal_in(exc, name, asking, principal)
        if refusal is not None:
            raise refusal from None
        log.debug("access to %s %s not asked: %s", kind, name, exc)
        return
    except FutureTimeout:
        return
    operations = described.authorized_operations
    if operations is not None and not allowed & set(operations):
        raise AuthorizationError("kafka", f"{kind.upper()}_AUTHORIZATION_FAILED", kind, name, needed, principal,
                                 hint=GRANT_HINT, detail=f"its grants on it allow {_names(operations)} only")


def _names(operations: Iterable[Any]) -> str:
    return ", ".join(sorted(getattr(op, "name", str(op)) for op in operations)) or "none"


# -- while running (poll thread) ---------------------------------------------------------------------------
def fetch_error(owner: str, group: str, kafka_config: Mapping[str, Any], record: Any) -> None:
    """An error event of the engine's consumer: the end of a partition is none; a fatal one ends the loop; a
    refusal (``TOPIC_``/``GROUP_AUTHORIZATION_FAILED``) is told once a minute; anything else is logged."""
    error, topic, partition = record.error(), record.topic(), record.partition()
    if error.code() == KafkaError._PARTITION_EOF:
        return
    if error.fatal():
        raise KafkaException(error)
    resource = topic if error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED else group
    refusal = kafka_refusal(error, resource, "READ", principal_of(kafka_config))
    if refusal is not None:
        REFUSALS.note(refusal, f"{owner}: fetching {topic}[{partition}]" if topic else f"{owner}: group {group}")
        return
    log.warning("%s: fetch error on %s[%s]: %s", owner, topic, partition, error)


def commit_failed(reason: object, failed: Sequence[Any], group: str, kafka_config: Mapping[str, Any],
                  owner: str) -> None:
    """Say that a commit of ``failed`` partitions failed (they are sent again later): a refusal for a missing
    ACL once a minute, anything else every time."""
    error = reason.args[0] if isinstance(reason, KafkaException) and reason.args else reason
    resource = failed[0].topic if isinstance(error, KafkaError) \
        and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED else group
    refusal = kafka_refusal(error, resource, "READ", principal_of(kafka_config))
    if refusal is not None:
        REFUSALS.note(refusal, f"{owner}: committing offsets of group {group}")
        return
    log.warning("%s: commit of %d partition(s) failed (%s); retrying", owner, len(failed), reason)
