"""Ordered consumption on Kafka: the ownership engine and the consumers on it.

- :class:`PushConsumer`: RocketMQ's push consumer (concurrent, orderly, key-ordered; batch listeners);
- :class:`IdempotentConsumer`: a listener runs at most once per message id, even across crashes;
- :class:`OwnershipEngine`: membership, allocation, the Redis lock table, fetching, flow control and
  commits -- the one poll loop the push consumer, the drop-in consumer, the delay forwarder and the
  transaction checker all run on, each with its own :class:`Step`;
- :class:`LockTable`, :class:`Membership` and the allocation strategies it is built from.
"""

from rocketkafka.ordering.group.allocation import (
    AllocationStrategy,
    Averagely,
    AveragelyByCircle,
    ByConfig,
    ConsistentHash,
    MachineRoomNearby,
    Member,
    strategy_named,
)
from rocketkafka.ordering.engine.engine import OwnershipEngine
from rocketkafka.ordering.engine.owned import PartitionState
from rocketkafka.ordering.consumers.idempotent import IdempotentConsumer, MarkState
from rocketkafka.ordering.engine.lifecycle import Health, State
from rocketkafka.ordering.consumers.message_batch import BatchFailure, MessageBatch
from rocketkafka.ordering.locks import Held, LockSettings, LockTable
from rocketkafka.ordering.group.membership import Membership, MembershipSettings
from rocketkafka.ordering.engine.metrics import ConsumerMetrics, PartitionSample
from rocketkafka.ordering.engine.options import ConsumerOptions, OwnershipOptions
from rocketkafka.ordering.work.order_keys import MESSAGE_KEY, PARTITION, order_key_of, parse_json_path
from rocketkafka.ordering.consumers.push_consumer import PushConsumer
from rocketkafka.ordering.work.step import Claim, ClaimContext, Step
from rocketkafka.ordering.work.lanes import BatchHandler, Outcome, Run

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
