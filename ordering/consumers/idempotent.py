"""Idempotent consumption: a listener runs at most once per message id, even when a crash re-delivers it.

RocketMQ delivers at least once: after a consumer crash (or a stall past its lock
lease) the new owner re-delivers what the old one had handled but not committed.
:class:`IdempotentConsumer` wraps a listener and records each message id in Redis,
as the usual RocketMQ dedup helpers do::

    absent                never handled, or its handler died: run it
    "consuming:<token>"   a handler is running it (expires after consuming_ttl_ms)
    "consumed"            handled (kept consumed_ttl_ms, 1 day by default)

A message found *consumed* is acknowledged without calling the listener. A message
found *consuming* belongs to another handler, or to one that crashed: it is tried
again later, and once the mark expires it runs again. So ``consuming_ttl_ms`` must
exceed the longest a handler may take -- including a stall such as SIGSTOP or a GC
pause -- or a stalled handler and its re-delivery both run.

Where the state lives: the lock table's Redis nodes, written to *all* and decided by a
quorum ``N // 2 + 1``, not the first node that answers. The helper exists for the
faults this project must survive, and one of three Redis nodes failing is one of them:
with first-available, losing node 1 moves every check to node 2, which never saw the
marks, so each in-flight re-delivery would run twice exactly when it matters. With a
quorum any two majorities share a node, so a "consumed" or "consuming" mark written on
a majority is seen by every later check while at most one node is lost. Mutual
exclusion comes the same way: two handlers racing for one message cannot both mark a
majority. The price is a write to every node per message, twice (begin, finish).

Results: a listener that raises or asks to try again (``RECONSUME_LATER``,
``SUSPEND_CURRENT_QUEUE_A_MOMENT``, :class:`~rocketkafka.message.Suspend`) leaves no mark, so
the retry runs it. While another handler's mark is live, an orderly consumer's
partition (or key) is suspended for the mark's remaining time without counting a
failure; a concurrent one waits for it in place, then asks to reconsume later.

>>> consumer = PushConsumer("orders-app", settings=settings, orderly=True)     # doctest: +SKIP
>>> consumer.subscribe("orders", IdempotentConsumer(consumer, handle))       # doctest: +SKIP
"""

from __future__ import annotations

import enum
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

from rocketkafka.errors import ConfigError
from rocketkafka.logs import redact_url
from rocketkafka.message import ConsumeOrderlyStatus, ConsumeStatus, MessageExt, Suspend
from rocketkafka.ordering.locks import quorum

if TYPE_CHECKING:
    from rocketkafka.ordering.consumers.push_consumer import PushConsumer

__all__ = ["IdempotentConsumer", "MarkState", "decide"]

log = logging.getLogger(__name__)

CONSUMED = b"consumed"
_CONSUMING = "consuming:"
#: How soon (ms) a message is tried again when too few nodes answered to decide.
BUSY_RETRY_MS = 100

# BEGIN: mark a message as being consumed unless some state exists.
# KEYS[1]  the message's state key
# ARGV[1]  our mark ("consuming:<token>"), ARGV[2] its TTL (ms)
# Returns {state, pttl}: state "" when the mark is ours now; else the existing state and its PTTL.
_BEGIN = """
local cur = redis.call('GET', KEYS[1])
if cur then return {cur, redis.call('PTTL', KEYS[1])} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {'', 0}
"""

# ABORT: take our mark back after a failed try, so a retry can run at once.
# KEYS[1]  the message's state key
# ARGV[1]  our mark
# Returns 1 when our mark was deleted, 0 when the key holds something else.
_ABORT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class MarkState(enum.Enum):
    """What a quorum says about one message id."""

    OURS = "ours"  # marked consuming by us on a quorum: run the listener
    CONSUMED = "consumed"  # some handler finished it: skip
    BUSY = "busy"  # another handler's live mark, or too few nodes answered: later


