"""Least privilege, printed: what each role of a deployment needs on a secured Kafka and Redis.

A deployment (:class:`Deployment`: topic and key prefixes, user topics, consumer and producer
groups, exactly-once on or off, the features in use) and a role (:class:`Role`) give a
:class:`Permissions`: the Kafka ACLs (:class:`KafkaAcl`, each with why and the code path that
needs it) and the Redis ACL rule (:class:`RedisRule`: key and channel patterns and the exact
commands, those the Lua scripts call included; ``None`` for a role that touches no Redis).
The set is enough and nothing in it is implied by another grant of the set (Kafka's READ and
WRITE imply DESCRIBE): ``rocketkafka acls`` prints it (:mod:`rocketkafka.operations.acl_output`),
and the secured integration tests apply exactly it.

Internal topics are granted by name where the deployment names them (a group's retry and
dead-letter topics, the half, op, max-check, trace and probe topics) and by prefix where the
code derives them (the delay topics ``<prefix>.delay.``, a group's transactional ids, the
offsets groups of broadcasting consumers, Spark's group ids). Only the ``admin`` role may create
topics: ``rocketkafka admin provision`` creates a deployment's internal topics, and every other
role then runs without CREATE (it creates only what it cannot find, and names the grant when
refused).

>>> d = Deployment(topics=("orders",), consumer_groups=("billing",))
>>> [f"{a.operation} {a.resource} {a.name}" for a in permissions(Role.DROP_IN_CONSUMER, d).kafka]
['READ GROUP billing', 'READ TOPIC orders']

The audit: one function per role collects its grants on a :class:`Grants`: Kafka ACLs, each with the reason
and the code path (``file:function``) that needs it, and the Redis keys, channels and commands of
the code it runs. Redis commands come in the sets below, one per piece of code, each naming the
Lua script or the calls it stands for (``tests/unit/test_permissions.py`` reads the scripts'
``redis.call`` commands and checks them against these sets).

Every Redis connection is redis-py's: AUTH or HELLO (allowed to every user) and ``CLIENT SETINFO``
(:data:`CONNECT`) on connect, ``SELECT`` when the URL names a database; a script runs by
``EVALSHA``, and one the server lost is loaded again with ``SCRIPT LOAD`` (redis-py's ``Script`` and
``ordering/locks/nodes.py:LockNode._call``). No pipeline here carries a script, so ``SCRIPT EXISTS``
is never sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rocketkafka.operations.acl_model import (
    CLUSTER_NAME,
    PASSWORD_PLACEHOLDER,
    Deployment,
    KafkaAcl,
    Operation,
    PatternType,
    Permissions,
    RedisRule,
    VARIABLE,
    ResourceType,
    Role,
    forwarder_membership,
    forwarder_presence_key,
    forwarder_txn_prefix,
    glob_escape,
    key_glob,
    minimal,
)
from rocketkafka.ordering.consumers.transactions import transactional_id_prefix

__all__ = ["CLUSTER_NAME", "PASSWORD_PLACEHOLDER", "Deployment", "Grants", "KafkaAcl", "Operation", "PatternType",
           "Permissions", "RedisRule", "ResourceType", "Role", "all_permissions", "minimal", "permissions"]

READ, WRITE, CREATE, DESCRIBE, DESCRIBE_CONFIGS = (Operation.READ, Operation.WRITE, Operation.CREATE,
                                                   Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS)
_S = VARIABLE  # the variable part of a key name: ``*`` in its glob

#: redis-py on connect (``redis/connection.py:on_connect``); a refusal is ignored, but logged by the server.
CONNECT = ("client|setinfo",)
#: Running a script: EVALSHA, and SCRIPT LOAD when the server answers NOSCRIPT.
SCRIPT = ("evalsha", "script|load")
#: ordering/group/membership.py: the heartbeat script (_HEARTBEAT), leave (ZREM, HDEL), join/leave announcements.
MEMBERSHIP = (*SCRIPT, "time", "zadd", "hset", "zrangebyscore", "hdel", "zremrangebyscore", "zrange", "hget",
              "zrem", "publish", "subscribe")
#: ordering/locks/scripts.py CLAIM, RENEW, FENCE and RELEASE (lock, renew, unlock).
LOCKS = (*SCRIPT, "hmget", "hset", "pexpire", "get", "hget", "set", "del", "hdel", "pttl")
#: ordering/locks/scripts.py DESCRIBE (the admin's lock views; an engine's secured start, ordering/engine/access.py).
LOCK_VIEW = (*SCRIPT, "hmget", "pttl", "get", "hget")
#: ordering/engine/resets.py: OffsetResets.pending (HGETALL), done (EVAL of _DONE_IF_UNCHANGED: HGET, HDEL; HDEL).
RESETS = ("hgetall", "eval", "hget", "hdel")
#: ordering/engine/resets.py: OffsetResets.request and announce (the operator's side).
RESET_REQUEST = ("hset", "publish")
#: ordering/group/membership.py:read_members.
MEMBERS_VIEW = ("time", "zrange", "hgetall")
#: ordering/group/presence.py: Presence.announce (a pipeline), withdraw.
ANNOUNCE = ("zadd", "zremrangebyscore", "pexpire", "zrem")
#: ordering/group/presence.py: Presence.alive.
ALIVE = ("zrangebyscore",)
#: ordering/consumers/idempotent.py: _BEGIN (GET, PTTL, SET), _ABORT (GET, DEL), IdempotentConsumer's GET and SET.
IDEMPOTENT = (*SCRIPT, "get", "pttl", "set", "del")
#: txn/markers.py: EndMarkers.lookup (MGET) and mark (SET ... PX [NX], in a pipeline).
MARKERS = ("mget", "set")
#: facade/message_index.py: MessageIndex._write (a pipeline).
INDEX_WRITE = ("set", "zadd", "zremrangebyscore", "pexpire")
#: facade/message_index.py: MessageIndex.location, by_key.
INDEX_READ = ("get", "zrange")


class Grants:
    """A role's grants as the audit finds them (duplicates and implied grants go in ``permissions.minimal``)."""

    def __init__(self, deployment: Deployment) -> None:
        self.d = deployment
        self.acls: list[KafkaAcl] = []
        self.keys: list[str] = []
        self.channels: list[str] = []
        self.commands: list[str] = []

    # -- Kafka ---------------------------------------------------------------------------------------------
    def acl(self, resource: ResourceType, name: str, ops: Iterable[Operation], why: str, where: str,
            prefixed: bool = False) -> None:
        pattern = PatternType.PREFIXED if prefixed else PatternType.LITERAL
        self.acls.extend(KafkaAcl(resource, name, pattern, op, why, where) for op in ops)

    def topic(self, name: str, *ops: Operation, why: str, where: str, prefixed: bool = False) -> None:
        self.acl(ResourceType.TOPIC, name, ops, why, where, prefixed)

    def group(self, name: str, *ops: Operation, why: str, where: str, prefixed: bool = False) -> None:
        self.acl(ResourceType.GROUP, name, ops, why, where, prefixed)

    def transactional_ids(self, prefix: str, why: str, where: str) -> None:
        """WRITE on the transactional ids starting with ``prefix`` (WRITE implies the DESCRIBE that
        FindCoordinator needs)."""
        self.acl(ResourceType.TRANSACTIONAL_ID, prefix, [WRITE], why, where, prefixed=True)

    def user_topics(self, *ops: Operation, why: str, where: str) -> None:
        """The deployment's topics, by name and by prefix."""
        for name in self.d.topics:
            self.topic(name, *ops, why=why, where=where)
        for prefix in self.d.topic_prefixes:
            self.topic(prefix, *ops, why=why, where=where, prefixed=True)

    def delay_topics(self, *ops: Operation, why: str, where: str) -> None:
        self.topic(f"{self.d.topic_prefix}.delay.", *ops, why=why, where=where, prefixed=True)

    def probe(self, group_why: str) -> None:
        """The exactly-once probe (facade/exactly_once.py): one aborted and one committed record on the probe
        topic, read back read_committed as a consumer of the role's own group (``group_why``)."""
        self.topic(self.d.names.probe(), WRITE, READ, where="facade/exactly_once.py:aborted_records_hidden",
                   why=f"exactly-once probe at start: writes two records in transactions, reads them back ({group_why})")

    # -- Redis ---------------------------------------------------------------------------------------------
    def redis(self, keys: Iterable[str] = (), channels: Iterable[str] = (), commands: Iterable[str] = ()) -> None:
        self.keys.extend(keys)
        self.channels.extend(channels)
        self.commands.extend(commands)

    def engine(self, group: str, membership: str | None = None, *, resets: bool = True) -> None:
        """The ownership engine of ``group`` (ordering/engine/engine.py:OwnershipEngine.open): membership under
        ``membership`` (default ``group``), the lock table (and, at a secured start, one lock entry read:
        ordering/engine/access.py:check_start_access), operators' offset resets."""
        k, m = self.d.keys, membership or group
        self.redis([key_glob(k.members(m)), key_glob(k.member_info(m)), key_glob(k.lock(group, _S, 0)),
                    key_glob(k.fence(group, _S, 0)), key_glob(k.session(group, _S))],
                   [glob_escape(k.membership_channel(m))],
                   (*MEMBERSHIP, *LOCKS, *LOCK_VIEW))
        if resets:
            self.redis([key_glob(k.offset_reset(group))], (), RESETS)

    def rule(self, deployment: Deployment) -> RedisRule | None:
        """The Redis rule of what was collected, with the connection's commands; ``None`` when nothing was."""
        if not self.keys and not self.commands:
            return None
        commands = [*self.commands, *(CONNECT if deployment.redis_setinfo else ()),
                    *(("select",) if deployment.redis_db else ())]
        return RedisRule(tuple(dict.fromkeys(self.keys)), tuple(dict.fromkeys(self.channels)),
                         tuple(sorted(set(commands))))


