"""Nothing ``rocketkafka acls`` prints is unneeded: each role, given its set less one ACL, runs what it does and is
refused with an error naming what is missing -- and loses nothing.

For every role and every Kafka ACL of its printed set (one test each) the role runs its part of a deployment as a
user holding the rest. Each part exercises every grant of its role's set (``permissions.py`` says where each is
needed: at start, or on a path the part provokes -- a retry copy, a hop through a step topic, a check-back). The
refusal must name the resource of the removed ACL (a prefixed one: a resource under the prefix), at start, at the
call, in the component's health or in its log (a line naming this test's user: nothing another test left behind
counts). Then the ACL is given back: what a refused send did not write is nowhere (nothing half-written), and what
a refused consumer, forwarder or checker held back arrives once (the history checker over what handlers saw).

Every component a part starts is closed at the test's teardown whatever happened (the ``closing`` fixture), before
its user's ACLs and topics go. Delay levels are short here (:data:`DELAY`) so a retry's back-off and a hop take a
second, not ten.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from rocketkafka import (ConsumeStatus, Message, Producer, PushConsumer, TransactionMQProducer, TransactionStatus)
from rocketkafka.config import Settings
from rocketkafka.delay import DelayForwarder
from rocketkafka.kafka import Consumer
from rocketkafka.names import Header
from rocketkafka.operations import (Deployment, KafkaAcl, Role, apply_kafka_acls, consumer_progress, delay_backlog,
                                    internal_topics, pending_transactions, permissions, provision_topics,
                                    resend_dead_letters, reset_offset)
from rocketkafka.ordering import ConsumerOptions
from rocketkafka.refusals import REFUSALS
from rocketkafka.schedule import Tiers
from rocketkafka.schedule.levels import DelayConfig
from rocketkafka.testing.history import History, check
from rocketkafka.testing.waiting import wait_for
from rocketkafka.txn import CheckerOptions, TransactionChecker, TransactionOptions
from tests.security.conftest import deployment_of
from tests.security.helpers import read_topics

pytestmark = [pytest.mark.integration, pytest.mark.rk_needs("secure")]

log = logging.getLogger(__name__)

FAST = dict(heartbeat_interval_ms=200, member_timeout_ms=2000, lock_lease_ms=3000, lock_renew_interval_ms=1000,
            lock_client_expiry_ms=2000, rebalance_interval_ms=2000, commit_interval_ms=200)
CHECKER = dict(transaction_timeout_ms=1000, check_interval_ms=500, max_check_times=30, **FAST)
#: Three 1 s levels (a retry waits level 3: one second) and one 500 ms step (a 1.5 s delay hops: level, then step),
#: one partition each: four delay topics, four partitions for a forwarder to own.
DELAY = DelayConfig(levels="1s 1s 1s", steps="500ms", partitions=1)
#: How long a refusal may take to be seen: a start that checks its grants answers within a second; a refusal met
#: at run time waits for the work that meets it (a retry copy, a forwarded record, a check-back), on a loaded machine.
NAMED_WITHIN_S = 60.0
#: How long what was held back may take to arrive once the ACL is back (a service retries a refused write at
#: least every 5 s; a consumer refused at start is started again).
RECOVERS_WITHIN_S = 120.0


def shape(role: Role, topic: str = "orders", group: str = "billing", payments: str = "pay") -> dict[str, object]:
    """The deployment each role is tested in (its names filled in per test)."""
    return {
        Role.PRODUCER: dict(topics=(topic,)),
        Role.TRANSACTIONAL_PRODUCER: dict(topics=(topic,), producer_groups=(payments,)),
        Role.PUSH_CONSUMER: dict(topics=(topic,), consumer_groups=(group,)),
        Role.DROP_IN_CONSUMER: dict(topics=(topic,), consumer_groups=(group,)),
        Role.DELAY_FORWARDER: dict(topics=(topic,), consumer_groups=(group,)),
        Role.TRANSACTION_CHECKER: dict(producer_groups=(payments,)),
        Role.ADMIN: dict(topics=(topic,), consumer_groups=(group,), producer_groups=(payments,)),
    }[role]


#: Names of the template deployment the cases are listed from: they sort as a test's own names do (topic
#: ``t-...``, group ``g-...``, producer group ``<group>-pay``, prefix ``rk<8 hex>``), so the i-th ACL of a role is
#: the same grant in both.
TEMPLATE = dict(topic="t-x", group="g-x", payments="g-x-pay", prefix="rk00000000")


def _template(role: Role) -> list[KafkaAcl]:
    deployment = Deployment(topic_prefix=TEMPLATE["prefix"], redis_prefix=TEMPLATE["prefix"], redis_setinfo=False,
                            **shape(role, TEMPLATE["topic"], TEMPLATE["group"], TEMPLATE["payments"]))
    return list(permissions(role, deployment).kafka)


def _shown(name: str) -> str:
    for key in ("payments", "topic", "group", "prefix"):
        name = name.replace(TEMPLATE[key], "{%s}" % key)
    return name


def _cases() -> Iterator[object]:
    for role in (Role.PRODUCER, Role.TRANSACTIONAL_PRODUCER, Role.PUSH_CONSUMER, Role.DROP_IN_CONSUMER,
                 Role.DELAY_FORWARDER, Role.TRANSACTION_CHECKER, Role.ADMIN):
        for index, acl in enumerate(_template(role)):
            yield pytest.param(role, index, id=f"{role.value}-{acl.operation.value}-{acl.resource.value}-{_shown(acl.name)}")


@dataclass
class Seen:
    """Every refusal a run met: errors raised, health's ``refused`` and log lines of rocketkafka's loggers.

    Health and the log are the process's: of them only what names this test's user counts (a refusal names its
    principal), never what a component of an earlier test left behind.
    """

    caplog: pytest.LogCaptureFixture
    user: str
    texts: list[str] = field(default_factory=list)
    sources: list[Callable[[], Any]] = field(default_factory=list)

    def raised(self, exc: BaseException) -> None:
        self.texts.append(f"{type(exc).__name__}: {exc}")

    def all(self) -> list[str]:
        told = []
        for source in self.sources:
            with contextlib.suppress(Exception):
                told += list(source().refused)
        told += [r.getMessage() for r in self.caplog.records
                 if r.name.startswith("rocketkafka") and r.levelno >= logging.WARNING]
        return self.texts + [text for text in told if re.search(rf"(?<![\w-]){re.escape(self.user)}(?![\w-])", text)]


def names(text: str, acl: KafkaAcl) -> bool:
    """Whether ``text`` is a refusal naming ``acl``'s resource (a name under it when it is a prefix)."""
    if not re.search(r"refused|AUTHORIZATION_FAILED|may not", text):
        return False
    end = "" if acl.pattern.value == "PREFIXED" else r"(?![\w-])"
    return re.search(r"(?<![\w.-])" + re.escape(acl.name) + end, text) is not None


