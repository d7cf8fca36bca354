"""Why a Kafka client cannot connect, when the broker refuses who it is: credentials, TLS, or the protocol.

librdkafka reports these only in its log and its error callback (served by ``poll()``), retries
the connection every few dozen milliseconds, and fails a metadata call after its whole timeout with
``_TRANSPORT`` "Broker transport failure", which names none of them. Measured with Apache Kafka 4.1
behind a ``SASL_SSL`` listener, it logs:

- a wrong password or an unknown user: ``SASL authentication error: Authentication failed during
  authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512``;
- a CA it does not trust, and as well a certificate that does not name the host dialled:
  ``SSL handshake failed: ... certificate verify failed`` (so a TLS handshake of our own,
  :func:`tls_problem`, tells the two apart);
- a ``PLAINTEXT`` client: ``Disconnected ... (after 2ms in state APIVERSION_QUERY)`` -- the broker
  dropped our first request (so :func:`speaks_tls` asks whether it expects TLS).

A :class:`LogWatch` is the ``logger`` of the clients that ask for metadata first (``TopicAdmin``):
it keeps those lines, and :func:`authentication_error` turns them into one
:class:`~rocketkafka.errors.AuthenticationError` that says which, and what to set.
"""

from __future__ import annotations

import os
import re
import socket
import ssl
from collections import deque
from collections.abc import Mapping
from typing import Any

from rocketkafka.errors import AuthenticationError
from rocketkafka.refusals import principal_of

#: librdkafka log lines that tell a refusal of who we are (or a connection closed before any answer).
_TELLING = re.compile(r"SASL authentication|Authentication failed|SASL mechanism|SSL handshake failed|"
                      r"in state APIVERSION_QUERY|in state AUTH|SSL_HANDSHAKE", re.I)
#: librdkafka log lines that tell no broker could be reached at all (nothing listens, no such host).
_UNREACHABLE = re.compile(r"Connect to .* failed|Connection refused|Failed to resolve|Name or service not known",
                          re.I)
#: A librdkafka line of a connection the server closed at our first request (one line, not two lines apart).
_DROPPED_AT_FIRST_REQUEST = re.compile(r"Disconnected.*in state APIVERSION_QUERY")
#: Seconds our own TLS handshake with the broker may take.
PROBE_TIMEOUT_S = 3.0
#: OpenSSL's verify codes for a certificate that does not name the host (DNS name, e-mail, IP address).
_NAME_MISMATCH = frozenset({62, 63, 64})


class LogWatch:
    """A librdkafka ``logger`` that keeps the last lines telling a refusal (see the module docstring).

    It writes nothing: the clients it watches (``TopicAdmin``'s) were never polled before, so their
    lines were never shown; what they tell ends up in the error they raise.
    """

    def __init__(self) -> None:
        self.lines: deque[str] = deque(maxlen=8)
        self.unreachable = False  #: a line said that no broker could be reached (nothing listens, no such host)

    def log(self, level: int, msg: str, *args: Any) -> None:
        text = msg % args if args else msg
        if _TELLING.search(text):
            self.lines.append(text)
        elif _UNREACHABLE.search(text):
            self.unreachable = True


def first_address(bootstrap_servers: str) -> tuple[str, int] | None:
    """``(host, port)`` of the first of ``bootstrap.servers`` (``SASL_SSL://h:9093,...``), if it parses."""
    first = bootstrap_servers.split(",")[0].strip()
    first = first.split("://", 1)[-1]
    host, _, port = first.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        return None
    return host, int(port)


def tls_problem(host: str, port: int, ca_location: str | None, check_hostname: bool = True,
                timeout: float = PROBE_TIMEOUT_S) -> tuple[str, str] | None:
    """What fails in a TLS handshake with ``host:port`` trusting ``ca_location`` (a file, a folder, or
    ``None``/``probe``: the system's CAs): ``("tls-hostname" | "tls-trust" | "tls" | "unreachable", why)``,
    or ``None`` when it succeeds."""
    try:
        if ca_location and ca_location != "probe" and os.path.isdir(ca_location):
            context = ssl.create_default_context(capath=ca_location)
        elif ca_location and ca_location != "probe":
            context = ssl.create_default_context(cafile=ca_location)
        else:
            context = ssl.create_default_context()
    except (OSError, ssl.SSLError) as exc:
        return "tls-trust", f"the CA file {ca_location} cannot be read: {exc}"
    context.check_hostname = check_hostname
    try:
        with socket.create_connection((host, port), timeout) as raw, \
                context.wrap_socket(raw, server_hostname=host):
            return None
    except ssl.SSLCertVerificationError as exc:
        kind = "tls-hostname" if exc.verify_code in _NAME_MISMATCH else "tls-trust"
        return kind, exc.verify_message or str(exc)
    except ssl.SSLError as exc:
        return "tls", exc.reason or str(exc)
    except OSError as exc:
        return "unreachable", str(exc)


