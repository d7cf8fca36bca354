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
from ordering.idempotent import IdempotentConsumer, MarkState
from ordering.key_ordered import KeyOrderedDispatch
from ordering.locks import Held, LockRenewer, LockSettings, LockTable, bench_renew
from ordering.membership import Membership, MembershipSettings
from ordering.metrics import ConsumerMetrics, PartitionSample
from ordering.options import ConsumerOptions
from ordering.order_keys import MESSAGE_KEY, PARTITION, order_key_of, parse_json_path
from ordering.orderly import OrderlyDispatch
from ordering.push_consumer import PushConsumer, Subscription

__all__ = sorted([
    "AllocationStrategy", "Averagely", "AveragelyByCircle", "ByConfig", "ConsistentHash", "ConsumerMetrics",
    "ConsumerOptions", "Held",
    "IdempotentConsumer", "KeyOrderedDispatch", "LockRenewer", "LockSettings", "LockTable", "MESSAGE_KEY",
    "MachineRoomNearby", "MarkState", "Member", "Membership", "MembershipSettings", "OrderlyDispatch", "PARTITION",
    "PartitionSample",
    "PushConsumer", "Subscription", "bench_renew", "order_key_of", "parse_json_path", "strategy_named",
])