@dataclass
class Part:
    """What a role's part runs with: its user's settings and the super user's, the deployment, what it saw, and
    the stack every component it starts is closed by."""

    mine: Settings
    admin: Settings
    deployment: Deployment
    topic: str
    group: str
    seen: Seen
    closing: contextlib.ExitStack

    def keep(self, component: Any, close: Callable[[Any], Any]) -> Any:
        """``component``, closed (``close(component)``) at the test's teardown whatever happens."""
        self.closing.callback(_quietly, close, component)
        return component

    def started(self, start: Callable[[], Any], close: Callable[[Any], Any]) -> Any:
        """What ``start()`` made, kept until teardown; ``None`` (the refusal seen) when it was refused."""
        try:
            return self.keep(start(), close)
        except Exception as exc:  # noqa: BLE001 - refused at start: the refusal is what is looked for
            self.seen.raised(exc)
            return None


@pytest.fixture
def closing() -> Iterator[contextlib.ExitStack]:
    """Closes what a test's part started, last first, at teardown (before its user's ACLs and topics go)."""
    with contextlib.ExitStack() as stack:
        yield stack


@pytest.fixture(autouse=True)
def _fresh_refusals() -> Iterator[None]:
    REFUSALS.clear()  # a refusal of an earlier test stands 30 s in every health
    yield
    REFUSALS.clear()


