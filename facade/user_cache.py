"""What rocketkafka fetches once per user: the folder it lives in, the lock that makes concurrent
fetchers (pytest-xdist workers, several sessions) fetch it once, and Maven's failures in a few words.

Apache Kafka's broker jars (:mod:`rocketkafka.testing.apache_kafka`) and Spark's Kafka source
(:mod:`rocketkafka.spark.connector`) are both copied from Maven Central by ``mvn`` into this cache.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator
from pathlib import Path

#: What :func:`mvn_error` says when Maven found no such artifact.
NOT_SERVED = "not served by the Maven repositories mvn uses"


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/rocketkafka``, else ``~/.cache/rocketkafka``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rocketkafka"


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing) for the block."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def mvn_error(output: str, not_served: str = NOT_SERVED) -> str:
    """Why ``mvn`` failed, in a few words: its first ``[ERROR]`` line (its own lines run to hundreds of
    characters), or ``not_served`` when the artifact is not in the repositories."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)
    if "was not found in" in plain or "Could not find artifact" in plain:
        return not_served
    lines = [line.strip() for line in plain.splitlines() if line.strip()]
    errors = [re.sub(r"^\[ERROR\]\s*", "", line) for line in lines if line.startswith("[ERROR]")]
    return ((errors or lines or ["mvn failed"])[0])[:200]
