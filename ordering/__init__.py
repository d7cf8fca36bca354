"""Ownership machinery: membership, allocation, the Redis lock table, and the push consumer modes."""

from ordering.allocation import (
    AllocationStrategy,
    Averagely,
    AveragelyByCircle,
    ByConfig,
    ConsistentHash,
    MachineRoomNearby,
    Member,
    strategy_named,
)
from ordering.locks import Held, LockRenewer, LockSettings, LockTable, bench_renew
from ordering.membership import Membership, MembershipSettings
from ordering.options import ConsumerOptions
from ordering.push_consumer import PushConsumer, Subscription

__all__ = sorted([
    "AllocationStrategy", "Averagely", "AveragelyByCircle", "ByConfig", "ConsistentHash", "ConsumerOptions", "Held",
    "LockRenewer", "LockSettings", "LockTable", "MachineRoomNearby", "Member", "Membership", "MembershipSettings",
    "PushConsumer", "Subscription", "bench_renew", "strategy_named",
])
