"""``rocketkafka bench`` and ``rocketkafka chaos`` run on the secured cluster and let no password out: not in what
they print, not in any file they write (bench.json/.md/.png, chaos's verdict, histories and process logs, the
forwarders' temporary logs), and not on the command line of any process they start while it runs (``ps``).

The cluster is the session's secured one, given as a user gives one: an owner-only properties file named by
``ROCKETKAFKA_CONFIG_FILE``, no ``ROCKETKAFKA_*`` connection variable. Each command runs as its own process
with its output and ``TMPDIR`` in a folder the scans then read whole; the process scan reads
``/proc/<pid>/cmdline`` of every process on the host every 50 ms while the command runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from rocketkafka.config import Settings
from rocketkafka.logs import SECRET_SETTING

pytestmark = [pytest.mark.integration, pytest.mark.rk_needs("secure")]

REPO = Path(__file__).resolve().parents[2]


def passwords(rk_backend, rk_settings: Settings) -> list[str]:
    """Every password of the secured cluster this test knows: the super user's (Kafka and Redis), the controllers',
    and whatever secret the settings hold."""
    found = {str(v) for k, v in rk_settings.kafka.items() if SECRET_SETTING.search(k) and v}
    for url in rk_settings.redis_urls:
        if urlsplit(url).password:
            found |= {urlsplit(url).password, unquote(urlsplit(url).password)}
    material = getattr(getattr(rk_backend, "stack", None), "material", None)
    if material is not None:
        found |= {material.admin_password, material.controller_password}
    assert found, "the secured backend gave no password to look for"
    return sorted(found)


@dataclass
class ProcessScan:
    """Reads every process's command line until stopped: what held a password, and the children of ``root``."""

    secrets: list[str]
    root: int = 0
    leaks: dict[int, str] = field(default_factory=dict)  # pid -> the command line that held a password
    children: dict[int, str] = field(default_factory=dict)  # descendants of root seen, pid -> command line
    sweeps: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def sweep(self) -> None:
        parents: dict[int, int] = {}
        lines: dict[int, str] = {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                raw = Path(entry.path, "cmdline").read_bytes()
                stat = Path(entry.path, "stat").read_text()
            except OSError:  # gone meanwhile, or not ours to read
                continue
            pid = int(entry.name)
            lines[pid] = raw.replace(b"\0", b" ").decode(errors="replace")
            parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
            if any(secret in lines[pid] for secret in self.secrets):
                self.leaks[pid] = lines[pid]
        for pid in lines:
            ancestor, hops = parents.get(pid), 0
            while ancestor and ancestor != self.root and hops < 20:
                ancestor, hops = parents.get(ancestor), hops + 1
            if ancestor == self.root and pid != self.root:
                self.children[pid] = lines[pid]
        self.sweeps += 1

    def run(self) -> None:
        while not self._stop.is_set():
            self.sweep()
            self._stop.wait(0.05)

    def stop(self) -> None:
        self._stop.set()


@dataclass
class Ran:
    done: subprocess.CompletedProcess
    scan: ProcessScan
    seconds: float


@pytest.fixture
def given_cluster(rk_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment of a command pointed at the secured cluster by an owner-only properties file only (outside
    ``tmp_path``, which holds only what the command produced: the scans read it whole)."""
    folder = tmp_path_factory.mktemp("secured-client")
    lines = {"bootstrap.servers": rk_settings.bootstrap_servers, **rk_settings.client_properties(),
             "rocketkafka.redis.urls": ",".join(rk_settings.redis_urls)}
    config = folder / "client.properties"
    config.touch(mode=0o600)
    config.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKETKAFKA_")}
    env.update(ROCKETKAFKA_CONFIG_FILE=str(config), ROCKETKAFKA_HOME=str(folder / "home"), PYTHONUNBUFFERED="1")
    yield env


def run_scanned(args: list[str], env: dict[str, str], folder: Path, secrets: list[str], timeout: float) -> Ran:
    """``rocketkafka ARGS`` in ``folder`` (its TMPDIR too), its output in ``folder``, every process scanned meanwhile."""
    tmp = folder / "tmp"
    tmp.mkdir(parents=True)
    scan = ProcessScan(secrets)
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "rocketkafka.tools.cli", *args], cwd=folder,
                            env={**env, "TMPDIR": str(tmp)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    scan.root = proc.pid
    watcher = threading.Thread(target=scan.run, daemon=True)
    watcher.start()
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        proc.kill()
        scan.stop()
        watcher.join(5)
    (folder / "stdout.txt").write_text(stdout)
    (folder / "stderr.txt").write_text(stderr)
    return Ran(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), scan,
               time.monotonic() - started)


def leaks_in_files(folder: Path, secrets: list[str]) -> dict[str, str]:
    """Files under ``folder`` (read as bytes, whatever they hold) that contain a secret, and which."""
    found = {}
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert files
    for path in files:
        data = path.read_bytes()
        for secret in secrets:
            if secret.encode() in data:
                found[str(path.relative_to(folder))] = f"password of {len(secret)} characters"
    return found


def assert_kept_secret(ran: Ran, folder: Path, secrets: list[str], least_children: int) -> None:
    assert ran.scan.sweeps >= 5, "the process scan hardly ran"
    assert len(ran.scan.children) >= least_children, f"saw only these children: {ran.scan.children}"
    assert not ran.scan.leaks, f"a password on a command line: pids {sorted(ran.scan.leaks)}"
    assert not leaks_in_files(folder, secrets)


def test_bench_on_the_secured_cluster_shows_no_password(rk_backend, rk_settings, given_cluster, tmp_path):
    """The produce figure at a tiny scale: seven contenders, raw confluent-kafka floors and ours, each a process
    of its own with the settings in its environment; bench.json, .md, .png (about 20 s)."""
    secrets = passwords(rk_backend, rk_settings)
    folder = tmp_path / "bench"
    ran = run_scanned(["bench", "all", "--scale", "0.01", "--only", "produce", "--out", str(folder / "results")],
                      given_cluster, folder, secrets, timeout=240)
    assert ran.done.returncode == 0, ran.done.stdout[-3000:] + ran.done.stderr[-3000:]
    document = json.loads((folder / "results" / "bench.json").read_text())
    assert document["failed"] == [] and {r["bench"] for r in document["rows"]} == {"produce"}
    broker = document["machine"]["broker"]
    assert broker["kind"] == "given" and broker["security"] == "SASL_SSL" and broker["redis_tls"] is True
    assert all(r["value"] > 0 for r in document["rows"])
    assert {"bench.json", "bench.md", "bench.png"} <= {p.name for p in (folder / "results").iterdir()}
    assert_kept_secret(ran, folder, secrets, least_children=7)  # one process per contender
    print(f"bench produce on the secured cluster: {ran.seconds:.1f} s, {len(ran.scan.children)} child processes "
          f"scanned in {ran.scan.sweeps} sweeps")


def test_chaos_on_the_secured_cluster_shows_no_password(rk_backend, rk_settings, given_cluster, tmp_path):
    """Two seconds of every kind of traffic with consumers paused past their lock lease: a consumer per kind, a
    forwarder and the checker, each a process of its own; verdict.json, histories, logs (about 30 s). A kill
    would restart a process with the same command line and environment, at twice the time on a loaded machine."""
    secrets = passwords(rk_backend, rk_settings)
    folder = tmp_path / "chaos"
    ran = run_scanned(["chaos", "--duration", "2", "--fault-interval", "1", "--faults", "pause-consumer",
                       "--consumers", "1", "--forwarders", "1", "--rate-scale", "0.25", "--out", str(folder / "results")],
                      given_cluster, folder, secrets, timeout=240)
    verdict = json.loads((folder / "results" / "verdict.json").read_text())
    assert ran.done.returncode == 0 and verdict["passed"], (verdict["violations"], ran.done.stderr[-3000:])
    assert {f["fault"] for f in verdict["faults"]} == {"pause-consumer"}
    assert verdict["total"]["enqueueSuccessCount"] > 0 and verdict["total"]["lostMessageCount"] == 0
    assert_kept_secret(ran, folder, secrets, least_children=6)  # 4 kinds x 1 consumer, a forwarder, the checker
    print(f"chaos on the secured cluster: {ran.seconds:.1f} s, {len(ran.scan.children)} child processes scanned in "
          f"{ran.scan.sweeps} sweeps")