# -- the roles ------------------------------------------------------------------------------------------------
def producer(d: Deployment) -> Grants:
    g = Grants(d)
    g.user_topics(WRITE, where="facade/sender.py:Sender.produce, Sender.partitions",
                  why="sends; its partition count is listed (a topic it may not DESCRIBE looks missing)")
    if d.delay:
        g.delay_topics(WRITE, where="facade/schedule/routing.py:DelayRouter.delayed, provision",
                       why="delayed sends go to the level and step topics (listed at the first one; created only "
                           "if missing)")
    _trace(g, "facade/observed_sender.py:ObservedSender._observe")
    if d.message_index:
        k = d.keys
        g.redis([key_glob(k.msg_index(_S)), key_glob(k.key_index(_S, "k"))], (), INDEX_WRITE)
    return g


def transactional_producer(d: Deployment) -> Grants:
    g = Grants(d)
    names = d.names
    g.user_topics(WRITE, where="txn/end.py:TransactionEnder._end; txn/producer.py:send_message_in_transaction",
                  why="the real message of a committed transaction; the real topic's partition count")
    g.topic(names.half(), WRITE, where="txn/producer.py:send_message_in_transaction; txn/records.py:provision",
            why="half messages (listed at start, created only if missing)")
    g.topic(names.op(), WRITE, where="txn/end.py:TransactionEnder._end; txn/records.py:provision",
            why="op records closing halves (listed at start, created only if missing)")
    for pg in d.producer_groups:
        check = names.check_request(pg)
        g.topic(check, READ, where="txn/producer.py:TransactionMQProducer.start (PushConsumer on it)",
                why=f"check-back requests of producer group {pg}")
        g.group(check, READ, where="ordering/engine/commits.py:commit_offsets, ordering/engine/holdings.py:take",
                why=f"the check-request consumer's group commits and reads its offsets (producer group {pg})")
        # READ only: an answer never fails (txn/producer.py:_answer_check), so no retry copy is ever written
        g.topic(names.retry(check), READ, where="ordering/consumers/push_consumer.py:PushConsumer._step",
                why="the check-request consumer's retry topic (subscribed; created only if missing)")
        g.topic(names.dead_letter(check), WRITE, where="ordering/work/failures.py:SendBack.dead_letter_raw",
                why="malformed check requests are dead-lettered")
        g.redis([key_glob(d.keys.transaction_end(pg, _S))], (), MARKERS)  # txn/end.py, txn/markers.py
        g.engine(check)
        if d.exactly_once:
            g.transactional_ids(f"{pg}.", where="txn/end.py:TransactionEnder.__init__, _end_atomically",
                                why="kafka_transactions: real message and op record in one transaction, "
                                    "transactional.id <group>.<check.instance_name>")
    if d.exactly_once and d.producer_groups:
        g.probe("its check-request group")
    return g


