"""Group membership in Redis: heartbeats, the live member list, and join/leave announcements.

Each member writes its heartbeat to every Redis node (a sorted set scored by the
node's own clock, so member clocks never matter) and announces joins and leaves on
a pub/sub channel, so every member re-runs allocation at once. A member is live
when any reachable node saw its heartbeat within ``member_timeout_ms``; one node
down changes nothing.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

import redis

from rocketkafka.errors import (AuthenticationError, AuthorizationError, RedisAuthError, RedisUnavailableError,
                                StateError)
from rocketkafka.logs import redact_url
from rocketkafka.refusals import REFUSALS, redis_refusal
from rocketkafka.names import RedisKeys
from rocketkafka.ordering.group.allocation import Member

log = logging.getLogger(__name__)

# KEYS[1] members zset, KEYS[2] info hash; ARGV[1] member id, ARGV[2] info json, ARGV[3] timeout ms.
# Records the heartbeat at the node's clock, drops members silent for longer than the timeout,
# and returns the live members as a flat list [id, info, id, info, ...].
_HEARTBEAT = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))
for _, id in ipairs(dead) do redis.call('HDEL', KEYS[2], id) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))
local live = redis.call('ZRANGE', KEYS[1], 0, -1)
local out = {}
for _, id in ipairs(live) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[2], id) or '{}'
end
return out
"""


#: How long a listener waits for an announcement before it looks whether the member closed (s): an idle member's
#: listeners wake this rarely, and :meth:`Membership.close` wakes them at once with a :data:`CLOSING` message.
LISTEN_WAIT_S = 0.9  # below close()'s 1 s: a listener the closing message cannot reach (a node paused) still ends
#: The announcement a closing member sends its own listeners (the other members' ignore it: it changes nothing).
CLOSING = "closing"


@dataclass(frozen=True)
class MembershipSettings:
    """Timings of membership (ms)."""

    heartbeat_interval_ms: int = 1000
    member_timeout_ms: int = 10000

    def __post_init__(self) -> None:
        if self.heartbeat_interval_ms <= 0 or self.member_timeout_ms <= 2 * self.heartbeat_interval_ms:
            raise ValueError("member_timeout_ms must exceed two heartbeat intervals, both positive")


def is_auth_error(exc: BaseException) -> bool:
    """True when Redis refused the credentials (``WRONGPASS``, ``NOAUTH``, ``NOPERM``) rather than not
    answering."""
    return isinstance(exc, (redis.AuthenticationError, redis.exceptions.NoPermissionError)) or \
        isinstance(exc, redis.ResponseError) and \
        str(exc).upper().startswith(("NOAUTH", "WRONGPASS", "NOPERM"))


