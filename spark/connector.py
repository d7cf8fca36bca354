"""Spark's own Kafka source (``spark-sql-kafka-0-10``) for classic sessions: fetched once, cached, passed as jars.

The connector's version must equal PySpark's exactly (a mismatch fails only when a query
runs), so the coordinates are ``org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark version>``.
``mvn`` fetches them once into a per-user cache (``$ROCKETKAFKA_SPARK_JARS_DIR`` or
``~/.cache/rocketkafka/spark-kafka``); a session then gets the jars through ``spark.jars``,
which also ships them to the executors of ``local-cluster[...]`` and real clusters. Only the
jars PySpark lacks are kept (four: the source, its token provider, kafka-clients, commons-pool2).

Why not ``spark.jars.packages``: Spark's Ivy resolves through ``~/.m2`` and refuses a POM
there whose jar Maven never fetched (``download failed: org.slf4j#slf4j-api;2.0.17``),
which ends the whole session start; and it resolves again at every session start.

``$ROCKETKAFKA_SPARK_CONNECTOR`` (or ``spark_session(connector=...)``): ``auto`` (default:
fetch where ``mvn`` can, else go on without and read with the Python source), ``on``
(fail with one line naming the coordinates when it cannot be had), ``off``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from rocketkafka.spark.errors import EngineUnavailableError
from rocketkafka.user_cache import NOT_SERVED, cache_root, file_lock, mvn_error

log = logging.getLogger(__name__)

#: Environment variable choosing whether sessions get the connector: ``auto``, ``on`` or ``off``.
CONNECTOR_ENV = "ROCKETKAFKA_SPARK_CONNECTOR"
#: Environment variable naming the jar cache (default ``~/.cache/rocketkafka/spark-kafka``).
JARS_DIR_ENV = "ROCKETKAFKA_SPARK_JARS_DIR"
CONNECTOR_MODES = ("auto", "on", "off")
_MANIFEST = "jars.txt"
_FETCH_TIMEOUT_S = 600
_RETRY_AFTER_S = 3600
_NOT_SERVED = f"{NOT_SERVED} (is the PySpark version released on Maven Central?)"


def pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def coordinates(version: str | None = None) -> str:
    """Maven coordinates of Spark's Kafka source for a PySpark version (default: the installed one)."""
    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version or pyspark_version()}"


def connector_mode(mode: str | None = None) -> str:
    """``auto`` | ``on`` | ``off`` from ``mode``, else ``$ROCKETKAFKA_SPARK_CONNECTOR``, else ``auto``."""
    wanted = (mode or os.environ.get(CONNECTOR_ENV) or "auto").strip().lower()
    if wanted not in CONNECTOR_MODES:
        raise EngineUnavailableError(f"{CONNECTOR_ENV}={wanted!r}: use one of {', '.join(CONNECTOR_MODES)}")
    return wanted


def cache_dir(version: str | None = None) -> Path:
    root = os.environ.get(JARS_DIR_ENV) or cache_root() / "spark-kafka"
    return Path(root) / (version or pyspark_version())


def cached_jars(version: str | None = None) -> list[Path] | None:
    """The cached connector jars, or ``None`` when they were never fetched (or a file is gone)."""
    manifest = cache_dir(version) / _MANIFEST
    if not manifest.exists():
        return None
    jars = [manifest.parent / name for name in manifest.read_text().split()]
    return jars if jars and all(j.exists() for j in jars) else None


def connector_jars(version: str | None = None) -> list[Path]:
    """The connector's jars for ``version``, fetched with ``mvn`` on first use (one fetch per user, under a lock).

    Raises:
        EngineUnavailableError: ``mvn`` is missing or could not resolve the coordinates (one line naming them).
    """
    version = version or pyspark_version()
    jars = cached_jars(version)
    if jars is not None:
        return jars
    target = cache_dir(version)
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.parent / f".{version}.lock"):
        jars = cached_jars(version)  # another process fetched it while we waited
        if jars is None:
            jars = _fetch(version, target)
    return jars


def _pyspark_artifacts() -> set[str]:
    """Artifact ids of the jars PySpark ships (``kafka-clients-3.9.2.jar`` -> ``kafka-clients``)."""
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    return {_artifact(j.name) for j in jars.glob("*.jar")}


