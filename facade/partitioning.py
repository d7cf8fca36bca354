"""The one partitioning rule: where a keyed record goes, for every send path of both doors.

The rule is the producer's librdkafka ``partitioner`` setting, and rocketkafka's default for
it is ``murmur2_random``: Kafka's Java client's default (``murmur2(key) & 0x7fffffff) %
partitions``), so Java producers, Kafka Streams and rocketkafka put a key on the same
partition. (librdkafka's own default is ``consistent_random``, CRC-32: a documented
difference of the drop-in; pass ``partitioner`` to choose another.) ``send_sync`` with
``keys`` (the first key is the record key), ``send_orderly`` (the sharding key), the delay
router (which fixes the real partition at send time) and the drop-in's ``produce(key=...)``
all follow it; records without a key go where librdkafka's partitioner puts them
(sticky/random).

:func:`key_partition` computes the rule in Python for the paths that must know the
partition before librdkafka sees the record; ``tests/facade/test_partitioning.py`` pins it
against librdkafka's own partitioners.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

from rocketkafka.errors import ConfigError
from rocketkafka.murmur2 import murmur2_partition

#: rocketkafka's default ``partitioner`` (the Java client's murmur2 for keyed records).
DEFAULT_PARTITIONER = "murmur2_random"

#: librdkafka's partitioners whose choice for a key :func:`key_partition` reproduces.
KEYED_PARTITIONERS = ("murmur2", "murmur2_random", "consistent", "consistent_random", "fnv1a", "fnv1a_random")


def partitioner_of(config: Mapping[str, Any]) -> str:
    """The ``partitioner`` of a confluent config dict (default :data:`DEFAULT_PARTITIONER`), checked.

    Raises:
        ConfigError: a partitioner whose key placement cannot be reproduced (``random``: keys
            would not keep a partition, so ordered sends could not work).
    """
    name = str(config.get("partitioner", DEFAULT_PARTITIONER))
    if name not in KEYED_PARTITIONERS:
        raise ConfigError(f"partitioner {name!r} is not supported: choose one of {', '.join(KEYED_PARTITIONERS)} "
                          "(a key must always land on the same partition)")
    return name


def key_partition(key: bytes, partitions: int, partitioner: str = DEFAULT_PARTITIONER) -> int:
    """The partition librdkafka's ``partitioner`` picks for a non-null ``key`` among ``partitions``.

    >>> key_partition(b"order-1", 8)   # murmur2, as the Java client
    6
    """
    if partitioner.startswith("murmur2"):
        return murmur2_partition(key, partitions)
    if partitioner.startswith("fnv1a"):
        h = 0x811C9DC5
        for byte in key:
            h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
        return abs(h - (1 << 32) if h & 0x80000000 else h) % partitions
    return zlib.crc32(key) % partitions
