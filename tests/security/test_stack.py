"""The secured backend itself: TLS only, SCRAM users, ACLs refusing by default, Redis TLS with ACL users."""

from __future__ import annotations

import pytest
import redis
from confluent_kafka.admin import AdminClient

pytestmark = [pytest.mark.integration, pytest.mark.rk_needs("secure")]


def test_a_user_sees_only_what_its_acls_allow(rk_user, rk_topic, rk_settings):
    allowed, hidden = rk_topic(partitions=1), rk_topic(partitions=1)
    user = rk_user(acls=[("TOPIC", allowed, "LITERAL", "DESCRIBE")])
    admin = AdminClient(user.settings.kafka_config())
    try:
        listed = admin.list_topics(timeout=30).topics
    finally:
        del admin
    assert allowed in listed and hidden not in listed


def test_a_redis_user_without_a_rule_cannot_log_in(rk_user):
    user = rk_user()
    with redis.Redis.from_url(user.settings.redis_urls[0]) as node, pytest.raises(redis.AuthenticationError):
        node.ping()


def test_the_secret_scan_finds_a_leak():
    """The scan is not blind: a password printed on purpose is found (checked on the scan's own function)."""
    from tests.security.conftest import leaked_in, remember_secret

    remember_secret("s3cret-for-the-scan")
    assert leaked_in("password=s3cret-for-the-scan in a log line") == ["s3..."]
    assert leaked_in("nothing here") == []
