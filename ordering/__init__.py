"""Ordered consumption on Kafka: the ownership engine and the consumers on it.

- :class:`PushConsumer`: RocketMQ's push consumer (concurrent, orderly, key-ordered; batch listeners);
- :class:`IdempotentConsumer`: a listener runs at most once per message id, even across crashes;
- :class:`OwnershipEngine`: membership, allocation, the Redis lock table, fetching, flow control and
  commits -- the one poll loop the push consumer, the drop-in consumer, the delay forwarder and the
  transaction checker all run on, each with its own :class:`Step`;
- :class:`LockTable`, :class:`Membership` and the allocation strategies it is built from.
"""

from rocketkafka.ordering.allocation import (
    AllocationStrategy,
    Averagely,
    AveragelyByCircle,
    ByConfig,
    ConsistentHash,
    MachineRoomNearby,
    Member,
    strategy_named,
)
from rocketkafka.ordering.engine import OwnershipEngine
from rocketkafka.ordering.owned import PartitionState
from rocketkafka.ordering.idempotent import IdempotentConsumer, MarkState
from rocketkafka.ordering.lifecycle import Health, State
from rocketkafka.ordering.message_batch import BatchFailure, MessageBatch
from rocketkafka.ordering.locks import Held, LockSettings, LockTable
from rocketkafka.ordering.membership import Membership, MembershipSettings
from rocketkafka.ordering.metrics import ConsumerMetrics, PartitionSample
from rocketkafka.ordering.options import ConsumerOptions, OwnershipOptions
from rocketkafka.ordering.order_keys import MESSAGE_KEY, PARTITION, order_key_of, parse_json_path
from rocketkafka.ordering.push_consumer import PushConsumer
from rocketkafka.ordering.step import Claim, ClaimContext, Step
from rocketkafka.ordering.lanes import BatchHandler, Outcome, Run

__all__ = [
    "MESSAGE_KEY",
    "PARTITION",
    "AllocationStrategy",
    "Averagely",
    "AveragelyByCircle",
    "BatchFailure",
    "BatchHandler",
    "ByConfig",
    "Claim",
    "ClaimContext",
    "ConsistentHash",
    "ConsumerMetrics",
    "ConsumerOptions",
    "Health",
    "Held",
    "IdempotentConsumer",
    "LockSettings",
    "LockTable",
    "MachineRoomNearby",
    "MarkState",
    "Member",
    "Membership",
    "MembershipSettings",
    "MessageBatch",
    "Outcome",
    "OwnershipEngine",
    "OwnershipOptions",
    "PartitionSample",
    "PartitionState",
    "PushConsumer",
    "Run",
    "State",
    "Step",
    "order_key_of",
    "parse_json_path",
    "strategy_named",
]
