"""docker/compose.yaml and docker/sidecars/Dockerfile stay consistent with the code.

No image can be pulled on the development machine, so the stack is checked
statically: every built image has a Dockerfile, every ``rocketkafka ...`` the file
runs is a real CLI command whose options parse (click, nothing invoked), every
dependency exists and is healthy-checkable, and ``config -q`` of a compose client
accepts the file when one is installed.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from rocketkafka.tools.cli import main as cli_main

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker" / "compose.yaml"
SIDECAR_DOCKERFILE = REPO / "docker" / "sidecars" / "Dockerfile"
#: restart policies of a job that runs once and exits (it needs no health check).
ONE_SHOT_RESTARTS = ("no", "on-failure")


# -- helpers ------------------------------------------------------------------------------

def load_compose(path: Path = COMPOSE) -> dict[str, Any]:
    """The compose file as a dict (YAML anchors and ``<<`` merges resolved)."""
    return yaml.safe_load(path.read_text())


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` pairs of a Dockerfile, continuation lines joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        instructions.append((keyword.upper(), args.strip()))
        pending = ""
    return instructions


def exec_form(args: str) -> list[str]:
    """An instruction's arguments as a list: JSON exec form, else shell words."""
    return json.loads(args) if args.startswith("[") else shlex.split(args)


def dockerfile_of(service: dict[str, Any], compose: Path = COMPOSE) -> Path | None:
    """The Dockerfile a service builds from (context and dockerfile relative to the compose file), or None."""
    build = service.get("build")
    if build is None:
        return None
    if isinstance(build, str):
        build = {"context": build}
    context = (compose.parent / build.get("context", ".")).resolve()
    return (context / build.get("dockerfile", "Dockerfile")).resolve()


def entrypoint_of(service: dict[str, Any]) -> list[str]:
    """The service's entrypoint: its own ``entrypoint``, else its Dockerfile's ENTRYPOINT (built images only)."""
    if "entrypoint" in service:
        value = service["entrypoint"]
        return shlex.split(value) if isinstance(value, str) else list(value)
    dockerfile = dockerfile_of(service)
    if dockerfile is None or not dockerfile.is_file():
        return []
    entry = [args for keyword, args in dockerfile_instructions(dockerfile) if keyword == "ENTRYPOINT"]
    return exec_form(entry[-1]) if entry else []


def rocketkafka_args(service: dict[str, Any]) -> list[str] | None:
    """The ``rocketkafka`` arguments a service runs, or None when it runs something else."""
    if entrypoint_of(service)[:1] != ["rocketkafka"]:
        return None
    command = service.get("command", [])
    command = shlex.split(command) if isinstance(command, str) else [str(c) for c in command]
    return entrypoint_of(service)[1:] + command


def resolve_cli(args: list[str]) -> list[str]:
    """Parse ``rocketkafka ARGS`` down to the leaf command without invoking anything.

    Returns the command path (e.g. ``["spark", "audit-delay"]``). Raises
    ``click.UsageError`` (unknown command, unknown option, bad value, missing
    argument) exactly as the real command line would.
    """
    command: click.Command = cli_main
    ctx = command.make_context("rocketkafka", list(args), resilient_parsing=False)
    path: list[str] = []
    while isinstance(command, click.Group):
        # click >= 8.2 keeps the subcommand in _protected_args (protected_args is deprecated)
        protected = getattr(ctx, "_protected_args", None)
        rest = [*(ctx.protected_args if protected is None else protected), *ctx.args]
        if not rest:
            raise click.UsageError(f"{' '.join(['rocketkafka', *path])} needs a subcommand")
        name, sub, rest = command.resolve_command(ctx, rest)
        assert name is not None and sub is not None
        if (sub.help or "").startswith("(unavailable"):  # the lazy group's stand-in for an import error
            raise click.UsageError(f"{name}: {sub.help}")
        path.append(name)
        ctx = sub.make_context(name, rest, parent=ctx, resilient_parsing=False)
        command = sub
    return path


def is_one_shot(service: dict[str, Any]) -> bool:
    """A job that runs once: restart ``no`` or ``on-failure[:N]``."""
    return str(service.get("restart", "no")).split(":")[0] in ONE_SHOT_RESTARTS


