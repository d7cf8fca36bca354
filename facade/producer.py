"""The RocketMQ-style producer (names of Apache's rocketmq-client-python).

rocketmq-client-python code runs with only its import changed: ``Producer(group_id)``,
its ``set_*`` setters (``set_name_server_address`` names the Kafka bootstrap servers: both
are where a client finds the brokers), ``send_sync`` / ``send_oneway`` /
``send_orderly_with_sharding_key`` returning an unpackable ``SendResult(status, msg_id,
offset)``, ``start`` / ``shutdown``. What differs is listed in docs/guides/from-rocketmq.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rocketkafka.config import Settings
from rocketkafka.errors import BrokerUnavailableError, ConfigError, SelectorError, SendError, StateError
from rocketkafka.message import Message, SendResult, SendStatus, require_message
from rocketkafka.message_index import MessageIndex
from rocketkafka.observed_sender import ObservedSender
from rocketkafka.queue_selectors import Selector
from rocketkafka.names import check_group_name
from rocketkafka.sender import Sender
from rocketkafka.trace import Tracer
from rocketkafka.upstream_setters import ConnectionSetters
from rocketkafka.service_context import ServiceContext

log = logging.getLogger(__name__)


class Producer(ConnectionSetters, ServiceContext):
    """Send messages with RocketMQ's calls on a Kafka broker.

    Parameters:
        group_id: producer group name.
        config: confluent-kafka settings (``bootstrap.servers`` and any producer setting); upstream's
            second positional argument ``orderly`` (a bool) is accepted in its place and changes
            nothing (every Kafka partition is ordered).
        redis_urls: Redis nodes (unused by plain sends; accepted so all clients take the same arguments).
        settings: ready :class:`Settings` instead of ``config``/``redis_urls``.
        send_timeout: seconds a send may take (metadata look-up, queueing and the broker's ack).
        timeout: upstream's send timeout in **milliseconds** (wins over ``send_timeout``).
        compress_level: upstream's zlib level (1-9): bodies are gzip-compressed at that level.
        max_message_size: upstream's largest message in bytes (librdkafka's ``message.max.bytes``).
        trace: write a ``SENT`` (and ``DELAYED``) trace event per acked message (:mod:`rocketkafka.trace`).
        message_index: index message ids and keys in Redis (:mod:`rocketkafka.message_index`) for
            ``rocketkafka admin query-msg``; ``True`` keeps entries for the default retention, a
            :class:`~rocketkafka.message_index.MessageIndex` sets its own.
        otel: an OpenTelemetry PRODUCER span per send, its W3C trace context in the record's headers
            (:mod:`rocketkafka.otel`; needs the ``otel`` extra); ``None``: as ``Settings.otel`` (``ROCKETKAFKA_OTEL``).

    Trace, index and OpenTelemetry are off by default; off, the send path has no extra work per message.

    Raises:
        ConfigError: ``group_id`` is not a valid group name (1-255 characters, no control characters),
            or a setting is invalid.

    >>> with Producer("pg", {"bootstrap.servers": "127.0.0.1:9092"}) as p:   # doctest: +SKIP
    ...     status, msg_id, offset = p.send_sync(Message("orders", body=b"hi", tags="created"))
    """

    def __init__(self, group_id: str, config: dict[str, Any] | bool | None = None, timeout: int | None = None,
                 compress_level: int | None = None, max_message_size: int | None = None, *,
                 redis_urls: list[str] | None = None, settings: Settings | None = None, send_timeout: float = 30.0,
                 orderly: bool = False, trace: bool = False, message_index: bool | MessageIndex = False,
                 otel: bool | None = None) -> None:
        if isinstance(config, bool):  # rocketmq-client-python's Producer(group_id, orderly)
            config = None
        if config is not None and not isinstance(config, dict):
            raise ConfigError(f"config must be a confluent-kafka config dict, got {type(config).__name__}")
        self.group_id = check_group_name(group_id, "producer group")
        self._config = dict(config or {})
        self._redis_urls = redis_urls
        self._settings = settings
        self._producer_config = {k: v for k, v in self._config.items() if k != "bootstrap.servers"}
        self.send_timeout = send_timeout
        self._sender: Sender | None = None
        self._trace = trace
        self._otel = otel
        self._index = message_index
        if message_index is not False and not isinstance(message_index, (bool, MessageIndex)):
            raise ConfigError(f"message_index must be a bool or a MessageIndex, got {type(message_index).__name__}")
        if settings is None and "bootstrap.servers" in self._config:
            self._settings = Settings.load(self._config, redis_urls)  # a bad setting raises here, not at start
        if timeout is not None:
            self.set_timeout(timeout)
        if compress_level is not None:
            self.set_compress_level(compress_level)
        if max_message_size is not None:
            self.set_max_message_size(max_message_size)
        if message_index is True:
            self.settings.require_redis()  # no Redis, no index: say so now, not at the first send

    def _client_config(self) -> dict[str, Any]:
        return self._producer_config

    def _started(self) -> bool:
        return self._sender is not None

    # -- rocketmq-client-python's setters (before start; name server and credentials: ConnectionSetters) --
    def set_group(self, group_name: str) -> None:
        """The producer group."""
        self._before_start("set_group")
        self.group_id = check_group_name(group_name, "producer group")

    def set_timeout(self, timeout: int) -> None:
        """Send timeout in milliseconds (upstream's unit)."""
        self._before_start("set_timeout")
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0:
            raise ConfigError(f"timeout must be a positive number of milliseconds, got {timeout!r}")
        self.send_timeout = timeout / 1000

    def set_compress_level(self, level: int) -> None:
        """Compress bodies with gzip (zlib) at ``level`` 1-9, as upstream compresses with zlib."""
        self._before_start("set_compress_level")
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 9:
            raise ConfigError(f"compress_level must be an int in 0..9, got {level!r}")
        self._producer_config.update({"compression.codec": "gzip" if level else "none", "compression.level": level})

    def set_max_message_size(self, max_size: int) -> None:
        """The largest message in bytes (``message.max.bytes``)."""
        self._before_start("set_max_message_size")
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1000:
            raise ConfigError(f"max_message_size must be an int >= 1000 bytes, got {max_size!r}")
        self._producer_config["message.max.bytes"] = max_size

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Connect (idempotent): the broker is asked once, so a refusal of who this producer is comes now.

        Raises:
            AuthenticationError: the broker refused the credentials, TLS failed, or it expects another
                ``security.protocol`` (the error says which). A broker that does not answer is no error:
                sends wait for it, up to the send timeout.
        """
        if self._sender is None:
            if not self._trace and self._index is False and not self.otel:
                sender = Sender(self.settings, self._producer_config, self.group_id, send_timeout=self.send_timeout)
            else:
                index = self._index if isinstance(self._index, MessageIndex) else \
                    MessageIndex(self.settings.require_redis(), self.settings.keys) if self._index else None
                tracer = Tracer(self.settings, f"producer {self.group_id}") if self._trace else None
                sender = self._sender_class()(self.settings, self._producer_config, self.group_id, tracer=tracer,
                                              index=index, send_timeout=self.send_timeout)
            try:
                sender.check_access(min(self.send_timeout, 10.0))
            except BaseException:
                sender.close(0)
                raise
            self._sender = sender

    @property
    def otel(self) -> bool:
        """Whether this producer's sends are OpenTelemetry spans (``otel=``, else ``Settings.otel``)."""
        return self._otel if self._otel is not None else self.settings.otel

    def _sender_class(self) -> type[ObservedSender]:
        """The send engine with observers: with OpenTelemetry spans when :attr:`otel` (imported only then)."""
        if not self.otel:
            return ObservedSender
        from rocketkafka.otel_sender import OtelSender

        return OtelSender

    def shutdown(self) -> None:
        """Deliver what is queued and close."""
        if self._sender is not None:
            self._sender.close()
            self._sender = None

    @property
    def sender(self) -> Sender:
        """The sending engine of a started producer; :class:`StateError` before ``start()``."""
        if self._sender is None:
            raise StateError("producer not started: call start() or use it as a context manager")
        return self._sender

    # -- sends -----------------------------------------------------------------------
    def send_sync(self, msg: Message, selector: Selector | None = None, arg: Any = None) -> SendResult:
        """Send and wait for the ack; ``selector(partitions, msg, arg)`` picks the partition when given.

        Raises:
            MessageError, TopicNotFoundError, SelectorError, DelayError: nothing was sent.
            SendError: the broker refused it or did not answer within the send timeout; a
                ``KafkaException`` whose ``args[0]`` is the KafkaError (code, retriable).
            TypeError: ``msg`` is not a :class:`Message`.
        """
        require_message(msg, "send_sync")
        sender = self.sender
        return sender.send_sync(sender.prepare(msg, selector, arg), self.send_timeout)

    def send_orderly(self, msg: Message, sharding_key: str) -> SendResult:
        """Send to the partition of ``sharding_key`` by the producer's partitioner (murmur2 by default,
        as the Java client: :mod:`rocketkafka.partitioning`)."""
        require_message(msg, "send_orderly")
        if sharding_key is None:  # prepare() reads None as "no sharding key": here it is a mistake
            raise SelectorError("sharding key must be str, int or bytes, got None")
        sender = self.sender
        return sender.send_sync(sender.prepare(msg, sharding_key=sharding_key), self.send_timeout)

    #: rocketmq-client-python's name of :meth:`send_orderly`.
    send_orderly_with_sharding_key = send_orderly

    def send_async(self, msg: Message, callback: Callable[[SendResult], None],
                   exception_callback: Callable[[Exception], None] | None = None,
                   selector: Selector | None = None, arg: Any = None) -> None:
        """Send without waiting; ``callback(result)`` or ``exception_callback(exc)`` runs on ack.

        Callbacks run inside :meth:`poll`, :meth:`flush` or :meth:`shutdown`, as confluent-kafka's.
        Validation errors still raise here, before anything is sent. A send that cannot start --
        a delayed, selected or sharded message whose route (partition count) no broker gave
        within ``send_timeout`` (10 s at most) -- goes to ``exception_callback`` on this thread,
        as RocketMQ's ``onException``; without one it raises.
        """
        require_message(msg, "send_async")
        sender = self.sender
        topic = msg.topic

        def delivered(err: Any, kmsg: Any) -> None:
            if err is None:
                callback(SendResult(_OK, msg_id, kmsg.offset(), topic, kmsg.partition()))
                return
            exc = Sender.result_error(topic, err, sender.principal)
            if exception_callback is not None:
                exception_callback(exc)
            else:
                log.error("async send of %s failed: %s", msg_id, exc, extra={"msg_id": msg_id, "topic": topic})

        try:
            if selector is None:
                msg_id = sender.produce_message(msg, delivered)
            else:
                record = sender.prepare(msg, selector, arg)
                msg_id = record.msg_id
                sender.produce(record, delivered)
        except (SendError, BrokerUnavailableError) as exc:
            if exception_callback is None:
                raise
            exception_callback(exc)
            return
        sender.poll(0)

    def send_oneway(self, msg: Message) -> None:
        """Send without any acknowledgement to the caller."""
        require_message(msg, "send_oneway")
        sender = self.sender
        sender.produce_message(msg)
        sender.poll(0)

    def poll(self, timeout: float = 0) -> int:
        """Serve delivery callbacks of async sends."""
        return self.sender.kafka.poll(timeout)

    def flush(self, timeout: float = 30.0) -> int:
        """Wait until queued messages are delivered; returns how many are still queued."""
        return self.sender.flush(timeout)


_OK = SendStatus.OK