def push_consumer(d: Deployment) -> Grants:
    g = Grants(d)
    names = d.names
    g.user_topics(READ, where="ordering/engine/engine.py:OwnershipEngine.open, fetch; ordering/consumers/batch_step.py:initial_offset",
                  why="subscribed: fetch, partition counts, ListOffsets for where a new group starts")
    for group in d.consumer_groups:
        if d.broadcasting:
            g.group(f"{group}.bcast.", READ, prefixed=True, where="ordering/consumers/push_consumer.py:PushConsumer.start",
                    why="broadcasting: each member commits to its own offsets group <group>.bcast.<instance>")
            continue
        g.group(group, READ, where="ordering/engine/commits.py:commit_offsets, ordering/engine/holdings.py:take",
                why="commits offsets (assign(): no group join) and reads them when a partition is taken")
        g.topic(names.dead_letter(group), WRITE, where="ordering/work/failures.py:SendBack.dead_letter; "
                "ordering/consumers/batch_step.py:BatchStep.provision",
                why="dead letters (listed at start, created only if missing)")
        if d.consumer_retries:
            g.topic(names.retry(group), READ, where="ordering/consumers/batch_step.py:BatchStep.provision; "
                    "ordering/consumers/listening.py:ListenerHandler._retry_copies",
                    why="retry copies are read back (subscribed; created only if missing)")
            if not d.retry_backoff:  # with the back-off a copy waits in the delay levels; the forwarder writes it here
                g.topic(names.retry(group), WRITE, where="facade/retry.py:Reconsumer.send_back",
                        why="retry copies are written at once (retry_backoff off)")
        g.engine(group)
        if d.idempotent_consume:
            g.redis([key_glob(d.keys.consumed(group, _S))], (), IDEMPOTENT)
        if d.exactly_once:
            g.transactional_ids(transactional_id_prefix(group), where="ordering/consumers/transactions.py:PartitionTransactions",
                                why="exactly_once: one transactional id per partition, rk-eos.<group>.<topic>.<p>")
    if d.consumer_retries and d.retry_backoff and d.consumer_groups:
        g.delay_topics(WRITE, where="facade/schedule/routing.py:retry_backoff",
                       why="retries wait in the delay levels (RocketMQ's back-off)")
        g.redis([forwarder_presence_key(d)], (), ALIVE)  # ordering/consumers/push_consumer.py:forwarders_alive
    if d.exactly_once and not d.broadcasting and d.consumer_groups:
        g.user_topics(WRITE, where="ordering/consumers/exactly_once_consumer.py:TransactionalSender.send",
                      why="exactly_once: what the listener sends through consumer.producer")
        g.probe("its consumer group, committing nothing")
    _trace(g, "ordering/consumers/tracing.py:ListenerTrace; facade/retry.py:Reconsumer")
    return g