class Membership:
    """Registers one member of a group and tells who is live.

    Parameters:
        redis_urls: the Redis nodes (all of them get every heartbeat).
        group: consumer group name.
        member: this member (id and machine room).
        on_change: called (from a background thread) when a join or leave is announced.
        info: what else the member tells operators (client kind, allocation, topics, host, pid);
            stored beside its heartbeat as JSON (:func:`read_members`).
    """

    def __init__(self, redis_urls: list[str], group: str, member: Member, keys: RedisKeys,
                 settings: MembershipSettings = MembershipSettings(),
                 on_change: Callable[[], None] | None = None, info: Mapping[str, Any] | None = None) -> None:
        self.group, self.member, self.settings = group, member, settings
        self._clients = [redis.Redis.from_url(u, socket_timeout=0.5, socket_connect_timeout=0.5)
                         for u in redis_urls]
        self._names = [redact_url(u) for u in redis_urls]  # for errors and logs: never the password
        self._pattern = f"{keys.prefix}:{{{group}}}:*"  # the key pattern an ACL user needs for the group
        self._scripts = [c.register_script(_HEARTBEAT) for c in self._clients]
        self._keys = (keys.members(group), keys.member_info(group))
        self._channel = keys.membership_channel(group)
        self._pool = ThreadPoolExecutor(max_workers=len(self._clients), thread_name_prefix="rk-members")
        self._on_change = on_change
        self._stop = threading.Event()
        self._beat = threading.Lock()  # heartbeat vs leave
        self._listeners: list[threading.Thread] = []
        self._info = json.dumps({**(info or {}), "room": member.room})
        #: ``{node URL without password: problem}`` of the nodes the last heartbeat did not reach.
        self.problems: dict[str, str] = {}

    def join(self) -> list[Member]:
        """Heartbeat once, then start listening for announcements and announce the join; returns live members.

        The first heartbeat comes before any thread starts, so a join that fails leaves nothing running.

        Raises:
            RedisAuthError: no node took the heartbeat and some refused the credentials (wrong
                password, unknown ACL user, or one without the permissions needed).
            RedisUnavailableError: no node answered (down, unreachable, wrong address).
        """
        members = self.heartbeat()
        # some nodes answer: go on (the lock table needs a quorum, not all), but say which do not
        if self.problems:
            log.warning("joining group %s: %d of %d Redis nodes did not answer: %s", self.group,
                        len(self.problems), len(self._clients),
                        "; ".join(f"{n}: {p}" for n, p in self.problems.items()))
        for client in self._clients:
            t = threading.Thread(target=self._listen, args=(client,), daemon=True, name="rk-members-listen")
            t.start()
            self._listeners.append(t)
        self._publish("join")
        return members

    def heartbeat(self) -> list[Member]:
        """Record this member's heartbeat on every node; returns the live members (union of answering nodes).

        Raises:
            StateError: the member has left (a heartbeat now would register it again).
            RedisAuthError: no node took it, and some refused the credentials.
            RedisUnavailableError: no node answered.
        """
        with self._beat:
            if self._stop.is_set():
                raise StateError(f"member {self.member.id} has left group {self.group}")
            return self._heartbeat()

    def _heartbeat(self) -> list[Member]:
        futures = [self._pool.submit(s, keys=list(self._keys),
                                     args=[self.member.id, self._info, self.settings.member_timeout_ms])
                   for s in self._scripts]
        live: dict[str, Member] = {}
        problems: dict[str, str] = {}
        errors: dict[str, BaseException] = {}
        for name, future in zip(self._names, futures):
            try:
                flat = future.result()
            except (redis.RedisError, OSError) as exc:
                log.debug("heartbeat to Redis node %s failed: %s", name, exc)
                problems[name] = redact_url(f"{type(exc).__name__}: {exc}")
                errors[name] = exc
                continue
            for i in range(0, len(flat), 2):
                mid = flat[i].decode()
                room = json.loads(flat[i + 1] or b"{}").get("room", "")
                live[mid] = Member(mid, room)
        self.problems = problems
        if len(problems) == len(futures):
            action = f"membership heartbeat of group {self.group!r}"
            refused = redis_refusal(errors, action, "EVALSHA", list(self._keys), self._pattern, self._names[0])
            if refused is None and any(is_auth_error(exc) for exc in errors.values()):
                refused = RedisAuthError(problems, action)
            raise refused or RedisUnavailableError(problems, action)
        return sorted(live.values())

    def refresh(self, known: list[Member]) -> list[Member] | None:
        """Heartbeat; the live members when they differ from ``known``, else None (also when no node
        answered)."""
        try:
            members = self.heartbeat()
        except StateError:
            return None  # shutting down: we left the group
        except (AuthorizationError, AuthenticationError) as exc:  # said once a minute, not every heartbeat
            REFUSALS.note(exc, f"member {self.member.id} of group {self.group}")
            return None
        except Exception as exc:
            log.warning("membership heartbeat failed: %s", exc)
            return None
        return members if members != known else None

    def leave(self) -> None:
        """Remove this member everywhere and announce it, so the others rebalance at once."""
        self._stop.set()
        with self._beat:  # a heartbeat in flight must not register us again after the removal
            for client in self._clients:
                try:
                    client.zrem(self._keys[0], self.member.id)
                    client.hdel(self._keys[1], self.member.id)
                except redis.RedisError:
                    pass
        self._publish("leave")

    def close(self, timeout: float = 1.0) -> None:
        """Stop the announcement listeners and close the clients (after :meth:`leave`)."""
        deadline = time.monotonic() + timeout
        self._stop.set()
        self._publish(CLOSING)  # wakes this member's listeners now rather than after their wait; others ignore it
        for thread in self._listeners:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._pool.shutdown(wait=True)  # its threads are idle or finish within the socket timeout
        for client in self._clients:
            client.close()

    def _publish(self, event: str) -> None:
        payload = json.dumps({"event": event, "member": self.member.id})
        for client in self._clients:
            try:
                client.publish(self._channel, payload)
            except redis.RedisError:
                pass

    def _listen(self, client: redis.Redis) -> None:
        """Follow one node's announcements, reconnecting while the member lives."""
        while not self._stop.is_set():
            try:
                pubsub = client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(self._channel)
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=LISTEN_WAIT_S)
                    if message and self._on_change:
                        announced = json.loads(message["data"])
                        if announced.get("member") != self.member.id and announced.get("event") != CLOSING:
                            self._on_change()
                pubsub.close()
            except (redis.RedisError, OSError, ValueError):
                self._stop.wait(0.5)


def member_info(client: str, strategy: object, topics: Iterable[str]) -> dict[str, Any]:
    """What a member tells operators beside its heartbeat (``rocketkafka admin consumer-status``)."""
    return {"client": client, "allocation": getattr(strategy, "name", type(strategy).__name__),
            "topics": list(topics), "host": socket.gethostname(), "pid": os.getpid(),
            "started_ms": int(time.time() * 1000)}


@dataclass(frozen=True)
class MemberView:
    """A member as an operator sees it: id, what it told (:class:`Membership` ``info``), heartbeat age."""

    id: str
    info: dict[str, Any]
    heartbeat_age_ms: int


def read_members(redis_urls: list[str], group: str, keys: RedisKeys) -> list[MemberView]:
    """The members of ``group`` that some Redis node lists, freshest heartbeat per member (for admin views).

    Raises:
        redis.ConnectionError: no node answered.
    """
    seen: dict[str, MemberView] = {}
    answered = 0
    for url in redis_urls:
        client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        try:
            seconds, micros = client.time()
            now = seconds * 1000 + micros // 1000
            beats = client.zrange(keys.members(group), 0, -1, withscores=True)
            infos = client.hgetall(keys.member_info(group))
        except redis.RedisError as exc:
            log.debug("reading members from %s failed: %s", redact_url(url), exc)
            continue
        finally:
            client.close()
        answered += 1
        for raw, score in cast(list[tuple[bytes, float]], beats):  # withscores, no decode_responses
            mid = raw.decode()
            view = MemberView(mid, json.loads(infos.get(raw) or b"{}"), max(0, now - int(score)))
            if mid not in seen or view.heartbeat_age_ms < seen[mid].heartbeat_age_ms:
                seen[mid] = view
    if not answered:
        raise redis.ConnectionError(redact_url(f"no Redis node of {redis_urls} answered"))
    return sorted(seen.values(), key=lambda m: m.id)
