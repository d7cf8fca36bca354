"""The partition lock table: RocketMQ's queue locks over N independent Redis nodes, with fencing tokens.

- :mod:`~rocketkafka.ordering.locks.settings`: timings and the pure quorum logic;
- :mod:`~rocketkafka.ordering.locks.scripts`: the Lua scripts, one atomic round trip per node each;
- :mod:`~rocketkafka.ordering.locks.nodes`: the transport, one script on every node per round;
- :mod:`~rocketkafka.ordering.locks.rounds`: one owner's requests as scripts on every node, and what the
  answers grant (session leases);
- :mod:`~rocketkafka.ordering.locks.table`: :class:`LockTable`, lock / renew / unlock / describe;

May call: the core package and Redis. Nothing else of ``rocketkafka.ordering``: the engine and the idempotent
consumer call the locks, never the other way (``[tool.importlinter]`` in pyproject.toml keeps it so).
"""

from rocketkafka.ordering.locks.settings import (
    Held,
    LockSettings,
    agree,
    issue_token,
    quorum,
    quorum_ttl,
    valid_until,
)
from rocketkafka.ordering.locks.table import LockTable

__all__ = ["Held", "LockSettings", "LockTable", "agree", "issue_token", "quorum", "quorum_ttl",
           "valid_until"]