def drop_in_consumer(d: Deployment) -> Grants:
    g = Grants(d)
    g.user_topics(READ, where="ordering/consumers/drop_in_step.py:DropInStep.topics; ordering/engine/engine.py:OwnershipEngine.open",
                  why="subscribed (^regex ones matched against the listed topics): fetch, partition counts")
    for group in d.consumer_groups:
        g.group(group, READ, where="ordering/consumers/drop_in_consumer.py:Consumer.commit; ordering/engine/holdings.py:take",
                why="commits offsets (assign(): no group join) and reads them when a partition is taken")
        g.engine(group)
    return g


def delay_forwarder(d: Deployment) -> Grants:
    g = Grants(d)
    names, fg = d.names, d.forwarder_group
    g.delay_topics(READ, WRITE, where="delay/forwarder.py:DelayForwarder.start; delay/forward_handler.py",
                   why="reads the level and step topics, re-routes a record to the next hop (listed at start, "
                       "created only if missing)")
    g.group(fg, READ, where="ordering/engine/commits.py:commit_offsets; ordering/consumers/transactions.py:PartitionTransactions",
            why="commits the delay topics' offsets (in transactions with exactly_once)")
    if d.delay:
        g.user_topics(WRITE, where="delay/forward_handler.py:ForwardHandler.forward",
                      why="delivers due messages to their real topic (its partition count is listed)")
    if d.consumer_retries and d.retry_backoff:
        for group in d.consumer_groups:
            g.topic(names.retry(group), WRITE, where="delay/forward_handler.py:ForwardHandler.forward",
                    why=f"delivers group {group}'s retries when due")
    g.topic(names.dead_letter(fg), WRITE, where="delay/forwarder.py:DelayForwarder._dead_letter",
            why="records that cannot be forwarded (listed at start, created only if missing)")
    g.engine(fg, forwarder_membership(d))
    g.redis([forwarder_presence_key(d)], (), ANNOUNCE)  # ordering/group/presence.py:Announcer
    if d.exactly_once:
        g.transactional_ids(forwarder_txn_prefix(d), where="ordering/consumers/transactions.py:PartitionTransactions; "
                            "delay/forwarder.py:DelayForwarder.transactional_id_prefix",
                            why="exactly_once: one transactional id per delay partition")
        g.probe("the forwarders' group, committing nothing")
    _trace(g, "delay/tracing.py:TracedProducer")
    return g