@dataclass
class _Begin:
    state: MarkState
    marked: list[int]  # nodes where our mark was set
    wait_ms: int  # BUSY: how long until the blocking mark expires (or a short retry when nodes failed)


class _Node:
    """One Redis node; after a failure it is skipped for a second, so a dead node costs no time per
    message."""

    def __init__(self, url: str, timeout_ms: int) -> None:
        timeout = timeout_ms / 1000
        try:
            self.client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout,
                                               retry=Retry(NoBackoff(), 0), health_check_interval=0)
        except ValueError as exc:
            # ConfigError hides the password; the cause would not
            raise ConfigError(f"bad Redis URL {url!r}: {exc}") from None
        self.url = redact_url(url)  # for logs: never the password
        self.begin = self.client.register_script(_BEGIN)
        self.abort = self.client.register_script(_ABORT)
        self.skip_until = 0.0

    def call(self, fn: Callable[[], Any]) -> Any:
        """``fn()``'s answer, or None when the node failed or is being skipped."""
        if time.monotonic() < self.skip_until:
            return None
        try:
            return fn()
        except (RedisError, OSError) as exc:
            log.warning("idempotent-consume: redis node %s failed: %s", self.url, exc)
            self.skip_until = time.monotonic() + 1.0
            return None


class IdempotentConsumer:
    """A listener wrapper that runs ``listener`` at most once per message id (see the module docstring).

    Parameters:
        consumer: the push consumer it listens for: its group, Redis nodes and key prefix
            name the marks, and whether it is orderly picks how a busy message waits.
        listener: the wrapped listener, orderly or concurrent.
        consuming_ttl_ms: life of a "consuming" mark; longer than any handler run or stall.
        consumed_ttl_ms: how long a handled message id is remembered (longer than re-delivery
            can happen: the retention of un-committed messages).
        socket_timeout_ms: longest wait for one Redis node.

    Raises:
        ConfigError: a TTL is not positive, or the consumer has no Redis nodes.

    >>> consumer.subscribe("orders", IdempotentConsumer(consumer, handle,
    ...                                                 consuming_ttl_ms=30_000))  # doctest: +SKIP
    """

    def __init__(self, consumer: PushConsumer, listener: Callable[[MessageExt], Any], *,
                 consuming_ttl_ms: int = 60_000, consumed_ttl_ms: int = 86_400_000,
                 socket_timeout_ms: int = 200) -> None:
        if not callable(listener):
            raise TypeError(f"listener must be callable, got {type(listener).__name__}")
        for name, value in (("consuming_ttl_ms", consuming_ttl_ms), ("consumed_ttl_ms", consumed_ttl_ms),
                            ("socket_timeout_ms", socket_timeout_ms)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"IdempotentConsumer.{name} must be a positive integer (ms), got {value!r}")
        self.listener = listener
        self.group = consumer.group_id
        self.orderly = consumer.orderly
        self.keys = consumer.settings.keys
        self.consuming_ttl_ms, self.consumed_ttl_ms = consuming_ttl_ms, consumed_ttl_ms
        self._nodes = [_Node(url, socket_timeout_ms) for url in consumer.settings.require_redis()]
        self.quorum = quorum(len(self._nodes))
        self._skipped = 0
        self._count = threading.Lock()

    def __call__(self, msg: MessageExt) -> Any:
        key = self.keys.consumed(self.group, msg.id)
        deadline = time.monotonic() + self.consuming_ttl_ms / 1000
        while True:
            mark = f"{_CONSUMING}{secrets.token_hex(8)}"
            begun = self._begin(key, mark)
            if begun.state is MarkState.CONSUMED:
                self._finish(key, begun.marked)  # repair nodes that had lost it
                with self._count:
                    self._skipped += 1
                log.info("idempotent-consume: %s was consumed already; skipped", msg.id,
                         extra={"msg_id": msg.id})
                return ConsumeOrderlyStatus.SUCCESS if self.orderly else ConsumeStatus.CONSUME_SUCCESS
            if begun.state is MarkState.OURS:
                break
            self._abort(key, mark, begun.marked)
            if self.orderly:  # the partition (or key) waits; reconsume_times does not grow
                return Suspend(begun.wait_ms, failed=False)
            if time.monotonic() >= deadline:
                return ConsumeStatus.RECONSUME_LATER
            time.sleep(min(begun.wait_ms, 1000) / 1000)
        try:
            result = self.listener(msg)
        except BaseException:
            self._abort(key, mark, begun.marked)
            raise
        if _failed(result):
            self._abort(key, mark, begun.marked)
        else:
            self._finish(key, range(len(self._nodes)))
        return result

    @property
    def skipped(self) -> int:
        """Messages acknowledged without running the listener: they were consumed already."""
        return self._skipped

    def state(self, msg_id: str) -> MarkState | None:
        """The marks of ``msg_id`` now: CONSUMED (on any node), BUSY (a live consuming mark) or None."""
        key = self.keys.consumed(self.group, msg_id)
        values = [node.call(lambda: node.client.get(key)) for node in self._nodes]
        if any(v == CONSUMED for v in values):
            return MarkState.CONSUMED
        return MarkState.BUSY if any(v for v in values) else None

    def close(self) -> None:
        """Close its Redis connections (the marks stay until they expire)."""
        for node in self._nodes:
            node.client.close()

    # -- rounds ----------------------------------------------------------------------
    def _begin(self, key: str, mark: str) -> _Begin:
        answers = [node.call(lambda: node.begin(keys=[key], args=[mark, self.consuming_ttl_ms]))
                   for node in self._nodes]
        return decide(answers, self.quorum)

    def _finish(self, key: str, nodes: range | list[int]) -> None:
        """Mark consumed where given; keeps trying (bounded) until a quorum stored it."""
        pending = list(nodes)
        stored = 0
        for attempt in range(10):
            failed = []
            for i in pending:
                node = self._nodes[i]
                ok = node.call(lambda: node.client.set(key, CONSUMED, px=self.consumed_ttl_ms))
                if ok:
                    stored += 1
                else:
                    failed.append(i)
            if stored >= self.quorum or not failed:
                return
            pending = failed
            time.sleep(0.05 * (attempt + 1))
        log.error("idempotent-consume: could not record %s as consumed on a quorum; a re-delivery may run "
                  "it again", key)

    def _abort(self, key: str, mark: str, nodes: list[int]) -> None:
        for i in nodes:
            node = self._nodes[i]
            node.call(lambda: node.abort(keys=[key], args=[mark]))


