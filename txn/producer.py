"""The transaction producer (RocketMQ's ``TransactionMQProducer``, named as rocketmq-client-python's).

``send_message_in_transaction`` walks RocketMQ's two phases::

    1. half message  -> half topic (real topic/partition, producer group, transaction id in headers);
                        a send failure raises here and the local transaction never runs
    2. local transaction: local_execute(msg, user_args) -> COMMIT / ROLLBACK / UNKNOWN
                        (raising or returning None means UNKNOWN)
    3. end transaction: COMMIT -> real message + op record, ROLLBACK -> op record, UNKNOWN -> nothing;
                        written in the background, never raising (the checker repairs failures)

Check-backs arrive on the group's check-request topic, which every live producer of
the group consumes as one consumer group (any one of them answers): the answer runs
``check_local_transaction`` on the consumer's worker pool (RocketMQ's check executor)
and ends the transaction exactly as step 3. Answers need nothing from memory, so a
restarted producer answers for halves sent before its restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

from rocketkafka.config import Settings
from rocketkafka.errors import StateError
from rocketkafka.exactly_once import require_exactly_once
from rocketkafka.logs import message_fields
from rocketkafka.message import ConsumeStatus, Message, MessageExt, SendResult, require_message
from rocketkafka.names import Header, check_group_name
from rocketkafka.producer import Producer
from rocketkafka.sender import Sender
from rocketkafka.ordering.engine.options import default_instance_name
from rocketkafka.ordering.consumers.push_consumer import PushConsumer
from rocketkafka.txn.end import TransactionEnder
from rocketkafka.txn.errors import TransactionListenerError, TransactionMessageError
from rocketkafka.txn.markers import EndMarkers
from rocketkafka.txn.options import TransactionOptions
from rocketkafka.txn.records import HalfMessage, TransactionCheckMessage, half_record, provision
from rocketkafka.txn.status import TransactionStatus, as_status

log = logging.getLogger(__name__)

LocalExecute = Callable[[Message, Any], "TransactionStatus | None"]
CheckCallback = Callable[[TransactionCheckMessage], "TransactionStatus | None"]


class TransactionSendResult(SendResult):
    """A transactional send: ``msg_id``, ``topic``, ``queue_id`` and ``offset`` locate the half message.

    Unpacks as upstream's ``SendResult(status, msg_id, offset)``. ``transaction_id`` equals
    ``msg_id``: the real message, once committed, carries the same id. ``local_state`` is what
    the local transaction decided (UNKNOWN: the checker will ask).
    """

    transaction_id: str
    local_state: TransactionStatus

    def __new__(cls, status: Any, msg_id: str, offset: int, topic: str = "", queue_id: int = -1, *,
                transaction_id: str = "", local_state: TransactionStatus = TransactionStatus.UNKNOWN
                ) -> TransactionSendResult:
        self = cast(TransactionSendResult, super().__new__(cls, status, msg_id, offset, topic, queue_id))
        self.transaction_id, self.local_state = transaction_id, local_state
        return self


class TransactionMQProducer(Producer):
    """Send messages whose delivery follows a local transaction; a :class:`~rocketkafka.Producer` too.

    As rocketmq-client-python's, it is a producer: ``send_sync``, ``send_async``,
    ``send_oneway``, ``send_orderly`` and the ``set_*`` setters work once started.

    Parameters:
        group_id: producer group; check-backs go to the live producers of this group.
        check_callback: ``check_local_transaction(msg) -> TransactionStatus``, or a listener object
            with ``check_local_transaction(msg)`` and ``execute_local_transaction(msg, arg)``.
        config: confluent-kafka settings (``bootstrap.servers`` and producer settings). Upstream's
            third positional argument is ``user_args``, which its check callback never sees:
            anything but a dict there is ignored.
        timeout, compress_level, max_message_size: as :class:`~rocketkafka.Producer` (upstream's names).
        redis_urls: the Redis nodes (the check-request consumer's lock table, end markers).
        settings: ready :class:`Settings` instead of ``config``/``redis_urls``.
        options: :class:`TransactionOptions`; keyword ``overrides`` replace single fields.
        otel: OpenTelemetry spans of the half's send and of the commit (as :class:`~rocketkafka.Producer`);
            the check-back answers are spans as ``Settings.otel`` or ``options.check`` say.

    >>> def check(msg):                                          # doctest: +SKIP
    ...     return TransactionStatus.COMMIT if orders.paid(msg.transaction_id) else TransactionStatus.UNKNOWN
    >>> with TransactionMQProducer("orders-tx", check, {"bootstrap.servers": "..."}) as p:  # doctest: +SKIP
    ...     result = p.send_message_in_transaction(Message("orders", b"{...}"), pay, order)
    """

    def __init__(self, group_id: str, check_callback: CheckCallback | Any, config: dict[str, Any] | Any = None,
                 timeout: int | None = None, compress_level: int | None = None, max_message_size: int | None = None,
                 *, redis_urls: list[str] | None = None, settings: Settings | None = None,
                 options: TransactionOptions | None = None, otel: bool | None = None, **overrides: Any) -> None:
        check_group_name(group_id, "producer group")
        self._check, self._execute = _listener(check_callback)
        super().__init__(group_id, config if isinstance(config, dict) else None, timeout, compress_level,
                         max_message_size, redis_urls=redis_urls, settings=settings, otel=otel)
        base = options or TransactionOptions()
        options = TransactionOptions.model_validate({**base.model_dump(exclude_unset=True), **overrides}) if overrides else base
        if "instance_name" not in options.check.model_fields_set:  # one member per producer, even with shared options
            options = options.model_copy(update={"check": options.check.model_copy(
                update={"instance_name": default_instance_name()})})
        self.options = options
        self._state = "new"

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Create the internal topics, start the end-transaction writer and answer check-backs."""
        if self._state != "new":
            raise StateError(f"transaction producer is {self._state}; start() works once")
        o, topics = self.options, self.settings.topics
        opened: list[Callable[[], Any]] = []
        try:
            if o.kafka_transactions:  # first: a refusal leaves nothing behind
                require_exactly_once(self.settings, f"transaction producer of group {self.group_id}",
                                     "kafka_transactions", transactional_id_prefix=f"{self.group_id}.",
                                     group=topics.check_request(self.group_id))  # its ids and group: its own
            # with OpenTelemetry: the half's send and the commit's are spans, the real message continues the trace
            self._sender = (self._sender_class() if self.otel else Sender)(
                self.settings, self._producer_config, self.group_id, send_timeout=self.send_timeout)
            opened.append(self._sender.close)
            provision(self._sender.admin, topics, o.half_partitions, o.check_partitions, self.group_id)
            self._markers = EndMarkers(self.settings.require_redis(), self.settings.keys, o.end_marker_ttl_ms)
            opened.append(self._markers.close)
            self._ender = TransactionEnder(
                self._sender, self._markers, topics, o.end_batch_max, o.end_queue_max, o.send_timeout_ms,
                f"{self.group_id}.{o.check.instance_name}" if o.kafka_transactions else None)
            opened.append(self._ender.close)
            # an answer never fails, so no retry waits in the delay levels (no delay topics, no forwarder to ask for)
            backoff: dict[str, Any] = {} if "retry_backoff" in o.check.model_fields_set else {"retry_backoff": False}
            self._checks = PushConsumer(topics.check_request(self.group_id), {"fetch.wait.max.ms": o.check_fetch_wait_ms},
                                        settings=self.settings, options=o.check, **backoff)
            self._checks.subscribe(topics.check_request(self.group_id), self._answer_check)
            self._checks.start()
        except BaseException:
            for close in reversed(opened):
                close()
            self._state = "closed"
            raise
        self._state = "running"
        log.info("transaction producer of group %s started", self.group_id)

    def shutdown(self) -> None:
        """Stop answering check-backs, finish queued end-transactions, close."""
        if self._state != "running":
            self._state = "closed"
            return
        self._state = "closing"
        self._checks.shutdown()
        self._ender.close()
        if self._sender is not None:
            self._sender.close()
        self._markers.close()
        self._state = "closed"

    close = shutdown

    # -- the transactional send ------------------------------------------------------
    def send_message_in_transaction(self, msg: Message, local_execute: LocalExecute | None = None,
                                    user_args: Any = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, end the transaction.

        Parameters:
            msg: the message; its ``id`` (the transaction id) is set before ``local_execute`` runs.
            local_execute: ``(msg, user_args) -> TransactionStatus``; default: the listener's
                ``execute_local_transaction``.
            user_args: passed to ``local_execute``.

        Raises:
            TransactionMessageError: the message is delayed (nothing sent).
            MessageError, TopicNotFoundError: the message cannot be sent (nothing sent).
            TypeError: ``msg`` is not a :class:`Message`.
            SendError: the half message was not stored (the local transaction did not run).
            TransactionListenerError: ``local_execute`` returned something that is not a
                TransactionStatus (the half stays open for the checker).
        """
        execute = self.local_execute_of(msg, local_execute)
        sent, half = self.send_half(msg)
        try:
            returned = execute(msg, user_args)
        except Exception as exc:  # RocketMQ: an exception in the local transaction means UNKNOWN
            returned = self.local_failure(half, exc)
        return self.end(sent, half, returned)

    # -- its steps (the asyncio door, rocketkafka.txn.aio, awaits the local transaction between them) ----------
    def local_execute_of(self, msg: Message, local_execute: Any) -> Any:
        """The local transaction to run for ``msg`` (``local_execute`` or the listener's), once the producer and
        the message are checked; raises as :meth:`send_message_in_transaction` does, before anything is sent."""
        require_message(msg, "send_message_in_transaction")
        if self._state != "running":
            raise StateError(f"transaction producer is {self._state}: call start() or use it as a context manager")
        execute = local_execute if local_execute is not None else self._execute
        if not callable(execute):
            raise TransactionListenerError("send_message_in_transaction needs a callable local_execute "
                                           "(or a listener with execute_local_transaction)")
        if msg.delay_time_level or msg.deliver_at is not None or msg.delay is not None:
            raise TransactionMessageError(f"transactional messages cannot be delayed ({msg!r} has a delay); "
                                          "send the message without delay_time_level, deliver_at or delay")
        return execute

    def send_half(self, msg: Message) -> tuple[SendResult, HalfMessage]:
        """Phase 1: store ``msg`` as a half message (waits for the broker); raises SendError when it was not."""
        sender = self._sender
        assert sender is not None  # running: start() made it
        prepared = sender.prepare(msg)
        record = half_record(prepared, self.settings.topics, self.group_id, sender.partitions(msg.topic))
        sender.check_size(record)
        sent = sender.send_sync(record, self.options.send_timeout_ms / 1000)
        return sent, HalfMessage.from_sent(record, sent.queue_id, sent.offset, _born(record))

    def local_failure(self, half: HalfMessage, exc: BaseException) -> TransactionStatus | None:
        """The local transaction raised: logged; returns what it counts as (``None``: UNKNOWN, for the checker)."""
        log.warning("local transaction %s raised %s: %s; left UNKNOWN", half.transaction_id, type(exc).__name__, exc,
                    extra={"msg_id": half.msg_id, "transaction_id": half.transaction_id})
        return None

    def end(self, sent: SendResult, half: HalfMessage, returned: Any) -> TransactionSendResult:
        """Phase 3: end the transaction as the local one ``returned`` (queued, never raising but for a return
        that is no TransactionStatus, after the half is stored)."""
        state = as_status(returned, half.transaction_id, "execute_local_transaction")
        self._end(half, state)
        return TransactionSendResult(sent.status, sent.msg_id, sent.offset, sent.topic, sent.queue_id,
                                     transaction_id=half.transaction_id, local_state=state)

    def _end(self, half: HalfMessage, state: TransactionStatus) -> Any:
        try:
            return self._ender.submit(half, state)
        except Exception as exc:  # end-transaction never raises: the checker repairs
            log.warning("end of transaction %s not queued (%s); the checker will check it back", half.transaction_id, exc,
                        extra={"msg_id": half.msg_id, "transaction_id": half.transaction_id})
            return None

    # -- check-backs -----------------------------------------------------------------
    def _answer_check(self, request: MessageExt) -> ConsumeStatus:
        """Answer one check request (worker thread of the check consumer); never fails the request.

        The end-transaction is queued, not awaited (RocketMQ sends it oneway): answers are
        written in batches, and one lost with a crash is asked for again at the next scan.
        """
        try:
            half = HalfMessage.from_check_request(request)
        except Exception as exc:
            log.error("dropping malformed check request %s: %s", request.id, exc, extra=message_fields(request))
            return ConsumeStatus.CONSUME_SUCCESS
        if half.producer_group != self.group_id:  # group names that map to the same topic name
            return ConsumeStatus.CONSUME_SUCCESS
        try:
            state = as_status(self._check(half.to_check_message()), half.transaction_id, "check_local_transaction")
        except Exception as exc:  # raising, or a wrong type: UNKNOWN, the checker asks again
            log.warning("check of transaction %s failed (%s: %s); left UNKNOWN", half.transaction_id,
                        type(exc).__name__, exc, extra={"msg_id": half.msg_id, "transaction_id": half.transaction_id})
            return ConsumeStatus.CONSUME_SUCCESS
        self._end(half, state)
        return ConsumeStatus.CONSUME_SUCCESS


def _listener(obj: Any) -> tuple[CheckCallback, LocalExecute | None]:
    """(check, execute) from a listener object or a plain check callable."""
    check = getattr(obj, "check_local_transaction", None)
    if check is not None:
        execute = getattr(obj, "execute_local_transaction", None)
        if not callable(check) or (execute is not None and not callable(execute)):
            raise TransactionListenerError("the listener's check_local_transaction and execute_local_transaction "
                                           "must be callable")
        return check, execute
    if callable(obj):
        return obj, None
    raise TransactionListenerError(f"check_callback must be callable or a listener with check_local_transaction, "
                                   f"got {type(obj).__name__}")


def _born(record: Any) -> int:
    for k, v in record.headers:
        if k == Header.BORN_TIMESTAMP:
            return int(v)
    return 0
