"""Topic provisioning through the Kafka AdminClient.

Topics are created explicitly. Existence is checked with ``list_topics()`` and no
topic argument, because asking a broker about one topic by name may auto-create
it (Tansu does, with 4 partitions). Unless told otherwise the broker picks the
replication factor (its ``default.replication.factor``); internal topics follow the
settings' ``internal_*`` replication (:meth:`TopicAdmin.create_internal`).
"""

from __future__ import annotations

import builtins  # the method TopicAdmin.list shadows the type in the class body
import logging
import time
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec, ResourceType

from rocketkafka.config import Settings, kafka_client
from rocketkafka.connection_check import LogWatch, authentication_error
from rocketkafka.errors import (AuthenticationError, AuthorizationError, BrokerUnavailableError, ConfigError,
                                StateError, TopicNotFoundError, TopicsNotCreatedError)
from rocketkafka.names import check_topic_name
from rocketkafka.refusals import CLUSTER, GRANT_HINT, principal_of, refusal_in, secured
from rocketkafka.replication import BROKER_DEFAULT, WARNINGS, TopicReplication, internal_topic_config

log = logging.getLogger(__name__)

#: Seconds a create waits for a first answer from the broker before saying that none answered.
REACHABLE_WITHIN_S = 5.0
#: Seconds a look-up keeps asking a cluster of several brokers about a topic it does not list: each broker
#: learns of a new topic from the controller on its own time, so one created a moment ago (by another
#: client) may be missing from the broker asked. A single broker's answer is final.
NEW_TOPIC_PROPAGATION_S = 3.0
#: Seconds a create waits at most for the leaders of its new partitions to serve them (see ``_await_leaders``).
LEADERS_WITHIN_S = 10.0
#: ListOffsets errors of a new partition whose leader has not loaded it yet (or a client that has not learnt its leader).
_NOT_SERVED_YET = frozenset({KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                             KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.REPLICA_NOT_AVAILABLE, KafkaError.UNKNOWN_LEADER_EPOCH,
                             KafkaError._TIMED_OUT, KafkaError._TRANSPORT})
#: Seconds a refresh of a cached partition count waits for a broker before the cached count is used (and
#: how long it then stands before the next try).
STALE_REFRESH_S = 2.0
#: Seconds the first metadata request of a look-up may take before librdkafka's log is read for a refusal
#: (a wrong password, an untrusted CA...: librdkafka only retries those); each next try waits twice as long.
FIRST_ASK_S = 0.25


def _missing_topics(topics: builtins.list[str], principal: str | None = None) -> str:
    """What to say when ``topics`` are missing and the broker refused to create them (no CREATE grant)."""
    names, who = ", ".join(topics), principal or "this principal"
    return (f"missing topic(s) {names}: the broker does not list them (they do not exist, or {who} may not "
            f"DESCRIBE them) and refused to create them (TOPIC_AUTHORIZATION_FAILED: {who} lacks CREATE on "
            f"TOPIC {names}, or on the cluster). Create them first with a principal that may "
            f"(`rocketkafka admin provision`; `rocketkafka acls` prints each role's grants)")