def has_healthcheck(service: dict[str, Any]) -> bool:
    """A health check of its own, or the HEALTHCHECK of the Dockerfile it builds (unless disabled)."""
    check = service.get("healthcheck")
    if check is not None:
        return not check.get("disable", False) and check.get("test") not in (None, ["NONE"])
    dockerfile = dockerfile_of(service)
    return bool(dockerfile and dockerfile.is_file()
                and any(k == "HEALTHCHECK" and not a.upper().startswith("NONE")
                        for k, a in dockerfile_instructions(dockerfile)))


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    """``{dependency: condition}`` from either form of ``depends_on``."""
    deps = service.get("depends_on", {})
    if isinstance(deps, list):
        return {name: "service_started" for name in deps}
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def known_env_names() -> set[str]:
    """Every ``ROCKETKAFKA_*`` variable the code reads through its pydantic settings (+ the Spark ones)."""
    from rocketkafka.tools.forwarder_cli import ForwarderSettings
    from rocketkafka.schedule.levels import DelayConfig
    from rocketkafka.config import Settings
    from rocketkafka.spark.connector import CONNECTOR_ENV, JARS_DIR_ENV
    from rocketkafka.spark.engine import ENGINE_ENV
    from rocketkafka.txn.options import _CheckerEnvironment

    names = {ENGINE_ENV, CONNECTOR_ENV, JARS_DIR_ENV, "ROCKETKAFKA_SPARK_MASTER", "ROCKETKAFKA_HOME"}
    for cls in (Settings, ForwarderSettings, DelayConfig, _CheckerEnvironment):
        prefix = cls.model_config["env_prefix"]
        names |= {(prefix + field).upper() for field in cls.model_fields}
    return names


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    return load_compose()["services"]


