"""The lock table belongs to its users: a Redis user without its key pattern cannot take, renew or release a lock
(NOPERM, named, at once -- not a hang, not a silent "no lock"), and fencing keeps commits safe if a lock is taken
anyway.

Fencing, more fully: tests/ordering/test_lock_table.py (tokens strictly increase, across a node that restarted
empty; a stale unlock never releases the new owner's lock) and tests/ordering/test_exactly_once.py (the broker
itself fences a zombie's transaction by the partition's transactional id).
"""

from __future__ import annotations

import pytest
import redis
from confluent_kafka import Consumer, TopicPartition

from rocketkafka import AuthorizationError, PushConsumer
from rocketkafka.errors import RedisPermissionError
from rocketkafka.names import Header, RedisKeys
from rocketkafka.ordering.engine.commits import due_offsets
from rocketkafka.ordering.locks import LockSettings, LockTable
from rocketkafka.ordering.engine.owned import OwnedLock
from rocketkafka.testing.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.rk_needs("secure")]

SHORT = LockSettings(lease_ms=3000, renew_interval_ms=1000, client_expiry_ms=2000)


def _lock_keys(rk_settings, group: str) -> list[bytes]:
    with redis.Redis.from_url(rk_settings.redis_urls[0]) as node:
        return node.keys(f"{rk_settings.redis_prefix}:{{{group}}}:lock:*")


def test_a_redis_user_with_another_key_pattern_gets_noperm_named_and_no_lock(rk_user, rk_settings, rk_group):
    user = rk_user(redis_rule=["~elsewhere:*", "+@all"])
    table = LockTable(user.settings.redis_urls, rk_group, "owner-1", RedisKeys(rk_settings.redis_prefix))
    refused: list[RedisPermissionError] = []

    def refused_now() -> bool:  # a node still making its TLS connection counts as not answering: ask again
        try:
            assert table.lock_batch([("orders", 0)]) == {}
        except RedisPermissionError as exc:
            refused.append(exc)
        return bool(refused)
    try:
        assert wait_for(refused_now, 10)
    finally:
        table.close()
    refusal = refused[0]
    assert isinstance(refusal, AuthorizationError) and refusal.code_name == "NOPERM" and refusal.system == "redis"
    assert refusal.principal == f"Redis user {user.name!r}"
    assert refusal.resource == f"{rk_settings.redis_prefix}:{{{rk_group}}}:lock:orders:0"
    assert f"needs the key pattern ~{rk_settings.redis_prefix}:{{{rk_group}}}:*" in str(refusal)
    assert user.password not in str(refusal)
    assert _lock_keys(rk_settings, rk_group) == []  # no lock, anywhere


@pytest.mark.parametrize("rule, refused_key", [
    (["~elsewhere:*", "&*", "+@all"], "members"),  # nothing of the group: the membership heartbeat says it first
    (["~{prefix}:{{{group}}}:member*", "&*", "+@all"], "lock"),  # membership, but not the lock table
])
def test_a_push_consumer_whose_user_lacks_the_pattern_is_refused_at_start(rk_user, rk_settings, rk_topic, rk_group,
                                                                         rule, refused_key):
    topic = rk_topic(partitions=2)
    user = rk_user(acls=[], redis_rule=[r.format(prefix=rk_settings.redis_prefix, group=rk_group) for r in rule])
    settings = user.settings.model_copy(update={"kafka": rk_settings.kafka})  # Kafka as the super user: Redis alone
    consumer = PushConsumer(rk_group, settings=settings, orderly=True)
    consumer.subscribe(topic, lambda msg: None)
    with pytest.raises(RedisPermissionError) as info:
        consumer.start()
    assert f":{refused_key}" in info.value.resource and "NOPERM" in str(info.value), str(info.value)
    assert consumer.state.value == "closed"
    assert _lock_keys(rk_settings, rk_group) == []


class _Done:
    """A claim that has finished everything below ``offset``."""

    def __init__(self, tp, offset: int) -> None:
        self.tp, self.offset = tp, offset

    def positions(self):
        return {self.tp: self.offset}


def test_an_owner_whose_lock_was_taken_commits_nothing_more_and_the_new_token_is_larger(
        rk_user, rk_settings, rk_topic, rk_group):
    topic = rk_topic(partitions=1)
    tp = (topic, 0)
    pattern = f"~{rk_settings.redis_prefix}:{{{rk_group}}}:*"
    owner = rk_user(acls=[("TOPIC", topic, "LITERAL", "READ"), ("GROUP", rk_group, "LITERAL", "READ")],
                    redis_rule=[pattern, "+@all"])
    keys = RedisKeys(rk_settings.redis_prefix)
    a = LockTable(owner.settings.redis_urls, rk_group, "owner-a", keys, SHORT)
    b = LockTable(rk_settings.redis_urls, rk_group, "intruder-b", keys, SHORT)  # the super user: any key
    kafka = Consumer(owner.settings.kafka_config(**{"group.id": rk_group, "enable.auto.commit": False}))
    try:
        # a node's first round also makes its TLS connection, which may outlast a round: ask until won
        assert wait_for(lambda: a.lock_batch([tp]), 10)
        held = a.held()[tp]
        owned = OwnedLock(tp, _Done(tp, 0), (tp,), held.fencing_token)
        kafka.commit(offsets=due_offsets([owned], a.is_held), asynchronous=False)
        # "somehow": a party that may write any key drops A's lease (its session and entries) and takes the lock
        for url in rk_settings.redis_urls:
            with redis.Redis.from_url(url) as node:
                node.delete(keys.lock(rk_group, *tp), keys.session(rk_group, "owner-a"))
        assert wait_for(lambda: b.lock_batch([tp]), 10)
        taken = b.held()[tp]
        assert taken.fencing_token > held.fencing_token
        assert a.renew_batch() == {tp}  # A's next renewal finds the entry not its own: A stops
        owned.claim = _Done(tp, 5)
        assert due_offsets([owned], a.is_held) == []  # so A's commit of 5 is never sent
        committed = kafka.committed([TopicPartition(*tp)], timeout=10)[0]
        assert committed.offset == 0 and committed.metadata == f"{Header.FENCING_TOKEN}={held.fencing_token}"
    finally:
        kafka.close()
        a.close()
        b.close()
