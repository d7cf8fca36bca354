"""The work room: what runs on an owned partition, and how it is scheduled, run and settled.

Owns:

- :mod:`~rocketkafka.ordering.work.step`: the seam between the engine and the work --
  :class:`~rocketkafka.ordering.work.step.Step` and :class:`~rocketkafka.ordering.work.step.Claim`;
- :mod:`~rocketkafka.ordering.work.partition`: one owned partition's records as batches, sharded by the
  consumer's mode (:class:`~rocketkafka.ordering.work.partition.PartitionWork`, the chunkers);
- :mod:`~rocketkafka.ordering.work.order_keys`: what must stay in order inside a partition;
- :mod:`~rocketkafka.ordering.work.scheduler`: which shard runs next, where and when (the poll thread's side);
- :mod:`~rocketkafka.ordering.work.lanes`: what a worker does with a shard's batches (the worker's side);
- :mod:`~rocketkafka.ordering.work.settlement`: applying what workers posted -- outcomes, settlements, rewinds;
- :mod:`~rocketkafka.ordering.work.timers`: one thread firing due items (retries in place, delays);
- :mod:`~rocketkafka.ordering.work.failures`: what becomes of a message whose handler failed.

May call: the core package only. Nothing else of ``rocketkafka.ordering``: the engine and the consumers call
the work, never the other way (``[tool.importlinter]`` in pyproject.toml keeps it so). The delay forwarder
and the transaction checker run their own steps on it.
"""
