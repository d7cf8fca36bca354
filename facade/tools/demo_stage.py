"""What every demo step works with: the stack's settings, the report, and fresh names for topics and groups."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from rocketkafka.admin import TopicAdmin
from rocketkafka.config import Settings
from rocketkafka.tools.demo_report import DemoReport

#: Consumer timings for the demo, as the project's crash tests use them: membership and locks react within
#: seconds instead of RocketMQ's 20-60 s (a crashed member's partitions move once its lease has run out).
#: Each step sends before or while it consumes, so a new group starts from the first offset.
FAST: dict[str, Any] = {
    "consume_from_where": "CONSUME_FROM_FIRST_OFFSET", "heartbeat_interval_ms": 200, "member_timeout_ms": 2000,
    "lock_lease_ms": 3000, "lock_renew_interval_ms": 1000, "lock_client_expiry_ms": 2000,
    "rebalance_interval_ms": 2000, "commit_interval_ms": 200,
}


@dataclass
class Stage:
    """The embedded stack as the steps see it."""

    settings: Settings
    report: DemoReport
    messages: int

    def name(self, prefix: str) -> str:
        """A group or topic name no earlier run used (the stack is fresh, but names read better unique)."""
        return f"{prefix}-{uuid.uuid4().hex[:4]}"

    def topic(self, prefix: str, partitions: int) -> str:
        """Create a fresh topic (rocketkafka never auto-creates one)."""
        topic = self.name(prefix)
        admin = TopicAdmin(self.settings)
        try:
            admin.create(topic, partitions=partitions)
        finally:
            admin.close()
        return topic
