"""Apache Kafka as a plain JVM process: its jars from Maven Central, a KRaft node's config, readiness.

The embedded stack (:mod:`rocketkafka.testing.devstack`) runs Tansu by default; with
``broker="kafka"`` it runs the broker our users deploy. No Docker and no download other than
Maven Central: the jars of ``org.apache.kafka:kafka_2.13`` (and a log4j binding its POM lacks)
are copied once by ``mvn dependency:copy-dependencies`` from the committed
``kafka-broker.pom.xml`` into a per-user cache, and each node runs as
``java -cp 'libs/*' kafka.Kafka server.properties`` after ``kafka.tools.StorageTool format``.

Nodes are combined broker + controller (KRaft) with static ``controller.quorum.voters``.
Settings: ``ROCKETKAFKA_KAFKA_VERSION`` (default :data:`KAFKA_VERSION`),
``ROCKETKAFKA_KAFKA_LIBS`` (a folder of jars to use instead, e.g. a Kafka distribution's
``libs/``), ``ROCKETKAFKA_KAFKA_HEAP`` (default ``512m`` a node).
"""

from __future__ import annotations

import importlib.resources
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocketkafka.errors import StackError
from rocketkafka.user_cache import cache_root, file_lock, mvn_error

if TYPE_CHECKING:
    from rocketkafka.testing.secure import SecureMaterial

#: The Apache Kafka release the embedded broker runs (and docker/compose.yaml's image tag follows): the newest Maven
#: Central serves.
KAFKA_VERSION = "4.4.0"
#: The oldest release rocketkafka supports, and CI runs too (``ROCKETKAFKA_KAFKA_VERSION``): 3.9, the last line
#: before 4.0, which dropped ZooKeeper and the oldest protocol versions -- where teams still on 3.x or on
#: ZooKeeper stand. Clients see no difference between ZooKeeper and KRaft, so its KRaft nodes stand for both.
OLDEST_KAFKA_VERSION = "3.9.1"

_POM = "kafka-broker.pom.xml"
_LOG4J2 = """\
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
"""


def kafka_version() -> str:
    """The Kafka release to run (``ROCKETKAFKA_KAFKA_VERSION``, else :data:`KAFKA_VERSION`)."""
    return os.environ.get("ROCKETKAFKA_KAFKA_VERSION") or KAFKA_VERSION


