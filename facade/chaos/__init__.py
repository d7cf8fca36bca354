"""``rocketkafka chaos``: a bounded fault run over every feature, judged by a history checker.

Traffic of four kinds (orderly, key-ordered, delayed, transactional) flows through
consumer processes, delay forwarders and the transaction checker while a nemesis
SIGKILLs, SIGSTOPs and restarts them and stops one Redis node. Afterwards
:mod:`facade.chaos.verdict` compares what producers had acknowledged with what
handlers saw and prints the figures under the names OpenChaos and Jepsen use.

Modules: :mod:`~facade.chaos.plan` (the run's knobs), :mod:`~facade.chaos.worker`
(one consumer process), :mod:`~facade.chaos.processes` (start, kill, pause,
restart), :mod:`~facade.chaos.traffic` (producers and their acknowledged log),
:mod:`~facade.chaos.nemesis` (the fault schedule), :mod:`~facade.chaos.verdict`
(the checker), :mod:`~facade.chaos.run` (the whole run) and :mod:`~facade.chaos.cli`.
"""