def transaction_checker(d: Deployment) -> Grants:
    g = Grants(d)
    names = d.names
    group = names.txn_checker_group()
    for topic, what in ((names.half(), "half messages; re-written when checked back"),
                        (names.op(), "op records; a probe before each scan")):
        g.topic(topic, READ, WRITE, where="txn/checker.py:_CheckerStep; txn/scanning.py:Scanner",
                why=f"{what} (listed at start, created only if missing)")
    g.topic(names.max_check(), WRITE, where="txn/scanning.py:Scanner._act; txn/records.py:provision",
            why="halves checked too often, or malformed (listed at start, created only if missing)")
    g.group(group, READ, where="ordering/engine/commits.py:commit_offsets; ordering/engine/holdings.py:take",
            why="commits half and op progress (assign(): no group join)")
    for pg in d.producer_groups:
        g.topic(names.check_request(pg), WRITE, where="txn/scanning.py:Scanner._act; txn/checker.py:"
                "TransactionChecker._ensure_check_topics",
                why=f"check-back requests to producer group {pg} (listed, created only if missing)")
        g.redis([key_glob(d.keys.transaction_end(pg, _S))], (), ("mget",))  # txn/markers.py:EndMarkers.lookup
    g.engine(group)
    return g


def admin(d: Deployment) -> Grants:
    g = Grants(d)
    names, prefix = d.names, f"{d.topic_prefix}."
    g.topic(prefix, CREATE, READ, DESCRIBE_CONFIGS, prefixed=True,
            where="facade/operations/provisioning.py:provision_topics; facade/operations/*.py (LogReader); "
                  "facade/operations/topics.py:internal_topics",
            why="provisions the internal topics; reads them (progress, DLQ, delay backlog, pending transactions, "
                "traces); their min.insync.replicas")
    g.user_topics(READ, WRITE, where="facade/operations/query.py; facade/operations/reset.py:_commit; "
                  "facade/operations/dead_letters.py:resend_dead_letters",
                  why="query-msg and progress read them, reset-offset commits them, dlq resend writes them")
    for group in d.consumer_groups:
        g.group(group, READ, where="facade/operations/reading.py:LogReader.committed; facade/operations/reset.py",
                why="consumer-progress reads the committed offsets, reset-offset commits them")
        k = d.keys
        g.redis([key_glob(k.members(group)), key_glob(k.member_info(group)), key_glob(k.lock(group, _S, 0)),
                 key_glob(k.fence(group, _S, 0)), key_glob(k.session(group, _S)), key_glob(k.offset_reset(group))],
                [glob_escape(k.membership_channel(group))],
                (*MEMBERS_VIEW, *LOCK_VIEW, *LOCKS, *RESETS, *RESET_REQUEST))  # operations/groups.py, reset.py
    g.group(d.forwarder_group, DESCRIBE, where="facade/operations/delays.py:delay_backlog",
            why="delay-backlog reads the forwarders' committed offsets")
    g.redis([key_glob(d.keys.lock(d.forwarder_group, _S, 0)), key_glob(d.keys.fence(d.forwarder_group, _S, 0)),
             key_glob(d.keys.session(d.forwarder_group, _S))], (), LOCK_VIEW)  # delay-backlog's owners (operations/groups.py:lock_views)
    g.group(names.txn_checker_group(), DESCRIBE, where="facade/operations/transactions.py:pending_transactions",
            why="txn-pending reads the checker's committed offsets")
    g.acl(ResourceType.CLUSTER, CLUSTER_NAME, [DESCRIBE_CONFIGS],
          where="facade/admin.py:TopicAdmin.broker_default_replication",
          why="the broker's default.replication.factor, which `admin topics` and provisioning judge replicas by "
              "(without it: not judged, no failure)")
    if d.message_index:
        g.redis([key_glob(d.keys.msg_index(_S)), key_glob(d.keys.key_index(_S, "k"))], (), INDEX_READ)
    return g


