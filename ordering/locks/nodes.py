"""The lock table's transport: N independent Redis nodes, one script on all of them per round.

A round packs its command once and sends the same bytes to every node, each from a
thread of its own, and waits at most ``socket_timeout_ms``: a node that is down, slow
or refusing is a no-vote, and a slow node delays only itself. Packing once matters:
claiming a thousand locks is six thousand arguments, and packing them again per
node would cost more than the round trip.

Each node has a connection of its own (not a pool's): its thread is its only user.
Only public ``redis.Connection`` methods are used -- ``pack_command``,
``send_packed_command``, ``read_response``, ``disconnect`` -- which redis-py keeps the
same on every version we allow; ``pack_command`` uses hiredis when it is installed.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError

from rocketkafka.errors import ConfigError, RedisAuthError
from rocketkafka.logs import redact_url
from rocketkafka.refusals import is_redis_permission, redis_credentials_reason, redis_refusal
from rocketkafka.ordering.locks import scripts

log = logging.getLogger(__name__)

#: The scripts a lock table runs, by name.
SCRIPTS = {name: getattr(scripts, name) for name in ("CLAIM", "RENEW", "FENCE", "RELEASE", "DESCRIBE")}
#: Their SHA1 digests, as ``SCRIPT LOAD`` answers them (EVALSHA needs no load round trip while cached).
SHAS = {name: hashlib.sha1(text.encode()).hexdigest() for name, text in SCRIPTS.items()}


class LockNode:
    """One Redis node of the lock table: a dedicated connection, and a thread that runs its calls in order.

    Parameters:
        index: the node's position in the table (for logs and thread names).
        url: ``redis://``, ``rediss://`` (TLS) or ``unix://`` URL; credentials and TLS options in the
            URL apply (the password never appears in logs or errors).
        timeout_s: socket connect and read timeout.

    Raises:
        ConfigError: the URL does not parse.
    """

    def __init__(self, index: int, url: str, timeout_s: float) -> None:
        self.index, self.name = index, redact_url(url)
        try:
            pool = redis.ConnectionPool.from_url(url, socket_timeout=timeout_s,
                                                 socket_connect_timeout=timeout_s, health_check_interval=0)
        except ValueError as exc:
            raise ConfigError(f"bad Redis URL {self.name!r}: {redact_url(str(exc))}") from None
        self.connection = pool.connection_class(**pool.connection_kwargs)
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"rk-lock-node{index}")
        self.answering = True  # for logging changes only
        if url.startswith("rediss://"):  # a TLS handshake may outlast a round: made now, not in the first round
            self.executor.submit(self._connect)

    def _connect(self) -> None:
        try:
            self.connection.connect()
        except (RedisError, OSError) as exc:  # the first round connects again, and says what fails
            log.debug("redis node %s: connecting ahead failed: %s", self.name, exc)

    def call(self, script: str, command: list[bytes], deadline: float) -> Any:
        """Send a packed ``EVALSHA`` of ``script``; loads the script once when the node lost it (restart).

        A connection the server closed (a restarted node) is noticed only when used: the call is
        made once more on a fresh one, which is safe -- every script is idempotent for its tokens.
        """
        if time.monotonic() >= deadline:
            raise TimeoutError(f"redis node {self.name}: round deadline passed before the call started")
        try:
            return self._call(script, command)
        except RedisConnectionError:
            if time.monotonic() >= deadline:
                raise
            return self._call(script, command)

    def _call(self, script: str, command: list[bytes]) -> Any:
        conn = self.connection
        try:
            try:
                conn.send_packed_command(command)
                return conn.read_response()
            except NoScriptError:
                conn.send_packed_command(conn.pack_command("SCRIPT", "LOAD", SCRIPTS[script]))
                conn.read_response()
                conn.send_packed_command(command)
                return conn.read_response()
        except BaseException:
            conn.disconnect()  # a half-read answer must not be read by the next call
            raise

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)
        self.connection.disconnect()


class LockNodes:
    """The table's nodes; :meth:`round` runs one script on all of them at once.

    Raises:
        ConfigError: a URL does not parse (nodes opened so far are closed again).
    """

    def __init__(self, urls: Sequence[str], socket_timeout_ms: int) -> None:
        self.timeout_s = socket_timeout_ms / 1000
        self.nodes: list[LockNode] = []
        #: nodes that refused us in the last round (``NOPERM``, credentials, TLS): name -> the error
        self.refused: dict[str, BaseException] = {}
        try:
            for i, url in enumerate(urls):
                self.nodes.append(LockNode(i, url, self.timeout_s))
        except BaseException:
            self.close()
            raise

    def __len__(self) -> int:
        return len(self.nodes)

    def pack(self, script: str, keys: Sequence[str], args: Sequence[str]) -> list[bytes]:
        """``EVALSHA script`` packed once, to send the same bytes to every node."""
        return self.nodes[0].connection.pack_command("EVALSHA", SHAS[script], len(keys), *keys, *args)

    def round(self, script: str, keys: Sequence[str], args: Sequence[str]) -> list[Any]:
        """``EVALSHA script`` on every node in parallel; one answer per node, ``None`` where it failed or was
        late."""
        command = self.pack(script, keys, args)
        return self.run(script, lambda _index, node, deadline: node.call(script, command, deadline))

    def run(self, label: str, call: Callable[[int, LockNode, float], Any]) -> list[Any]:
        """``call(index, node, deadline)`` on every node's thread at once (one script, or a script and the one
        its answer asks for); one answer per node, ``None`` where it failed or was late. ``label`` names the
        round in logs."""
        deadline = time.monotonic() + self.timeout_s
        futures: list[Future] = [node.executor.submit(call, i, node, deadline) for i, node in enumerate(self.nodes)]
        wait(futures, timeout=max(0.0, deadline - time.monotonic()))
        answers = [self._answer(node, future, label) for node, future in zip(self.nodes, futures)]
        self.refused = {node.name: error for node, future in zip(self.nodes, futures)
                        if future.done() and (error := future.exception()) is not None
                        and (is_redis_permission(error) or redis_credentials_reason(error) is not None)}
        return answers

    def all_answered(self) -> bool:
        """Whether every node answered the last round (refusing counts as an answer)."""
        return all(node.answering or node.name in self.refused for node in self.nodes)

    def undecided(self, quorum: int) -> bool:
        """Whether nodes that did not answer the last round could still make it a refusal: fewer than ``quorum``
        answered without refusing, and some did not answer at all (a TLS handshake still going, a node down)."""
        granted = sum(1 for node in self.nodes if node.answering and node.name not in self.refused)
        return granted < quorum and not self.all_answered()

    def refusal(self, quorum: int, action: str, keys: Sequence[str], pattern: str) -> RedisAuthError | None:
        """The error to raise when the last round's refusals leave no quorum (``NOPERM`` on a key or a
        command, refused credentials or TLS: no wait mends them), naming ``keys`` and the ``pattern``
        needed; ``None`` while a quorum may still answer."""
        if not self.refused or len(self.refused) <= len(self.nodes) - quorum:
            return None
        return redis_refusal(self.refused, action, "EVALSHA", list(keys), pattern, next(iter(self.refused)))

    def _answer(self, node: LockNode, future: Future, script: str) -> Any:
        if not future.done():
            problem: BaseException | str | None = f"no answer within {self.timeout_s * 1000:g} ms"
        else:
            problem = future.exception()
            if problem is not None and not isinstance(problem, (RedisError, OSError)):
                log.error("redis node %s: %s failed", node.name, script, exc_info=problem)
        if problem is not None and node.answering:
            refused = isinstance(problem, BaseException) and (is_redis_permission(problem)
                                                             or redis_credentials_reason(problem) is not None)
            log.warning("redis node %s %s the lock table (%s): %s", node.name,
                        "refused" if refused else "stopped answering", script, problem)
        elif problem is None and not node.answering:
            log.info("redis node %s answers the lock table again", node.name)
        node.answering = problem is None
        return None if problem is not None else future.result()

    def close(self) -> None:
        for node in self.nodes:
            try:
                node.close()
            except Exception:  # closing is best effort
                log.debug("closing redis node %s failed", node.name, exc_info=True)