@pytest.mark.parametrize(("role", "index"), list(_cases()))
def test_one_acl_less_is_refused_by_name_and_loses_nothing(role, index, rk_role, rk_settings, rk_admin, rk_topic,
                                                           rk_group, caplog, closing):
    admin = rk_settings.model_copy(update={"delay": DELAY})
    topic = rk_topic(partitions=2)
    deployment = deployment_of(admin, **shape(role, topic, rk_group, f"{rk_group}-pay"))
    removed = permissions(role, deployment).kafka[index]
    like = _template(role)[index]
    assert (removed.resource, removed.pattern, removed.operation, _shown(like.name)) == \
        (like.resource, like.pattern, like.operation, _runtime_shown(removed.name, topic, rk_group, admin)), \
        "the template's ACLs sort otherwise than the test's"
    if role is not Role.ADMIN:  # the admin's work, whose own removals are tested on its own role
        provision_topics(admin, deployment)
    user = rk_role(role, deployment, without=removed)
    seen = Seen(caplog, user.name)
    run = RUNS[role](Part(user.settings.model_copy(update={"delay": DELAY}), admin, deployment, topic, rk_group, seen,
                          closing))
    try:
        next(run)  # started; the work that meets the refusal is under way
        assert wait_for(lambda: any(names(t, removed) for t in seen.all()), NAMED_WITHIN_S, 0.1), \
            f"nothing named {removed.operation.value} on {removed.resource.value} {removed.name!r}: {seen.all()[-8:]}"
        apply_kafka_acls(rk_admin, user.principal, [removed])
        next(run, None)  # given back: what was held back arrives, nothing refused was half-written
    finally:
        run.close()


# -- each role's part ---------------------------------------------------------------------------------------
def _producer(p: Part):
    """Sends a plain and a delayed message (the topic, a delay level); a refused send raises and leaves no trace
    of itself anywhere, and what was acknowledged is there."""
    acknowledged: dict[bytes, str] = {}
    refused: set[bytes] = set()
    producer = p.started(lambda: _start(Producer("app", settings=p.mine)), Producer.shutdown)
    for message in (Message(p.topic, body=b"plain"), Message(p.topic, body=b"later", delay_time_level=1)):
        try:
            if producer is None:
                raise AssertionError("refused at start")
            acknowledged[message.body] = producer.send_sync(message).msg_id
        except Exception as exc:  # noqa: BLE001 - the refusal is what is looked for
            p.seen.raised(exc)
            refused.add(message.body)
    yield
    written = {r.value() for r in read_topics(p.admin, [p.topic, *Tiers(p.admin.topics, DELAY).topics()])}
    assert not refused & written, f"a refused send was written anyway: {refused & written}"
    assert set(acknowledged) <= written, f"an acknowledged send is missing: {set(acknowledged) - written}"