def spark_reader(d: Deployment) -> Grants:
    g = Grants(d)
    g.user_topics(READ, where="spark/kafka_io.py:discover, watermarks, read_range; Spark's KafkaSource",
                  why="lists, reads watermarks and offsets for times, fetches")
    g.group(d.spark_group_prefix, DESCRIBE, prefixed=True, where="spark/kafka_io.py:open_consumer",
            why="groupIdPrefix-<purpose>-<id> of each assign-only reader: librdkafka looks their coordinator up "
                "(the JVM source neither joins nor commits)")
    if d.spark_audits:
        g.topic(f"{d.topic_prefix}.", READ, prefixed=True, where="spark/audit/*.py",
                why="the audits read the delay, half, op, max-check, retry and trace topics")
    return g


def _trace(g: Grants, where: str) -> None:
    if g.d.trace:
        g.topic(g.d.names.trace(), WRITE, where=f"facade/trace.py:Tracer; {where}",
                why="trace events (listed at start, created only if missing)")


#: Each role's audit.
GRANTS: dict[Role, Callable[[Deployment], Grants]] = {
    Role.PRODUCER: producer, Role.TRANSACTIONAL_PRODUCER: transactional_producer, Role.PUSH_CONSUMER: push_consumer,
    Role.DROP_IN_CONSUMER: drop_in_consumer, Role.DELAY_FORWARDER: delay_forwarder,
    Role.TRANSACTION_CHECKER: transaction_checker, Role.ADMIN: admin, Role.SPARK_READER: spark_reader,
}


def permissions(role: Role | str, deployment: Deployment) -> Permissions:
    """The Kafka ACLs and the Redis rule ``role`` needs in ``deployment`` (see the module docstring).

    Raises:
        ValueError: ``role`` names no role.
    """
    role = Role(role)
    grants = GRANTS[role](deployment)
    return Permissions(role, minimal(grants.acls), grants.rule(deployment))


def all_permissions(deployment: Deployment, roles: Iterable[Role | str] | None = None) -> list[Permissions]:
    """:func:`permissions` of ``roles`` (default: every role), in :class:`Role` order."""
    wanted = list(Role) if roles is None else [Role(r) for r in roles]
    return [permissions(r, deployment) for r in Role if r in wanted]