def _artifact(filename: str) -> str:
    """The artifact id in a Maven jar name: ``spark-sql-kafka-0-10_2.13-4.2.0.jar`` -> ``spark-sql-kafka-0-10_2.13``."""
    match = _JAR_NAME.match(filename)
    return match.group(1) if match else filename.removesuffix(".jar")


_JAR_NAME = re.compile(r"^(.+?)-(\d+(?:\.\d+)+(?:[.-](?:\d\w*|[A-Z]\w*|jre|android|incubating))*)\.jar$")


def _pom(coords: str, exclude: set[str]) -> str:
    group, artifact, version = coords.split(":")
    exclusions = "".join(f"<exclusion><groupId>*</groupId><artifactId>{a}</artifactId></exclusion>" for a in sorted(exclude))
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            "<groupId>rocketkafka</groupId><artifactId>spark-kafka-connector</artifactId><version>1</version>"
            f"<dependencies><dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version><exclusions>{exclusions}</exclusions></dependency></dependencies></project>")


def _fetch(version: str, target: Path) -> list[Path]:
    coords = coordinates(version)
    mvn = shutil.which("mvn")
    if mvn is None:
        raise EngineUnavailableError(f"cannot fetch Spark's Kafka connector {coords}: no mvn on PATH")
    shipped = _pyspark_artifacts()
    with tempfile.TemporaryDirectory(prefix="rk-connector-", dir=target.parent) as work:
        Path(work, "pom.xml").write_text(_pom(coords, shipped))
        out = Path(work, "jars")
        try:
            done = subprocess.run([mvn, "-q", "-B", "dependency:copy-dependencies", "-DincludeScope=runtime",
                                   f"-DoutputDirectory={out}"], cwd=work, capture_output=True, text=True,
                                  timeout=_FETCH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise EngineUnavailableError(f"cannot fetch Spark's Kafka connector {coords}: mvn took over "
                                         f"{_FETCH_TIMEOUT_S} s") from None
        if done.returncode != 0:
            raise EngineUnavailableError(f"cannot fetch Spark's Kafka connector {coords}: {mvn_error(done.stdout + done.stderr, _NOT_SERVED)}")
        jars = sorted(j.name for j in out.glob("*.jar") if _artifact(j.name) not in shipped)
        if not any(name.startswith("spark-sql-kafka-0-10") for name in jars):
            raise EngineUnavailableError(f"cannot fetch Spark's Kafka connector {coords}: mvn returned no connector jar")
        Path(out, _MANIFEST).write_text("\n".join(jars) + "\n")
        for extra in set(out.glob("*.jar")) - {out / j for j in jars}:
            extra.unlink()
        if target.exists():
            shutil.rmtree(target)
        out.rename(target)
    log.info("fetched %s into %s (%d jars)", coords, target, len(jars))
    return [target / j for j in jars]


def session_jars(mode: str | None = None) -> list[Path]:
    """The jars a classic session should get for Spark's Kafka source under ``mode`` (empty: go without).

    Under ``auto`` a failed fetch is remembered for an hour (a refused fetch takes mvn ~25 s),
    so sessions in that hour go straight to the Python source; ``on`` always tries again.

    Raises:
        EngineUnavailableError: ``on`` and the connector cannot be had.
    """
    chosen = connector_mode(mode)
    if chosen == "off":
        return []
    failed = cache_dir().parent / f"{pyspark_version()}.failed"
    try:
        if chosen == "auto" and failed.exists() and time.time() - failed.stat().st_mtime < _RETRY_AFTER_S:
            raise EngineUnavailableError(failed.read_text().strip())
        jars = connector_jars()
        failed.unlink(missing_ok=True)
        return jars
    except EngineUnavailableError as exc:
        if chosen == "on":
            raise
        with contextlib.suppress(OSError):
            failed.parent.mkdir(parents=True, exist_ok=True)
            if not failed.exists() or failed.read_text().strip() != str(exc):
                failed.write_text(f"{exc}\n")
        log.warning("%s; reading Kafka with the Python source (%s=off silences this)", exc, CONNECTOR_ENV)
        return []