def _transactional_producer(p: Part):
    """Starts (its check consumer with it) and sends a committed transaction; refused, no half and no real message
    of it is anywhere; sent, its real message is there once."""
    payments = p.deployment.producer_groups[0]
    producer = TransactionMQProducer(payments, lambda msg: TransactionStatus.COMMIT, settings=p.mine,
                                     options=TransactionOptions(check=ConsumerOptions(**FAST)))
    p.keep(producer, TransactionMQProducer.shutdown)
    sent = None
    try:
        producer.start()
        p.seen.sources.append(producer._checks.health)
        sent = producer.send_message_in_transaction(Message(p.topic, body=b"paid"),
                                                    lambda msg, arg: TransactionStatus.COMMIT)
    except Exception as exc:  # noqa: BLE001 - the refusal is what is looked for
        p.seen.raised(exc)
    yield
    if sent is not None:  # acknowledged: what a refusal kept the producer from ending is checked back (a super user)
        p.keep(_start(TransactionChecker(p.admin, CheckerOptions(**CHECKER))), TransactionChecker.stop)
        assert wait_for(lambda: not pending_transactions(p.admin, payments), RECOVERS_WITHIN_S, 0.5)
    records = read_topics(p.admin, [p.topic, p.admin.topics.half()])
    paid = [r.topic() for r in records if r.value() == b"paid"]
    assert paid.count(p.topic) == (0 if sent is None else 1), f"the transaction's real message, where it is: {paid}"
    assert sent is not None or not paid, "a refused transaction left a half behind"


def _push_consumer(p: Part):
    """A concurrent consumer of five messages, one failing once (a retry copy through the delay levels: a super
    user's forwarder brings it back) and a garbled record (a dead letter); given back, the five are handled once
    each and the garbled one is in the DLQ."""
    ids = _fill(p.admin, p.topic, 5)
    _send_garbled(p.admin, p.topic)
    history, listen = _failing_once(b"m1")
    p.started(lambda: DelayForwarder(p.admin, consumer_options=FAST).start(), DelayForwarder.close)
    consumer = p.started(lambda: _push(p.mine, p.group, p.topic, listen), PushConsumer.shutdown)
    if consumer is not None:
        p.seen.sources.append(consumer.health)
    yield
    if consumer is None or not consumer.health().ok:
        p.keep(_push(p.mine, p.group, p.topic, listen), PushConsumer.shutdown)
    assert wait_for(lambda: set(ids) <= {c.msg_id for c in history.calls}, RECOVERS_WITHIN_S), \
        check(history.calls, ids, order_by=None, serial_by=None).summary()
    dead_letters = p.admin.topics.dead_letter(p.group)
    assert wait_for(lambda: read_topics(p.admin, [dead_letters]), RECOVERS_WITHIN_S, 0.5)
    report = check(history.calls, ids, order_by=None, serial_by=None)
    assert report.lost_count == 0 and report.duplicate_count == 0, report.summary()