def decide(answers: list[Any], needed: int) -> _Begin:
    """What the BEGIN answers of all nodes (``None``: no answer) mean, given the quorum ``needed``.

    A "consumed" anywhere wins (it is only ever written after the listener returned);
    otherwise the message is ours where a quorum took our mark; otherwise it is busy --
    for as long as the shortest other mark lives, or briefly when too few nodes answered.

    >>> decide([[b"", 0], [b"", 0], None], 2).state
    <MarkState.OURS: 'ours'>
    >>> decide([[b"", 0], [b"consuming:x", 700], None], 2).wait_ms
    700
    """
    marked, consumed, waits = [], False, []
    for i, answer in enumerate(answers):
        if answer is None:
            continue
        state, pttl = answer
        if state == b"":
            marked.append(i)
        elif state == CONSUMED:
            consumed = True
        else:
            waits.append(max(int(pttl), 1))
    if consumed:
        return _Begin(MarkState.CONSUMED, marked, 0)
    if len(marked) >= needed:
        return _Begin(MarkState.OURS, marked, 0)
    return _Begin(MarkState.BUSY, marked, min(waits) if waits else BUSY_RETRY_MS)


def _failed(result: Any) -> bool:
    """Whether a listener result asks for the message again (so it must not count as consumed)."""
    return (result is ConsumeStatus.RECONSUME_LATER
            or result is ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            or isinstance(result, Suspend))