class TopicAdmin:
    """Create topics and look up partition counts without auto-creating anything.

    A broker that refuses who the client is (credentials, TLS, ``security.protocol``) fails a look-up at
    once with an :class:`AuthenticationError` saying which (:mod:`rocketkafka.connection_check`), not
    after the timeout with a :class:`BrokerUnavailableError`; a topic the principal may not describe
    is an :class:`AuthorizationError`, not a :class:`TopicNotFoundError`.

    Parameters:
        settings: where the broker is.
        metadata_ttl: seconds a cached partition count stays fresh.
    """

    def __init__(self, settings: Settings, metadata_ttl: float = 30.0) -> None:
        self.settings = settings
        self._watch = LogWatch()  # its log lines tell what a broker refused (read when a look-up fails)
        self._admin: AdminClient | None = kafka_client(AdminClient, settings.kafka_config(logger=self._watch))
        self._ttl = metadata_ttl
        self._cache: dict[str, tuple[float, int]] = {}
        self._broker_default: tuple[int | None] | None = None  # asked once
        #: configs (the broker's, a topic's) Kafka refused to describe to this principal: what was not judged
        self.refused_configs: builtins.list[AuthorizationError] = []

    @property
    def _client(self) -> AdminClient:
        if self._admin is None:
            raise StateError("this TopicAdmin is closed")
        return self._admin

    @property
    def client(self) -> AdminClient:
        """The confluent-kafka AdminClient, for the requests this class does not wrap (access checks)."""
        return self._client

    def close(self) -> None:
        """Let the AdminClient go now (idempotent); later calls raise :class:`StateError`.

        confluent-kafka has no ``AdminClient.close()``: a client is destroyed with its last
        reference. Dropped here, it goes in the caller's thread. Left inside a reference cycle,
        it would go in a later garbage collection, in whatever thread that pass runs, and a
        librdkafka destroy can block that thread for a second (a lock keeper missing its renewal).
        """
        self._admin = None

    def __enter__(self) -> TopicAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create(self, topic: str, partitions: int = 8, replication: int | None = None,
               config: dict[str, str] | None = None, exist_ok: bool = True, timeout: float = 30.0) -> None:
        """Create ``topic``; with ``exist_ok`` an existing topic is fine (its partition count is kept).

        ``replication`` None: the broker's ``default.replication.factor``.
        """
        self.create_many({topic: partitions}, replication=replication, config=config, exist_ok=exist_ok, timeout=timeout)

    def create_internal(self, topics: dict[str, int], timeout: float = 30.0) -> builtins.list[str]:
        """Create rocketkafka's own topics (``{name: partitions}``) that do not exist yet, as the settings'
        ``internal_*`` say, then warn once about any of them -- new or found -- with fewer replicas than wanted
        or out-of-sync replicas. Returns the topics created now.

        Raises:
            ConfigError: the broker refuses the replication settings (more replicas than brokers, ...), or a
                topic is missing and this principal may not create it (the message names the grant).
            BrokerUnavailableError: no broker answered within ``timeout`` s.
        """
        s = self.settings
        created = self.create_many(topics, replication=s.internal_replication_factor,
                                   config=dict(internal_topic_config(s.internal_min_insync_replicas)), timeout=timeout)
        self.check_replication(list(topics))
        return created

    def check_replication(self, topics: builtins.list[str]) -> builtins.list[str]:
        """Warn (once per topic and process) about ``topics`` with fewer replicas than wanted or an ISR
        smaller than their replicas; returns the warnings given now. A broker that cannot be asked is
        no reason to fail a start: it is logged and nothing is judged."""
        try:
            placement = self.replication(topics)
            wanted, source = self.wanted_replication()
        except (BrokerUnavailableError, KafkaException) as exc:
            log.info("replication of internal topics not checked: %s", exc)
            return []
        return WARNINGS.check(self.settings.bootstrap_servers, placement.values(), wanted, source)

    def replication(self, topics: builtins.list[str] | None = None, timeout: float = 10.0) -> dict[str, TopicReplication]:
        """Replicas, ISR and leader of each partition of ``topics`` (default: every topic) that exists."""
        listed = self._list(timeout)
        names = listed if topics is None else [t for t in topics if t in listed]
        return {t: TopicReplication.from_metadata(t, listed[t]) for t in names}

    def wanted_replication(self) -> tuple[int | None, str]:
        """The replication factor internal topics should have, and where that number comes from
        (None: the settings leave it to the broker, which does not say)."""
        if self.settings.internal_replication_factor is not None:
            return self.settings.internal_replication_factor, "ROCKETKAFKA_INTERNAL_REPLICATION_FACTOR"
        return self.broker_default_replication(), "the broker's default.replication.factor"

    def broker_default_replication(self, timeout: float = 10.0) -> int | None:
        """The controller's ``default.replication.factor`` (asked once), None where the broker does not say (Tansu)."""
        if self._broker_default is None:
            self._broker_default = (self._describe_broker("default.replication.factor", timeout),)
        return self._broker_default[0]

    def _describe_broker(self, name: str, timeout: float) -> int | None:
        brokers = self._client.list_topics(timeout=timeout).brokers
        if not brokers:
            return None
        resource = ConfigResource(ResourceType.BROKER, str(min(brokers)))
        try:
            entries = self._client.describe_configs([resource], request_timeout=timeout)[resource].result(timeout)
        except (KafkaException, FutureTimeout) as exc:
            self._config_refused(exc, CLUSTER)
            log.debug("broker config %s not described: %s", name, exc)
            return None
        entry = entries.get(name)
        try:
            return int(entry.value) if entry is not None and entry.value is not None else None
        except ValueError:
            return None

    def write_blocker(self, topic: str, partition: int | None = None, timeout: float = 5.0) -> str | None:
        """Why the broker cannot acknowledge an ``acks=all`` write to ``topic`` now, or None when nothing says so.

        Asked after a send timed out: librdkafka retries NOT_ENOUGH_REPLICAS until the message
        times out and then reports only "Message timed out"; this names the cause (a partition
        without a leader, or an ISR smaller than ``min.insync.replicas``).
        """
        try:
            placement = self.replication([topic], timeout).get(topic)
            if placement is None:
                return None
            parts = [p for p in placement.partitions if partition is None or p.partition == partition]
            if leaderless := [p for p in parts if p.leader < 0]:
                return f"{leaderless[0].describe()}: no broker can take the write (LEADER_NOT_AVAILABLE)"
            min_isr = int(self.topic_config(topic, "min.insync.replicas", timeout) or 1)
        except (BrokerUnavailableError, KafkaException, ValueError) as exc:
            log.debug("no reason found for the unacknowledged write to %s: %s", topic, exc)
            return None
        short = [p for p in parts if len(set(p.isr)) < min_isr]
        if short:
            return (f"{short[0].describe()}, fewer than min.insync.replicas={min_isr} (NOT_ENOUGH_REPLICAS): "
                    f"the broker refuses acks=all writes until enough replicas are in sync")
        return None

    def topic_config(self, topic: str, name: str, timeout: float = 10.0) -> str | None:
        """One config value of ``topic`` (``min.insync.replicas``, ...), None where the broker does not say."""
        return self.topic_configs([topic], name, timeout)[topic]

    def topic_configs(self, topics: builtins.list[str], name: str, timeout: float = 10.0) -> dict[str, str | None]:
        """One config value of each of ``topics``, in one request (a broker down costs one timeout, not one each)."""
        if not topics:
            return {}
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
        futures = self._client.describe_configs(resources, request_timeout=timeout)
        deadline = time.monotonic() + timeout
        out: dict[str, str | None] = {}
        for resource in resources:
            try:
                entry = futures[resource].result(max(0.0, deadline - time.monotonic())).get(name)
            except (KafkaException, FutureTimeout) as exc:
                self._config_refused(exc, resource.name)
                log.debug("config %s of %s not described: %s", name, resource.name, exc)
                entry = None
            out[resource.name] = None if entry is None else entry.value
        return out

    def _config_refused(self, exc: BaseException, resource: str) -> None:
        """Keep the refusal a failed DescribeConfigs stands for (no DESCRIBE_CONFIGS grant) in :attr:`refused_configs`."""
        refusal = refusal_in(exc, resource, "DESCRIBE_CONFIGS", principal_of(self.settings.kafka)) \
            if isinstance(exc, KafkaException) else None
        if refusal is not None:
            self.refused_configs.append(refusal)

    def create_many(self, topics: dict[str, int], replication: int | None = None, config: dict[str, str] | None = None,
                    exist_ok: bool = True, timeout: float = 30.0) -> builtins.list[str]:
        """Create several topics in one request: ``{name: partitions}``; ``replication`` None: the broker's default.
        Returns the topics created now.

        With ``exist_ok`` only the topics the broker does not list are asked for: a principal without a CREATE
        grant runs wherever its topics exist (Kafka answers TOPIC_AUTHORIZATION_FAILED, not TOPIC_ALREADY_EXISTS,
        to a create without the grant, even of a topic that exists).

        Raises:
            InvalidTopicNameError: a name breaks a Kafka rule (the error names it); nothing is created.
            ConfigError: a partition count is below 1, the broker refuses the replication factor or config, or a
                topic is missing and this principal may not create it (the message names the grant).
            BrokerUnavailableError: no broker answered within ``timeout`` s.
        """
        for name, partitions in topics.items():
            check_topic_name(name)
            if partitions < 1:
                raise ConfigError(f"topic {name!r}: partitions must be >= 1, got {partitions}")
        factor = BROKER_DEFAULT if replication is None else replication
        if not topics:
            return []
        # librdkafka waits the whole timeout for a controller and then says only "Timed out": a metadata look-up
        # first answers an unreachable broker within seconds, naming the address (BrokerUnavailableError)
        listed = self._list(min(timeout, REACHABLE_WITHIN_S))
        new = [NewTopic(n, num_partitions=p, replication_factor=factor, config=config or {}) for n, p in topics.items()
               if not (exist_ok and n in listed)]
        created: builtins.list[str] = []
        refused: builtins.list[str] = []
        answers = self._client.create_topics(new, operation_timeout=timeout, request_timeout=timeout) if new else {}
        for name, future in answers.items():
            try:
                future.result()
                created.append(name)
                log.info("created topic %s", name)
            except KafkaException as exc:
                code = exc.args[0].code()
                if exist_ok and code == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                if code in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED):
                    refused.append(name)
                    continue
                if code in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
                    raise BrokerUnavailableError(self.settings.bootstrap_servers, timeout, exc) from exc
                if code in (KafkaError.INVALID_REPLICATION_FACTOR, KafkaError.INVALID_CONFIG, KafkaError.POLICY_VIOLATION):
                    wanted = "the broker's default" if replication is None else replication
                    raise ConfigError(f"topic {name!r} (replication factor {wanted}, config {config or {}}): "
                                      f"the broker refused it: {exc.args[0].str()}") from None
                raise
        if refused:
            principal = principal_of(self.settings.kafka)
            raise TopicsNotCreatedError(sorted(refused), _missing_topics(sorted(refused), principal), principal)
        self._await_metadata(list(topics), created, timeout)
        return created

    def exists(self, topic: str) -> bool:
        """True when the broker lists ``topic`` (never creates it)."""
        return topic in self._list(10.0)

    def list(self, timeout: float = 10.0) -> dict[str, int]:
        """Every topic the broker lists, with its partition count."""
        return {name: len(meta.partitions) for name, meta in self._list(timeout).items()}

    def _list(self, timeout: float) -> dict[str, Any]:
        """Every topic's metadata (see :meth:`_metadata`)."""
        return self._metadata(timeout).topics

    def _metadata(self, timeout: float, unreachable_ends: bool = False) -> Any:
        """``list_topics()`` without a topic argument (asking for one by name may auto-create it).

        Asked in tries of growing length within ``timeout``: between two, librdkafka's log is read for a
        refusal (:meth:`refusal`), which no wait mends. ``unreachable_ends``: a broker that cannot be reached
        (nothing listens, no such host) ends the look-up at once (a start that only checks the credentials).

        Raises:
            AuthenticationError: the broker refused who this client is.
            BrokerUnavailableError: no broker answered within ``timeout``.
        """
        deadline = time.monotonic() + timeout
        wait = FIRST_ASK_S
        while True:
            asked = time.monotonic()
            this_try = max(0.001, min(wait, deadline - asked))
            try:
                return self._client.list_topics(timeout=this_try)
            except KafkaException as exc:
                refused = self.refusal()
                if refused is not None:
                    raise refused from None
                now = time.monotonic()
                # librdkafka gave up before the try's time (its answer is final), the time is up, or nothing listens
                unreachable, self._watch.unreachable = self._watch.unreachable, False
                if (unreachable_ends and unreachable) or now - asked < this_try * 0.9 or deadline - now <= 0.001:
                    raise BrokerUnavailableError(self.settings.bootstrap_servers, timeout, exc) from exc
                wait *= 2

    def refusal(self) -> AuthenticationError | None:
        """What the broker refused of who this client is, as librdkafka logged it since the last look
        (its log is served here), else ``None``."""
        poll = getattr(self._client, "poll", None)  # every AdminClient has one; a stand-in in a test may not
        if poll is not None:
            poll(0)
        lines = list(self._watch.lines)
        self._watch.lines.clear()
        return authentication_error(lines, self.settings.kafka_config(), self.settings.bootstrap_servers)

    def check_access(self, timeout: float = 10.0) -> None:
        """Ask the broker for metadata once, to hear a refusal now: a client's start. A broker that does not
        answer is no error here (the client waits for it as before).

        Raises:
            AuthenticationError: the broker refused who this client is.
        """
        try:
            self._metadata(timeout, unreachable_ends=True)
        except BrokerUnavailableError as exc:
            log.debug("access not checked: %s", exc)

    def _not_listed(self, topic: str, timeout: float) -> Exception:
        """The error of a topic the broker does not list: :class:`TopicNotFoundError`, or the
        :class:`AuthorizationError` when the broker hides it from this principal (no DESCRIBE: Kafka lists
        only what a principal may describe, and says so only when asked by name)."""
        try:
            self._client.describe_topics(TopicCollection([topic]), request_timeout=timeout)[topic].result(timeout)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                return AuthorizationError("kafka", error.name(), "topic", topic, "DESCRIBE",
                                          principal_of(self.settings.kafka), hint=GRANT_HINT, error=error,
                                          detail="Kafka hides from this principal whether the topic exists")
        except Exception as exc:  # a broker without DescribeTopics: the listing's answer stands
            log.debug("topic %s not described: %s", topic, exc)
        return TopicNotFoundError(topic)

    def partitions(self, topic: str, timeout: float = 10.0) -> int:
        """Partition count of ``topic`` (cached); a look-up waits at most ``timeout`` s for the broker.

        A count learnt before stays the answer while no broker answers (a restart, an outage).

        Raises:
            InvalidTopicNameError: ``topic`` breaks a Kafka rule, so it can never exist (the error names the rule).
            TopicNotFoundError: the topic does not exist.
            AuthorizationError: the principal may not describe the topic (so the broker does not list it).
            AuthenticationError: the broker refused who this client is.
            BrokerUnavailableError: no broker answered within ``timeout`` s.
        """
        now = time.monotonic()
        cached = self._cache.get(topic)
        if cached and now - cached[0] < self._ttl:
            return cached[1]
        check_topic_name(topic)
        try:  # refreshing a known count waits little: the count is there if no broker answers
            meta = self._look_up(topic, min(timeout, STALE_REFRESH_S) if cached else timeout)
        except BrokerUnavailableError:
            if cached is None:
                raise
            # the last count beats no answer while the broker is away (partitions are only ever added), as
            # librdkafka keeps its metadata: a delayed send's route must not fail on a broker restart
            log.debug("no broker answered about %s: its last known partition count (%d) stands", topic, cached[1])
            self._cache[topic] = (time.monotonic() - self._ttl + STALE_REFRESH_S, cached[1])  # asked again soon
            return cached[1]
        if meta is None:
            raise self._not_listed(topic, timeout)
        count = len(meta.partitions)
        self._cache[topic] = (now, count)
        return count

    def _look_up(self, topic: str, timeout: float) -> Any:
        """The metadata of ``topic``, or None when it does not exist (after :data:`NEW_TOPIC_PROPAGATION_S`
        of asking again where several brokers may disagree)."""
        give_up = time.monotonic() + NEW_TOPIC_PROPAGATION_S
        while True:
            listing = self._metadata(timeout)
            meta = listing.topics.get(topic)
            if meta is not None and (meta.error is None or meta.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART):
                return meta
            if len(listing.brokers) < 2 or time.monotonic() >= give_up:
                return None
            time.sleep(0.1)

    def delete(self, topics: builtins.list[str], timeout: float = 30.0) -> None:
        """Delete topics (best effort; used by tests and the demo)."""
        for future in self._client.delete_topics(topics, operation_timeout=timeout).values():
            try:
                future.result()
            except KafkaException as exc:
                log.warning("delete failed: %s", exc)
        for t in topics:
            self._cache.pop(t, None)

    def _await_metadata(self, topics: builtins.list[str], created: builtins.list[str], timeout: float) -> None:
        """Wait until ``topics`` are listed, and the leader of every partition of those ``created`` now serves
        it (at most :data:`LEADERS_WITHIN_S` of ``timeout``: a topic that existed may lack a leader for long,
        a broker down, and that is no reason to hold a start).

        Raises:
            AuthorizationError: a secured cluster does not list one because this principal may not describe it.
        """
        deadline = time.monotonic() + timeout
        asked = not secured(self.settings.kafka)
        while time.monotonic() < deadline:
            listed = self._list(10.0)
            unlisted = [t for t in topics if not (t in listed and listed[t].partitions)]
            if not unlisted:
                break
            if not asked:  # existing, yet not listed: hidden from this principal (no DESCRIBE), not slow to appear
                asked = True
                hidden = self._not_listed(unlisted[0], min(10.0, timeout))
                if isinstance(hidden, AuthorizationError):
                    raise hidden
            time.sleep(0.05)
        else:
            return
        partitions = [TopicPartition(t, p) for t in created for p in listed[t].partitions]
        self._await_leaders(partitions, min(deadline, time.monotonic() + LEADERS_WITHIN_S))

    def _await_leaders(self, partitions: builtins.list[TopicPartition], deadline: float) -> None:
        """Wait until the leader of each new partition serves it: a ListOffsets of each answers.

        Why: a broker lists a new topic before its leaders have loaded the partitions, and a
        produce meanwhile fails NOT_LEADER_OR_FOLLOWER. librdkafka's idempotent producer then
        can lose a message: the broker takes a later batch as a new producer's first (any
        sequence is accepted), and librdkafka counts the failed earlier batch as "implicitly
        acked" (confluent-kafka-go#921). A new topic that is ready before its first write
        avoids that trigger; :data:`rocketkafka.config.SAFE_PRODUCER_CONFIG` closes it for the rest.
        """
        waiting = partitions
        while waiting and time.monotonic() < deadline:
            futures = self._client.list_offsets({tp: OffsetSpec.latest() for tp in waiting},
                                                request_timeout=max(1.0, deadline - time.monotonic()))
            waiting = []
            for tp, future in futures.items():
                try:
                    future.result()
                except KafkaException as exc:
                    if exc.args[0].code() not in _NOT_SERVED_YET:  # refused for good (an ACL...): do not wait
                        log.debug("new partition %s[%d] not checked: %s", tp.topic, tp.partition, exc)
                        continue
                    waiting.append(tp)
            if waiting:
                time.sleep(0.05)
        if waiting:
            log.info("%d new partitions not served by a leader yet (%s ...): producing may be retried",
                     len(waiting), waiting[0].topic)