def _drop_in_consumer(p: Part):
    """The drop-in reads five messages and commits; refused, it reads and commits nothing past them; given back,
    it reads them all, once."""
    ids = _fill(p.admin, p.topic, 5)
    mine = p.mine
    config = {**mine.kafka, "bootstrap.servers": mine.bootstrap_servers, "group.id": p.group,
              "auto.offset.reset": "earliest", "rocketkafka.redis.urls": ",".join(mine.redis_urls),
              "rocketkafka.topic.prefix": mine.topic_prefix, "rocketkafka.redis.prefix": mine.redis_prefix}
    read: list[str] = []

    def start() -> Consumer:
        consumer = Consumer(config)
        p.keep(consumer, Consumer.close)
        consumer.subscribe([p.topic])
        stop = threading.Event()
        thread = threading.Thread(target=reading, args=(consumer, stop), daemon=True)
        p.closing.callback(thread.join, 10)
        p.closing.callback(stop.set)
        thread.start()
        return consumer

    def reading(consumer: Consumer, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                for record in consumer.consume(100, 0.2):
                    if record.error() is None:
                        read.append(dict(record.headers() or []).get(Header.MSG_ID, b"").decode())
                    else:
                        p.seen.texts.append(record.error().str())
            except Exception as exc:  # noqa: BLE001 - a refusal raised by consume or the engine
                p.seen.raised(exc)
                stop.wait(0.5)

    try:
        start()
        started = True
    except Exception as exc:  # noqa: BLE001 - refused at start
        p.seen.raised(exc)
        started = False
    yield
    if not started:
        start()
    assert wait_for(lambda: set(ids) <= set(read), RECOVERS_WITHIN_S), f"read {len(set(read))} of {len(ids)}"
    assert len(read) == len(set(read)), "a message was read twice"


def _delay_forwarder(p: Part):
    """Forwards what a deployment gives it: two level messages and one with a 3 s delay (hops: after its first
    second it goes on to another delay topic) to the topic, and a retry copy of a message the group's consumer (a
    super user) failed once to the group's retry topic; refused, it holds them; given back, the consumer handles
    each once. Sent once the forwarder runs: one that starts late finds every record due, and hops none."""
    history, listen = _failing_once(b"r0")
    p.keep(_push(p.admin, p.group, p.topic, listen), PushConsumer.shutdown)
    forwarder = p.started(lambda: DelayForwarder(p.mine, consumer_options=FAST).start(), DelayForwarder.close)
    if forwarder is not None:
        p.seen.sources.append(forwarder.health)
    with Producer("app", settings=p.admin) as producer:
        ids = [producer.send_sync(message).msg_id for message in (
            Message(p.topic, body=b"r0"), Message(p.topic, body=b"d0", delay_time_level=1),
            Message(p.topic, body=b"d1", delay_time_level=1), Message(p.topic, body=b"h0", delay=3.0))]
    yield
    if forwarder is None or not forwarder.health().ok:
        p.keep(DelayForwarder(p.mine, consumer_options=FAST).start(), DelayForwarder.close)
    assert wait_for(lambda: set(ids) <= {c.msg_id for c in history.calls}, RECOVERS_WITHIN_S), \
        check(history.calls, ids, order_by=None, serial_by=None).summary()
    report = check(history.calls, ids, order_by=None, serial_by=None)
    assert report.lost_count == 0 and report.duplicate_count == 0, report.summary()


def _transaction_checker(p: Part):
    """Resolves an undecided transaction by check-back (the producer, a super user, answers COMMIT); refused, it
    decides nothing; given back, one real message."""
    payments = p.deployment.producer_groups[0]
    producer = TransactionMQProducer(payments, lambda msg: TransactionStatus.COMMIT, settings=p.admin,
                                     options=TransactionOptions(check=ConsumerOptions(**FAST)))
    p.keep(producer, TransactionMQProducer.shutdown)
    producer.start()
    sent = producer.send_message_in_transaction(Message(p.topic, body=b"undecided"),
                                                lambda msg, arg: TransactionStatus.UNKNOWN)
    checker = p.started(lambda: _start(TransactionChecker(p.mine, CheckerOptions(**CHECKER))), TransactionChecker.stop)
    if checker is not None:
        p.seen.sources.append(checker.health)
    yield
    if checker is None or not checker.health().ok:
        p.keep(_start(TransactionChecker(p.mine, CheckerOptions(**CHECKER))), TransactionChecker.stop)
    assert wait_for(lambda: sent.msg_id in _ids(p.admin, p.topic), RECOVERS_WITHIN_S, 0.5)
    assert wait_for(lambda: not pending_transactions(p.admin, payments), RECOVERS_WITHIN_S, 0.5)
    assert _ids(p.admin, p.topic).count(sent.msg_id) == 1


def _admin(p: Part):
    """The operator's work: provisioning, internal topics' health, progress, delay backlog, pending transactions, a
    reset, a dead letter sent back; given back, what was refused works, and the dead letter arrives once."""
    _fill(p.admin, p.topic, 2)
    _dead_letter(p.admin, p.group, p.topic)
    group, payments, mine = p.deployment.consumer_groups[0], p.deployment.producer_groups[0], p.mine
    calls = [lambda: provision_topics(mine, p.deployment), lambda: internal_topics(mine),
             lambda: consumer_progress(mine, group, [p.topic]), lambda: delay_backlog(mine),
             lambda: pending_transactions(mine, payments), lambda: reset_offset(mine, group, p.topic, "earliest"),
             lambda: resend_dead_letters(mine, group, everything=True)]
    refused = []
    for call in calls:
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - the refusal is what is looked for
            p.seen.raised(exc)
            refused.append(call)
    yield
    for call in refused:
        call()
    assert [r.value() for r in read_topics(p.admin, [p.topic])].count(b"dead") == 1


RUNS = {Role.PRODUCER: _producer, Role.TRANSACTIONAL_PRODUCER: _transactional_producer,
        Role.PUSH_CONSUMER: _push_consumer, Role.DROP_IN_CONSUMER: _drop_in_consumer,
        Role.DELAY_FORWARDER: _delay_forwarder, Role.TRANSACTION_CHECKER: _transaction_checker, Role.ADMIN: _admin}


# -- helpers ------------------------------------------------------------------------------------------------
def _runtime_shown(name: str, topic: str, group: str, settings: Settings) -> str:
    for placeholder, value in (("payments", f"{group}-pay"), ("topic", topic), ("group", group),
                               ("prefix", settings.topic_prefix)):
        name = name.replace(value, "{%s}" % placeholder)
    return name


def _quietly(close: Callable[[Any], Any], component: Any) -> None:
    try:
        close(component)
    except Exception:  # noqa: BLE001 - a teardown closes what it can; a failed close is no verdict here
        log.info("closing %r failed", component, exc_info=True)


def _start(component: Any) -> Any:
    component.start()
    return component


def _push(settings: Settings, group: str, topic: str, listen: Callable[[Any], Any]) -> PushConsumer:
    consumer = PushConsumer(group, settings=settings, max_reconsume_times=3,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST)
    consumer.subscribe(topic, listen)
    try:
        consumer.start()
    except BaseException:
        consumer.shutdown()
        raise
    return consumer


def _failing_once(body: bytes) -> tuple[History, Callable[[Any], ConsumeStatus]]:
    """A listener that asks for the message with ``body`` again once (a retry copy) and records every message it
    handles in the history."""
    history, failed, lock = History(), set(), threading.Lock()

    def listen(msg):
        with lock:
            if msg.body == body and msg.id not in failed:
                failed.add(msg.id)
                return ConsumeStatus.RECONSUME_LATER
        with history.handler_call("c", msg):
            return ConsumeStatus.CONSUME_SUCCESS

    return history, listen


def _fill(admin: Settings, topic: str, count: int) -> list[str]:
    with Producer("filler", settings=admin) as producer:
        return [producer.send_sync(Message(topic, body=f"m{i}".encode(), keys=[f"k{i}"])).msg_id for i in range(count)]


def _send_garbled(admin: Settings, topic: str) -> None:
    from confluent_kafka import Producer as Raw

    raw = Raw(admin.kafka_config())
    raw.produce(topic, b"garbled", headers=[("rk.TAGS", b"\xff\xfe")])
    raw.flush(30)


def _dead_letter(admin: Settings, group: str, topic: str) -> None:
    """One dead letter of ``group`` from ``topic`` (as a consumer of the group writes it)."""
    from confluent_kafka import Producer as Raw

    from rocketkafka.admin import TopicAdmin

    with TopicAdmin(admin) as topics:
        topics.create(admin.topics.dead_letter(group), partitions=1)
    raw = Raw(admin.kafka_config())
    raw.produce(admin.topics.dead_letter(group), b"dead", headers=[(Header.ORIGIN_TOPIC, topic.encode()),
                                                                 (Header.DLQ_REASON, b"a test's")])
    raw.flush(30)


def _ids(admin: Settings, topic: str) -> list[str]:
    return [dict(r.headers() or []).get(Header.MSG_ID, b"").decode() for r in read_topics(admin, [topic])]
