"""The RocketMQ-style producer (names of Apache's rocketmq-client-python)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from facade.config import Settings
from facade.errors import StateError
from facade.message import Message, SendResult
from facade.selectors import Selector, hash_selector
from facade.sender import Sender

log = logging.getLogger(__name__)


class Producer:
    """Send messages with RocketMQ's calls on a Kafka broker.

    Parameters:
        group_id: producer group name.
        config: confluent-kafka settings (``bootstrap.servers`` and any producer setting).
        redis_urls: Redis nodes (unused by plain sends; accepted so all clients take the same arguments).
        settings: ready :class:`Settings` instead of ``config``/``redis_urls``.
        send_timeout: seconds ``send_sync`` waits for the broker's ack.

    >>> with Producer("pg", {"bootstrap.servers": "127.0.0.1:9092"}) as p:   # doctest: +SKIP
    ...     p.send_sync(Message("orders", body=b"hi", tags="created"))
    """

    def __init__(self, group_id: str, config: dict[str, Any] | None = None, *, redis_urls: list[str] | None = None,
                 settings: Settings | None = None, send_timeout: float = 30.0) -> None:
        self.group_id = group_id
        self.settings = settings or Settings.load(config, redis_urls)
        self._producer_config = {k: v for k, v in (config or {}).items() if k != "bootstrap.servers"}
        self.send_timeout = send_timeout
        self._sender: Sender | None = None

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Connect (idempotent)."""
        if self._sender is None:
            self._sender = Sender(self.settings, self._producer_config, self.group_id)

    def shutdown(self) -> None:
        """Deliver what is queued and close."""
        if self._sender is not None:
            self._sender.close()
            self._sender = None

    def __enter__(self) -> Producer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    @property
    def sender(self) -> Sender:
        if self._sender is None:
            raise StateError("producer not started: call start() or use it as a context manager")
        return self._sender

    # -- sends -----------------------------------------------------------------------
    def send_sync(self, msg: Message, selector: Selector | None = None, arg: Any = None) -> SendResult:
        """Send and wait for the ack; ``selector(partitions, msg, arg)`` picks the partition when given."""
        return self.sender.send_sync(self.sender.prepare(msg, selector, arg), self.send_timeout)

    def send_orderly(self, msg: Message, sharding_key: str) -> SendResult:
        """Send to the partition of ``sharding_key`` (murmur2, as Kafka's default partitioner)."""
        return self.sender.send_sync(self.sender.prepare(msg, hash_selector, sharding_key, sharding_key=sharding_key),
                                     self.send_timeout)

    def send_async(self, msg: Message, callback: Callable[[SendResult], None],
                   exception_callback: Callable[[Exception], None] | None = None,
                   selector: Selector | None = None, arg: Any = None) -> None:
        """Send without waiting; ``callback(result)`` or ``exception_callback(exc)`` runs on ack.

        Callbacks run inside :meth:`poll`, :meth:`flush` or :meth:`shutdown`, as confluent-kafka's.
        Validation errors still raise here, before anything is sent.
        """
        record = self.sender.prepare(msg, selector, arg)

        def delivered(err: Any, kmsg: Any) -> None:
            try:
                result = Sender.result(record, err, kmsg)
            except Exception as exc:  # the broker refused it
                if exception_callback:
                    exception_callback(exc)
                else:
                    log.error("async send of %s failed: %s", record.msg_id, exc,
                              extra={"msg_id": record.msg_id, "topic": record.topic})
                return
            callback(result)

        self.sender.produce(record, delivered)
        self.sender.kafka.poll(0)

    def send_oneway(self, msg: Message) -> None:
        """Send without any acknowledgement to the caller."""
        self.sender.produce(self.sender.prepare(msg))
        self.sender.kafka.poll(0)

    def poll(self, timeout: float = 0) -> int:
        """Serve delivery callbacks of async sends."""
        return self.sender.kafka.poll(timeout)

    def flush(self, timeout: float = 30.0) -> int:
        """Wait until queued messages are delivered; returns how many are still queued."""
        return self.sender.flush(timeout)
