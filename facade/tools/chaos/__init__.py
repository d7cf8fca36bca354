"""``rocketkafka chaos``: a bounded fault run over every feature, judged by a history checker.

Traffic of four kinds (orderly, key-ordered, delayed, transactional) flows through
consumer processes, delay forwarders and the transaction checker while a nemesis
SIGKILLs, SIGSTOPs and restarts them and stops one Redis node. Afterwards
:mod:`rocketkafka.tools.chaos.verdict` compares what producers had acknowledged with what
handlers saw and prints the figures under the names OpenChaos and Jepsen use.

Modules: :mod:`~rocketkafka.tools.chaos.plan` (the run's knobs), :mod:`~rocketkafka.tools.chaos.worker`
(one consumer process), :mod:`~rocketkafka.tools.chaos.processes` (start, kill, pause,
restart), :mod:`~rocketkafka.tools.chaos.traffic` (producers and their acknowledged log),
:mod:`~rocketkafka.tools.chaos.nemesis` (the fault schedule), :mod:`~rocketkafka.tools.chaos.verdict`
(the checker), :mod:`~rocketkafka.tools.chaos.run` (the whole run) and :mod:`~rocketkafka.tools.chaos.cli`.
"""
