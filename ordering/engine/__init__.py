"""The engine room: the ownership engine and its poll loop -- owning partitions and feeding them to a step.

Owns:

- :mod:`~rocketkafka.ordering.engine.engine`: :class:`~rocketkafka.ordering.engine.engine.OwnershipEngine`,
  start, rebalance, acquire, commit, close;
- :mod:`~rocketkafka.ordering.engine.poll_loop`: maintain, fetch, route records to their claims, tick the step;
- :mod:`~rocketkafka.ordering.engine.holdings`: a lock's partitions coming in and leaving (claims, drains);
- :mod:`~rocketkafka.ordering.engine.keeper`: the Redis side on a thread of its own (heartbeats, renewals);
- :mod:`~rocketkafka.ordering.engine.owned`: what the engine holds per lock and shows per partition;
- :mod:`~rocketkafka.ordering.engine.commits`: offset commits under a held lock, with its fencing token;
- :mod:`~rocketkafka.ordering.engine.flow_control`: pausing and resuming fetches so memory stays bounded;
- :mod:`~rocketkafka.ordering.engine.clients`: the engine's own Kafka consumers, replaced when they lose every
  broker;
- :mod:`~rocketkafka.ordering.engine.resets`: operator offset resets applied while the group runs;
- :mod:`~rocketkafka.ordering.engine.access`: what an engine may do on a secured cluster;
- :mod:`~rocketkafka.ordering.engine.lifecycle`: the state of a client or service and its transitions;
- :mod:`~rocketkafka.ordering.engine.options`: the settings of the engine and of the consumers on it;
- :mod:`~rocketkafka.ordering.engine.metrics`: the consumer's Prometheus series.

May call: :mod:`~rocketkafka.ordering.work` (the step it runs), :mod:`~rocketkafka.ordering.group`
(membership, allocation), :mod:`~rocketkafka.ordering.locks` (the lock table) and the core package. Never
:mod:`~rocketkafka.ordering.consumers`, which is built on it (``[tool.importlinter]`` in pyproject.toml).
"""