def speaks_tls(host: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether the server at ``host:port`` completes a TLS handshake (its certificate not checked)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout) as raw, context.wrap_socket(raw, server_hostname=host):
            return True
    except (OSError, ssl.SSLError):
        return False


def authentication_error(lines: list[str], config: Mapping[str, Any], bootstrap_servers: str) -> \
        AuthenticationError | None:
    """The :class:`AuthenticationError` librdkafka's ``lines`` tell of a client with ``config``, or ``None``."""
    telling = " | ".join(lines)
    if not telling:
        return None
    protocol = str(config.get("security.protocol") or "plaintext").upper()
    mechanism = str(config.get("sasl.mechanism") or config.get("sasl.mechanisms") or "GSSAPI")
    user, principal = config.get("sasl.username"), principal_of(config)
    where = f"Kafka at {bootstrap_servers}"
    last = lines[-1]
    if re.search(r"SASL authentication error|Authentication failed", telling, re.I):
        return AuthenticationError(
            f"{where} refused the credentials of user {user!r} (SASL {mechanism}: wrong password or unknown "
            f"user); check sasl.username and sasl.password", reason="credentials", address=bootstrap_servers,
            setting="sasl.username, sasl.password", principal=principal)
    if re.search(r"SASL mechanism|Unsupported SASL", telling, re.I):
        return AuthenticationError(f"{where} does not take SASL mechanism {mechanism} ({_detail(last)}); check "
                                   "sasl.mechanism", reason="mechanism", address=bootstrap_servers,
                                   setting="sasl.mechanism", principal=principal)
    address = first_address(bootstrap_servers)
    if "SSL handshake failed" in telling or "SSL_HANDSHAKE" in telling:
        return _tls_error(where, last, config, address, bootstrap_servers, principal)
    dropped = any(_DROPPED_AT_FIRST_REQUEST.search(line) for line in lines)
    if dropped and protocol in ("PLAINTEXT", "SASL_PLAINTEXT") and address is not None and speaks_tls(*address):
        # a server that answers TLS and closes our plaintext request at once is a TLS listener (a port that
        # speaks no TLS: a broker restarting may have dropped us, no refusal: wait for it)
        return AuthenticationError(
            f"{where} closed the connection at the first request: it expects TLS (it answers a TLS handshake), and "
            f"this client's security.protocol is {protocol}; set security.protocol (SASL_SSL or SSL, with "
            "ssl.ca.location) and the broker's credentials (sasl.mechanism, sasl.username, sasl.password)",
            reason="protocol", address=bootstrap_servers, setting="security.protocol", principal=principal)
    return None


def _tls_error(where: str, last: str, config: Mapping[str, Any], address: tuple[str, int] | None,
               bootstrap_servers: str, principal: str | None) -> AuthenticationError | None:
    """The TLS failure librdkafka logged, told apart by a handshake of our own (an untrusted CA and a host
    name the certificate lacks read the same in librdkafka's line); ``None`` when our handshake succeeds, or
    cannot be made and librdkafka's line names no certificate (a broker restarting, not a refusal)."""
    ca = config.get("ssl.ca.location")
    check = str(config.get("ssl.endpoint.identification.algorithm") or "https").lower() != "none"
    found = tls_problem(*address, ca, check) if address is not None else None
    if found is None and address is not None:
        return None
    if found is None or found[0] == "unreachable":
        if "certificate verify failed" not in last:
            return None
        found = ("tls-trust", _detail(last))
    kind, why = found
    if kind == "tls-hostname":
        message = (f"TLS to {where} failed: the broker's certificate does not name {address[0] if address else '?'} "
                   f"({why}); dial a name the certificate lists (bootstrap.servers and the advertised listeners), "
                   "or give the broker a certificate for this name")
        setting = "bootstrap.servers"
    elif kind == "tls-trust" or "certificate verify failed" in last:
        kind = "tls-trust"
        message = (f"TLS to {where} failed: the broker's certificate is not signed by a CA this client trusts "
                   f"({why}); set ssl.ca.location to the CA that signed it (now {ca or 'the system CAs'})")
        setting = "ssl.ca.location"
    else:
        message = (f"TLS to {where} failed ({why}); check security.protocol "
                   f"({str(config.get('security.protocol') or 'PLAINTEXT').upper()}) and that the port speaks TLS")
        setting = "security.protocol"
    return AuthenticationError(message, reason=kind, address=bootstrap_servers, setting=setting, principal=principal)


def _detail(line: str) -> str:
    """The cause in a librdkafka line: after the broker's name, without the timing."""
    text = re.sub(r"\s*\(after \d+ms in state \w+\)", "", line)
    return text.rsplit("]: ", 1)[-1].strip()
