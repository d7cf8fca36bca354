"""The consumers room: the consumers applications use, each a step run on the ownership engine.

Owns:

- :mod:`~rocketkafka.ordering.consumers.push_consumer`: RocketMQ's push consumer
  (:class:`~rocketkafka.ordering.consumers.push_consumer.PushConsumer`);
- :mod:`~rocketkafka.ordering.consumers.batch_step`: its step (and the delay forwarder's): topics, claims,
  the scheduler;
- :mod:`~rocketkafka.ordering.consumers.listening`: its handler -- records to listeners, answers to outcomes;
  :mod:`~rocketkafka.ordering.consumers.subscriptions`, :mod:`~rocketkafka.ordering.consumers.selecting`
  (tag and SQL92 selectors), :mod:`~rocketkafka.ordering.consumers.message_batch` (what a batch listener
  gets), :mod:`~rocketkafka.ordering.consumers.futures` (what an orderly listener may return),
  :mod:`~rocketkafka.ordering.consumers.async_listening` (the event loop of ``async def`` listeners),
  :mod:`~rocketkafka.ordering.consumers.tracing` (trace events);
- exactly once: :mod:`~rocketkafka.ordering.consumers.exactly_once_consumer`,
  :mod:`~rocketkafka.ordering.consumers.transactional_runs`, :mod:`~rocketkafka.ordering.consumers.transactions`;
- :mod:`~rocketkafka.ordering.consumers.idempotent`: at most once per message id
  (:class:`~rocketkafka.ordering.consumers.idempotent.IdempotentConsumer`);
- the Kafka-style drop-in consumer: :mod:`~rocketkafka.ordering.consumers.drop_in_consumer`, its step
  (:mod:`~rocketkafka.ordering.consumers.drop_in_step`), its commit arguments
  (:mod:`~rocketkafka.ordering.consumers.commit_args`) and its joining in the background
  (:mod:`~rocketkafka.ordering.consumers.background_join`).

May call: every other room -- :mod:`~rocketkafka.ordering.engine`, :mod:`~rocketkafka.ordering.work`,
:mod:`~rocketkafka.ordering.group`, :mod:`~rocketkafka.ordering.locks` -- and the core package. Nothing of
``rocketkafka.ordering`` calls it back (``[tool.importlinter]`` in pyproject.toml).
"""