def java_binary() -> Path:
    """The ``java`` that runs the broker (``JAVA_HOME``'s, else the one on ``PATH``); 17 or newer."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home and (Path(home) / "bin" / "java").exists() else shutil.which("java")
    if not found:
        raise StackError("Apache Kafka needs Java 17 or newer: no `java` on PATH or in JAVA_HOME "
                         "(install a JDK, e.g. `apt-get install openjdk-17-jre-headless`)")
    return Path(found).resolve()


def kafka_libs(say: Callable[[str], Any] | None = None) -> Path:
    """The folder of the broker's jars, fetched from Maven Central on first use (once per user and version).

    Concurrent callers (pytest-xdist workers) wait on a file lock; the folder is filled under a
    temporary name and renamed, so a fetch that dies half-way leaves nothing that looks complete.

    Raises:
        StackError: no ``mvn`` to fetch with, or Maven could not resolve the jars (its last lines quoted).
    """
    given = os.environ.get("ROCKETKAFKA_KAFKA_LIBS")
    if given:
        if not any(Path(given).glob("kafka_2.13-*.jar")):
            raise StackError(f"ROCKETKAFKA_KAFKA_LIBS={given} holds no kafka_2.13-*.jar")
        return Path(given)
    version = kafka_version()
    target = cache_root() / f"kafka-{version}" / "libs"
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.parent / ".fetch.lock"):
        if (target / ".complete").exists():  # another process fetched it while we waited
            return target
        _fetch(version, target, say or (lambda line: print(line, file=sys.stderr, flush=True)))
    return target


def _fetch(version: str, target: Path, say: Callable[[str], Any]) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise StackError(f"fetching Apache Kafka {version}'s jars needs Maven: no `mvn` on PATH (`apt-get install "
                         f"maven`), or set ROCKETKAFKA_KAFKA_LIBS to a folder holding Kafka's libs/")
    partial = target.with_name(f"libs.partial-{uuid.uuid4().hex[:6]}")
    pom = importlib.resources.files("rocketkafka.testing") / _POM
    say(f"fetching Apache Kafka {version} from Maven Central into {target.parent} (once)...")
    started = time.monotonic()
    with importlib.resources.as_file(pom) as pom_path:
        proc = subprocess.Popen([mvn, "-B", "-f", str(pom_path), f"-Dkafka.version={version}",
                                 "dependency:copy-dependencies", "-DincludeScope=runtime",
                                 f"-DoutputDirectory={partial}"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
        assert proc.stdout is not None
        tail: list[str] = []
        fetched = 0
        for line in proc.stdout:
            tail = (tail + [line.rstrip()])[-15:]
            if line.startswith("Downloaded from") and line.rstrip().endswith(".jar"):
                fetched += 1
                if fetched % 10 == 0:
                    say(f"  {fetched} jars fetched...")
        if proc.wait() != 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise StackError(f"Maven could not fetch org.apache.kafka:kafka_2.13:{version}: {mvn_error(chr(10).join(tail))}")
    (partial / ".complete").write_text(version)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    say(f"  {len(list(target.glob('*.jar')))} jars in {time.monotonic() - started:.0f} s")


@dataclass(frozen=True)
class KafkaNodeSpec:
    """One combined broker + controller of a KRaft cluster on loopback."""

    node_id: int
    port: int
    controller_port: int
    folder: Path

    @property
    def properties_file(self) -> Path:
        return self.folder / "server.properties"


def cluster_properties(node: KafkaNodeSpec, voters: list[KafkaNodeSpec], secure: SecureMaterial | None = None) -> str:
    """``server.properties`` of ``node`` in a cluster of ``voters``.

    One node: every internal topic has replication factor 1 and min ISR 1 (else
    ``init_transactions`` waits for replicas that do not exist). Three or more: replication
    factor 3 and ``min.insync.replicas=2``, as a production cluster would have.
    ``secure``: one ``SASL_SSL`` listener for clients and brokers, controllers on SASL/PLAIN over
    TLS, the ``StandardAuthorizer`` (see :mod:`rocketkafka.testing.secure`); no plaintext port.
    """
    size = len(voters)
    replicas = min(3, size)
    min_isr = 1 if size < 3 else 2
    quorum = ",".join(f"{v.node_id}@127.0.0.1:{v.controller_port}" for v in voters)
    settings = {
        "process.roles": "broker,controller",
        "node.id": node.node_id,
        "controller.quorum.voters": quorum,
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": node.folder / "data",
        "num.partitions": 1,
        "default.replication.factor": replicas,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_isr,
        # tests and the demo use groups briefly: no 3 s wait for more members
        "group.initial.rebalance.delay.ms": 0,
        # a dev stack keeps what it is given: tests stamp records at fixed past times (Spark's timestamp
        # options, audits), which the default 7-day retention deletes in the background mid-test
        "log.retention.ms": -1,
        # deleted topics (tests delete theirs) leave the disk at once, not after a minute
        "file.delete.delay.ms": 1000,
        # a killed node comes back within seconds in the fault tests; the controller fences it sooner
        "broker.session.timeout.ms": 6000,
        "broker.heartbeat.interval.ms": 1000,
    }
    if secure is not None:
        settings.update(secure.broker_properties(node.port, node.controller_port))
    return "".join(f"{key}={value}\n" for key, value in settings.items())


#: JVM flags of a node that must answer quickly from its first seconds (the test backend's, see :func:`node_command`).
QUICK_JIT_FLAGS = ("-XX:TieredStopAtLevel=1",)


def node_command(node: KafkaNodeSpec, libs: Path, quick_jit: bool = False) -> list[str]:
    """The command line that runs ``node`` (small heap: a test cluster on a 2-core machine).

    ``quick_jit``: compile with C1 only (:data:`QUICK_JIT_FLAGS`). A fresh broker's C2 compiler
    threads burn 8-10 CPU-seconds over its first half minute of traffic (measured per thread on
    2 cores: C2 9.6 s, the request threads 7.7 s during the first run of the delay levels test),
    and the requests run interpreted meanwhile (a produce took 7-9 ms at the broker, 2-3 ms once
    warm): timing tests early in a session then measured the JIT, not the clients. C1 alone
    compiles what is hot within seconds (0.8 s of compiler CPU) and costs about 40% more broker CPU
    per request once warm (3.0 against 2.15 CPU-s for that test's traffic) -- the right trade for a
    short-lived test broker, not for ``dev up`` or the benchmarks, which keep the default JIT.
    """
    heap = os.environ.get("ROCKETKAFKA_KAFKA_HEAP", "512m")
    return [str(java_binary()), f"-Xmx{heap}", "-Xms128m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            *(QUICK_JIT_FLAGS if quick_jit else ()), "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={node.folder / 'log4j2.properties'}",
            "-cp", f"{libs}/*", "kafka.Kafka", str(node.properties_file)]


def prepare_node(node: KafkaNodeSpec, voters: list[KafkaNodeSpec], cluster_id: str, libs: Path,
                 secure: SecureMaterial | None = None) -> None:
    """Write ``node``'s config and format its storage (once: a restarted node keeps its log).

    ``secure``: the super user's SCRAM credential is created with the storage (``--add-scram``), and the
    config, which holds passwords, is readable by its owner only.
    """
    node.folder.mkdir(parents=True, exist_ok=True)
    node.properties_file.touch(mode=0o600)
    node.properties_file.chmod(0o600)
    node.properties_file.write_text(cluster_properties(node, voters, secure))
    (node.folder / "log4j2.properties").write_text(_LOG4J2)
    if (node.folder / "data" / "meta.properties").exists():
        return
    done = subprocess.run([str(java_binary()), "-Xmx256m", "-cp", f"{libs}/*", "kafka.tools.StorageTool", "format",
                           "-t", cluster_id, "-c", str(node.properties_file),
                           *(secure.format_arguments() if secure is not None else ())],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise StackError(f"formatting Kafka node {node.node_id}'s storage failed: "
                         f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, base64url without padding (what ``kafka-storage random-uuid`` prints).

    Never one that starts with ``-``: StorageTool's argument parser would take it for an option
    (Kafka's own ``Uuid.randomUuid`` draws again for the same reason).
    """
    import base64

    while (made := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
        pass
    return made


#: How long :func:`warm_up` drives traffic through a fresh cluster (s).
WARM_UP_S = 4.0


def warm_up(bootstrap_servers: str, seconds: float = WARM_UP_S, client_config: dict[str, Any] | None = None) -> None:
    """Drive the request paths the tests use (idempotent produce to several partitions with headers,
    fetch, offset commit) through a fresh cluster for ``seconds``, so the JIT has compiled them before
    the first test measures anything (with :data:`QUICK_JIT_FLAGS`, a few seconds are enough).

    Measured on 2 cores (other work running, load 6-9), the delay levels test's traffic on a fresh
    broker: lateness p99 213 ms (forwarder's share 137 ms) with the default JIT, 156 ms (118 ms)
    with ``quick_jit``, 31 ms (14 ms) with ``quick_jit`` after this warm-up.
    Its topic is deleted afterwards; a failure here only leaves the broker cold. ``client_config``: the
    security settings of a user that may do all this (a secured stack's super user).
    """
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, partitions = f"rocketkafka-warm-up-{uuid.uuid4().hex[:6]}", 8
    common = {"bootstrap.servers": bootstrap_servers, "log_level": 0, **(client_config or {})}
    admin = AdminClient(common)
    producer = consumer = None
    try:
        admin.create_topics([NewTopic(topic, partitions)])[topic].result(30)
        producer = Producer({**common, "linger.ms": 1, "enable.idempotence": True})
        consumer = Consumer({**common, "group.id": topic, "enable.auto.commit": False, "fetch.wait.max.ms": 5})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + seconds
        sent, committed = 0, 0.0
        while time.monotonic() < deadline:
            for i in range(16):
                producer.produce(topic, b"x" * 100, partition=(sent + i) % partitions, headers=[("h", b"v")])
            sent += 16
            producer.poll(0)
            consumer.consume(1000, 0.002)
            if time.monotonic() - committed > 0.05:
                consumer.commit(asynchronous=True)
                committed = time.monotonic()
        producer.flush(10)
    except Exception as exc:  # a cold broker is slower, not wrong
        print(f"Apache Kafka warm-up failed: {exc}", file=sys.stderr, flush=True)
    finally:
        if consumer is not None:
            consumer.close()
        del producer
        try:
            admin.delete_topics([topic], request_timeout=10)[topic].result(10)
        except Exception:
            pass
        del admin


def wait_ready(bootstrap_servers: str, brokers: int, timeout: float, alive: Callable[[], str | None],
               client_config: dict[str, Any] | None = None) -> None:
    """Wait until the cluster's metadata lists ``brokers`` brokers (an open port is not enough).

    ``alive`` returns why a node died, or ``None``; a dead node ends the wait at once. ``client_config``:
    the security settings to ask with (a secured stack's super user).
    """
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "socket.connection.setup.timeout.ms": 1000,
                         "reconnect.backoff.max.ms": 200, "log_level": 0, **(client_config or {})})
    deadline = time.monotonic() + timeout
    seen = 0
    try:
        while time.monotonic() < deadline:
            dead = alive()
            if dead:
                raise StackError(dead)
            try:
                seen = len(admin.list_topics(timeout=1).brokers)
            except Exception:  # not up yet
                seen = 0
            if seen >= brokers:
                return
            time.sleep(0.1)
    finally:
        del admin
    raise StackError(f"Apache Kafka at {bootstrap_servers} listed {seen} of {brokers} brokers after {timeout:.0f} s")
