"""The partition lock table: RocketMQ's queue locks over N independent Redis nodes, with fencing tokens.

- :mod:`~rocketkafka.ordering.locks.settings`: timings and the pure quorum logic;
- :mod:`~rocketkafka.ordering.locks.scripts`: the Lua scripts, one atomic round trip per node each;
- :mod:`~rocketkafka.ordering.locks.nodes`: the transport, one script on every node per round;
- :mod:`~rocketkafka.ordering.locks.table`: :class:`LockTable`, lock / renew / unlock / describe;
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
