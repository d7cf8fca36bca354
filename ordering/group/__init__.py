"""The group room: who is in a consumer group, and which partitions each member takes.

Owns:

- :mod:`~rocketkafka.ordering.group.membership`: heartbeats in Redis, the live member list, join/leave
  announcements (:class:`~rocketkafka.ordering.group.membership.Membership`);
- :mod:`~rocketkafka.ordering.group.allocation`: the allocation strategies (RocketMQ's
  ``AllocateMessageQueueStrategy``): members and partitions in, each member's share out, pure;
- :mod:`~rocketkafka.ordering.group.presence`: services announcing themselves in Redis (the delay
  forwarder), so a client can tell whether one is alive.

May call: the core package (``rocketkafka.names``, ``errors``, ``refusals``, ...) and Redis. Nothing else of
``rocketkafka.ordering``: the engine calls the group, never the other way (``[tool.importlinter]`` in
pyproject.toml keeps it so).
"""
