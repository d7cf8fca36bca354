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
from ordering.options import ConsumerOptions
from ordering.push_consumer import PushConsumer, Subscription

__all__ = sorted([
    "AllocationStrategy", "Averagely", "AveragelyByCircle", "ByConfig", "ConsistentHash", "ConsumerOptions",
    "MachineRoomNearby", "Member", "PushConsumer", "Subscription", "strategy_named",
])
