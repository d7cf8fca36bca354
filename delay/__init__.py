"""The timer forwarder (RocketMQ's ``ScheduleMessageService`` on Kafka): delayed records to their real topic when due.

Producers route delayed messages onto the internal level and step topics
(:mod:`rocketkafka.schedule`); :class:`DelayForwarder` (``rocketkafka delay-forwarder``)
moves each to its real topic and partition when it is due.
"""

from rocketkafka.delay.forwarder import DEFAULT_GROUP, DelayForwarder
from rocketkafka.delay.metrics import ForwarderMetrics

__all__ = ["DEFAULT_GROUP", "DelayForwarder", "ForwarderMetrics"]