def _rocketkafka_services(services: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    runs = {name: rocketkafka_args(svc) for name, svc in services.items()}
    return {name: args for name, args in runs.items() if args is not None}


# -- the compose file -----------------------------------------------------------------------

def test_built_images_have_a_dockerfile(services: dict[str, dict[str, Any]]) -> None:
    built = {name: dockerfile_of(svc) for name, svc in services.items() if "build" in svc}
    assert built, "no service builds an image"
    missing = {name: str(path) for name, path in built.items() if path is None or not path.is_file()}
    assert not missing, f"build without a Dockerfile: {missing}"


def test_sidecars_run_real_cli_commands(services: dict[str, dict[str, Any]]) -> None:
    runs = _rocketkafka_services(services)
    paths = {}
    for name, args in runs.items():
        try:
            paths[name] = resolve_cli(args)
        except click.ClickException as exc:
            pytest.fail(f"service {name}: `rocketkafka {shlex.join(args)}` does not parse: {exc.format_message()}")
    # the stack the issue asks for: forwarder, checker and a Spark job
    assert ["delay-forwarder"] in paths.values()
    assert ["txn-checker"] in paths.values()
    assert any(path[0] == "spark" for path in paths.values()), paths


def test_resolve_cli_rejects_what_the_cli_rejects() -> None:
    assert resolve_cli(["delay-forwarder", "--metrics-port", "9400"]) == ["delay-forwarder"]
    assert resolve_cli(["spark", "audit-delay", "orders", "--engine", "python"]) == ["spark", "audit-delay"]
    for bad in (["no-such-command"], ["delay-forwarder", "--no-such-option"], ["txn-checker", "--metrics-port", "x"],
                ["spark", "audit-delay"], ["spark"]):
        with pytest.raises(click.UsageError):
            resolve_cli(bad)


def test_dependencies_exist_and_are_waitable(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        for dep, condition in depends_on(svc).items():
            assert dep in services, f"{name} depends on unknown service {dep}"
            if condition == "service_healthy":
                assert has_healthcheck(services[dep]), f"{name} waits for {dep} to be healthy, it has no health check"
            if condition == "service_completed_successfully":
                assert is_one_shot(services[dep]), f"{name} waits for {dep} to complete, it is not a one-shot job"


def test_every_service_has_a_healthcheck_or_is_a_job(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        assert has_healthcheck(svc) or is_one_shot(svc), f"{name}: no health check and not a one-shot job"
        if not is_one_shot(svc):
            assert svc.get("restart") in ("unless-stopped", "always"), f"{name}: long-running without a restart policy"


def test_sidecar_healthcheck_probes_its_metrics_port(services: dict[str, dict[str, Any]]) -> None:
    for name, args in _rocketkafka_services(services).items():
        svc = services[name]
        if is_one_shot(svc):
            continue
        assert "--metrics-port" in args, f"{name} serves no metrics for its health check"
        port = args[args.index("--metrics-port") + 1]
        probe = " ".join(map(str, svc["healthcheck"]["test"]))
        assert f"127.0.0.1:{port}/metrics" in probe, f"{name}: health check does not probe port {port}"
        assert str(svc.get("environment", {}).get("METRICS_PORT", port)) == port, f"{name}: METRICS_PORT != {port}"


def test_forwarder_has_two_replicas(services: dict[str, dict[str, Any]]) -> None:
    forwarders = [n for n, args in _rocketkafka_services(services).items() if args[:1] == ["delay-forwarder"]]
    assert len(forwarders) == 1
    assert services[forwarders[0]]["deploy"]["replicas"] == 2


def test_kafka_is_kraft_and_there_are_three_redis_nodes(services: dict[str, dict[str, Any]]) -> None:
    kafka = services["kafka"]
    env = kafka["environment"]
    assert {"broker", "controller"} <= set(str(env["KAFKA_PROCESS_ROLES"]).split(","))
    assert str(env["KAFKA_NODE_ID"]) in str(env["KAFKA_CONTROLLER_QUORUM_VOTERS"]).split("@")[0]
    assert "CONTROLLER" in str(env["KAFKA_CONTROLLER_LISTENER_NAMES"])
    assert str(env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"]) == "1"
    assert has_healthcheck(kafka)
    redis = [n for n, svc in services.items() if str(svc.get("image", "")).startswith("redis")]
    assert len(redis) == 3
    sidecar_env = next(svc["environment"] for svc in services.values() if "build" in svc)
    urls = sidecar_env["ROCKETKAFKA_REDIS_URLS"].split(",")
    assert sorted(u.split("//")[1].split(":")[0] for u in urls) == sorted(redis)
    assert sidecar_env["ROCKETKAFKA_BOOTSTRAP_SERVERS"].split(":")[0] == "kafka"


def test_compose_runs_the_kafka_release_the_tests_run(services: dict[str, dict[str, Any]]) -> None:
    """docker/compose.yaml and the embedded/testcontainers Apache Kafka stay on one release."""
    from rocketkafka.testing.apache_kafka import KAFKA_VERSION

    assert services["kafka"]["image"] == f"apache/kafka:{KAFKA_VERSION}"


def test_settings_variables_are_real(services: dict[str, dict[str, Any]]) -> None:
    known = known_env_names()
    used = {key for svc in services.values() for key in svc.get("environment", {}) if key.startswith("ROCKETKAFKA_")}
    for keyword, args in dockerfile_instructions(SIDECAR_DOCKERFILE):
        if keyword == "ENV":
            used |= set(re.findall(r"\b(ROCKETKAFKA_[A-Z_]+)=", args))
    assert used and used <= known, f"unknown settings: {sorted(used - known)}"


def _compose_client() -> list[str] | None:
    """A compose client with a ``config`` command: the docker plugin, docker-compose, or podman-compose."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("podman-compose"):
        help_text = subprocess.run(["podman-compose", "--help"], capture_output=True, text=True).stdout
        if re.search(r"\bconfig\b", help_text):  # older releases have no `config`
            return ["podman-compose"]
    return None


def test_compose_client_accepts_the_file() -> None:
    client = _compose_client()
    if client is None:
        pytest.skip("no compose client with `config` installed (docker compose, docker-compose, podman-compose)")
    result = subprocess.run([*client, "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"{' '.join(client)} config: {result.stdout}{result.stderr}"


# -- the sidecar image -------------------------------------------------------------------------

def test_dockerfile_runs_rocketkafka_with_a_healthcheck() -> None:
    instructions = dockerfile_instructions(SIDECAR_DOCKERFILE)
    keywords = [k for k, _ in instructions]
    entry = [a for k, a in instructions if k == "ENTRYPOINT"]
    assert entry and exec_form(entry[-1]) == ["rocketkafka"]
    health = [a for k, a in instructions if k == "HEALTHCHECK"]
    assert health and "/metrics" in health[-1]
    user = [a for k, a in instructions if k == "USER"]
    assert user and user[-1] not in ("root", "0"), "the sidecars must not run as root"
    assert "ARG" in keywords[: keywords.index("FROM")], "the base image is an ARG"
    assert (REPO / ".dockerignore").is_file(), "the build context (repo root) needs a .dockerignore"


def test_the_spark_job_reads_through_sparks_kafka_source_whose_jars_the_image_carries(
        services: dict[str, dict[str, Any]]) -> None:
    """The compose Spark job asks for the JVM engine (it fails, not falls back, without the jars), and the image
    carries the jars: a build stage fetches them with ``rocketkafka spark connector`` into the directory the final
    stage copies and names in ``ROCKETKAFKA_SPARK_JARS_DIR``."""
    spark_jobs = {name: args for name, args in _rocketkafka_services(services).items() if args[0] == "spark"}
    assert spark_jobs and all(args[args.index("--engine") + 1] == "jvm" for args in spark_jobs.values()), spark_jobs
    instructions = dockerfile_instructions(SIDECAR_DOCKERFILE)
    stages = [i for i, (k, _) in enumerate(instructions) if k == "FROM"]
    fetch_stage, final = instructions[stages[0]:stages[-1]], instructions[stages[-1]:]
    stage_name = instructions[stages[0]][1].split()[-1]
    assert len(stages) == 2 and " AS " in instructions[stages[0]][1].upper()
    assert any(k == "RUN" and "rocketkafka spark connector" in a for k, a in fetch_stage)
    jars_dir = next(re.search(r"ROCKETKAFKA_SPARK_JARS_DIR=(\S+)", a).group(1) for k, a in final
                    if k == "ENV" and "ROCKETKAFKA_SPARK_JARS_DIR=" in a)
    assert (f"--from={stage_name} {jars_dir} {jars_dir}") in {a for k, a in final if k == "COPY"}
    assert any(k == "ENV" and f"ROCKETKAFKA_SPARK_JARS_DIR={jars_dir}" in a for k, a in fetch_stage)
