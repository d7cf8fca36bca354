"""Kafka client security settings in both dialects: librdkafka's (ours) and the Java client's (Spark's JVM source).

rocketkafka's settings are confluent-kafka's (``Settings.kafka``, ``ROCKETKAFKA_KAFKA``, the
``ROCKETKAFKA_CONFIG_FILE`` properties), and the Python reader hands them to librdkafka as they
are. Spark's JVM Kafka source runs kafka-clients, which spells the same things differently and
silently ignores librdkafka's names (a ``sasl.username`` reaches no one and the login fails).
:func:`java_settings` translates, once, for every JVM read:

=========================================================  ==================================================
librdkafka                                                  Java client
=========================================================  ==================================================
``security.protocol`` (any case)                            the same, upper case
``sasl.mechanism`` / ``sasl.mechanisms``                    ``sasl.mechanism``
``sasl.username`` + ``sasl.password`` (PLAIN, SCRAM-*)      ``sasl.jaas.config`` (Plain/ScramLoginModule)
``ssl.ca.location`` (a PEM file)                            ``ssl.truststore.type=PEM`` + ``ssl.truststore.location``
``ssl.ca.pem``                                              ``ssl.truststore.type=PEM`` + ``ssl.truststore.certificates``
``ssl.certificate.location`` + ``ssl.key.location``         ``ssl.keystore.type=PEM`` + ``ssl.keystore.certificate.chain``
(or ``.pem``), ``ssl.key.password``                         + ``ssl.keystore.key`` (read on the driver, inline), ``ssl.key.password``
``ssl.keystore.location`` + ``ssl.keystore.password``       the same + ``ssl.keystore.type=PKCS12``
``ssl.endpoint.identification.algorithm`` https / none      ``https`` / empty
``enable.ssl.certificate.verification=true``                (the default; dropped)
=========================================================  ==================================================

PEM truststores and keystores are kafka-clients' own since 2.7 (KIP-651); the keystore's key must be PKCS#8
(``BEGIN PRIVATE KEY`` / ``BEGIN ENCRYPTED PRIVATE KEY``). What has no faithful translation (GSSAPI,
OAUTHBEARER, switched-off certificate verification, OpenSSL cipher lists, a CA directory) raises
:class:`~rocketkafka.spark.errors.SourceOptionError` naming the setting: pass the Java settings yourself
(``kafka.sasl.jaas.config`` ...), which go through unchanged. Settings that are not about security go through
unchanged as well.

:func:`librdkafka_settings` goes the other way for the Java settings a Spark pipeline may carry
(a PLAIN/SCRAM ``sasl.jaas.config``, PEM truststores and keystores), so the same options run on the
Python reader and in the driver-side checks of the JVM engine.

Secrets: the translated values hold the password (in the JAAS string) and maybe a private key; the
sessions of :func:`~rocketkafka.spark.session.spark_session` redact such options in every plan
(:func:`~rocketkafka.spark.session.protect_secrets`), and no error here repeats a value.

>>> java_settings({"security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "app",
...                "sasl.password": "pw", "ssl.ca.location": "/etc/ca.pem"})["sasl.jaas.config"]
'org.apache.kafka.common.security.scram.ScramLoginModule required username="app" password="pw";'
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from rocketkafka.spark.errors import SourceOptionError

#: Login modules of the SASL mechanisms whose JAAS configuration is a user name and a password.
JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

#: librdkafka settings with no faithful Java counterpart, and what to do instead.
_NOT_TRANSLATED = {
    "sasl.kerberos.keytab": "GSSAPI is not translated",
    "sasl.kerberos.principal": "GSSAPI is not translated",
    "sasl.kerberos.kinit.cmd": "GSSAPI is not translated",
    "sasl.kerberos.min.time.before.relogin": "GSSAPI is not translated",
    "sasl.oauthbearer.config": "OAUTHBEARER is not translated",
    "sasl.oauthbearer.method": "OAUTHBEARER is not translated",
    "sasl.oauthbearer.client.id": "OAUTHBEARER is not translated",
    "sasl.oauthbearer.client.secret": "OAUTHBEARER is not translated",
    "sasl.oauthbearer.scope": "OAUTHBEARER is not translated",
    "sasl.oauthbearer.extensions": "OAUTHBEARER is not translated",
    "enable.sasl.oauthbearer.unsecure.jwt": "OAUTHBEARER is not translated",
    "ssl.cipher.suites": "OpenSSL cipher names differ from Java's (set kafka.ssl.cipher.suites in Java's names "
                         "for engine='jvm' only)",
    "ssl.curves.list": "no Java counterpart",
    "ssl.sigalgs.list": "no Java counterpart",
    "ssl.crl.location": "no Java client setting (the JVM's own revocation checking applies)",
    "ssl.engine.location": "no Java counterpart",
    "ssl.engine.id": "no Java counterpart",
    "ssl.providers": "no Java counterpart",
}

_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----\s.*?-----END \1-----", re.S)
_PKCS8 = ("PRIVATE KEY", "ENCRYPTED PRIVATE KEY")
_JAAS = re.compile(r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)(?P<body>.*?);?\s*$", re.S)
_JAAS_OPTION = re.compile(r'\s*(?P<key>[\w.-]+)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<plain>[^\s";]+))')


def _error(setting: str, reason: str) -> SourceOptionError:
    return SourceOptionError(f"kafka.{setting}", reason)


def _jaas_quote(value: str) -> str:
    """A JAAS option value: double quotes, with ``\\`` and ``"`` escaped (Java's StreamTokenizer reads them)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def jaas_config(mechanism: str, username: str, password: str) -> str:
    """Java's ``sasl.jaas.config`` for a PLAIN or SCRAM user.

    Raises:
        SourceOptionError: another mechanism (naming ``kafka.sasl.mechanism``).
    """
    module = JAAS_MODULES.get(mechanism.strip().upper())
    if module is None:
        raise _error("sasl.mechanism", f"{mechanism.strip().upper()} is not translated to Java's sasl.jaas.config "
                                       f"(translated: {', '.join(JAAS_MODULES)}); pass kafka.sasl.jaas.config yourself "
                                       "for engine='jvm'")
    return f"{module} required username={_jaas_quote(username)} password={_jaas_quote(password)};"


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """The login module and options of a one-module ``sasl.jaas.config`` (no value is ever put in an error).

    Raises:
        SourceOptionError: not ``<module> required key="value" ...;``.
    """
    match = _JAAS.match(text)
    if match is None:
        raise _error("sasl.jaas.config", "expected '<LoginModule class> required key=\"value\" ...;'")
    body, options, position = match.group("body"), {}, 0
    while position < len(body.rstrip()):
        option = _JAAS_OPTION.match(body, position)
        if option is None:
            raise _error("sasl.jaas.config", "cannot read its options (expected key=\"value\" pairs)")
        quoted = option.group("quoted")
        options[option.group("key")] = (re.sub(r"\\(.)", r"\1", quoted, flags=re.S) if quoted is not None
                                        else option.group("plain"))
        position = option.end()
    return match.group("module"), options


def _pem_blocks(text: str, setting: str) -> list[tuple[str, str]]:
    blocks = [(m.group(1), m.group(0)) for m in _PEM_BLOCK.finditer(text)]
    if not blocks:
        raise _error(setting, "holds no PEM block")
    return blocks


def _read_pem(path: str, setting: str) -> str:
    try:
        with open(os.path.expanduser(path), encoding="ascii") as pem:
            return pem.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise _error(setting, f"cannot read {path}: {getattr(exc, 'strerror', None) or type(exc).__name__}") from None


def _keystore(params: dict[str, str], out: dict[str, str]) -> None:
    """librdkafka's client certificate and key (files or inline PEM) as Java's inline PEM keystore."""
    cert_location, key_location = params.pop("ssl.certificate.location", None), params.pop("ssl.key.location", None)
    cert_pem, key_pem = params.pop("ssl.certificate.pem", None), params.pop("ssl.key.pem", None)
    if cert_location is None and key_location is None and cert_pem is None and key_pem is None:
        return
    if cert_location is not None and cert_pem is not None:
        raise _error("ssl.certificate.pem", "set either it or ssl.certificate.location, not both")
    if key_location is not None and key_pem is not None:
        raise _error("ssl.key.pem", "set either it or ssl.key.location, not both")
    if "ssl.keystore.location" in params:
        raise _error("ssl.keystore.location", "set either a keystore or ssl.certificate.*/ssl.key.*, not both")
    cert_setting = "ssl.certificate.location" if cert_location is not None else "ssl.certificate.pem"
    key_setting = "ssl.key.location" if key_location is not None else "ssl.key.pem"
    cert_text = _read_pem(cert_location, cert_setting) if cert_location is not None else cert_pem
    key_text = _read_pem(key_location, key_setting) if key_location is not None else key_pem
    if cert_text is None:
        raise _error("ssl.certificate.location", f"needed with kafka.{key_setting} (the client certificate)")
    if key_text is None:
        raise _error("ssl.key.location", f"needed with kafka.{cert_setting} (the client certificate's key)")
    chain = [block for kind, block in _pem_blocks(cert_text, cert_setting) if kind == "CERTIFICATE"]
    keys = [(kind, block) for kind, block in _pem_blocks(key_text, key_setting) if kind.endswith("PRIVATE KEY")]
    if not chain:
        raise _error(cert_setting, "holds no CERTIFICATE block")
    if not keys:
        raise _error(key_setting, "holds no private key")
    kind, key = keys[0]
    if kind not in _PKCS8:
        raise _error(key_setting, f"Java's PEM keystore reads PKCS#8 keys only, this one is '{kind}': convert it "
                                  "with `openssl pkcs8 -topk8 -in key.pem -out key-pkcs8.pem` (add -nocrypt to keep "
                                  "it unencrypted)")
    password = params.pop("ssl.key.password", None)
    if kind == "ENCRYPTED PRIVATE KEY" and password is None:
        raise _error("ssl.key.password", f"needed: the key of kafka.{key_setting} is encrypted")
    out.update({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": "\n".join(chain),
                "ssl.keystore.key": key})
    if kind == "ENCRYPTED PRIVATE KEY":  # Java refuses a password for a key that is not encrypted
        out["ssl.key.password"] = password or ""


def java_settings(kafka: Mapping[str, str]) -> dict[str, str]:
    """Java client settings for librdkafka-style ``kafka`` (see the module's table); other settings unchanged.

    Java settings already given (``sasl.jaas.config``, ``ssl.truststore.*``, ...) go through unchanged;
    giving one beside the librdkafka setting it would be made from is refused.

    Raises:
        SourceOptionError: a setting without a faithful Java counterpart, or conflicting settings (named as
            ``kafka.<setting>``; values are never repeated).
    """
    params = {str(k).strip().lower(): str(v) for k, v in kafka.items()}
    out: dict[str, str] = {}
    for setting, reason in _NOT_TRANSLATED.items():
        if setting in params:
            raise _error(setting, f"a librdkafka setting without a Java counterpart for Spark's JVM source: {reason}; "
                                  "pass the Java client's settings (kafka.sasl.jaas.config ...) yourself, or use "
                                  "engine='python'")
    protocol = params.pop("security.protocol", None)
    if protocol is not None:
        protocol = protocol.strip().upper()
        if protocol not in PROTOCOLS:
            raise _error("security.protocol", f"expected one of {', '.join(PROTOCOLS)}")
        out["security.protocol"] = protocol
    mechanisms = params.pop("sasl.mechanisms", None)
    mechanism = params.pop("sasl.mechanism", None)
    if mechanisms is not None and mechanism is not None and mechanisms.strip().upper() != mechanism.strip().upper():
        raise _error("sasl.mechanisms", "differs from kafka.sasl.mechanism (librdkafka's alias of it)")
    mechanism = (mechanism or mechanisms or "").strip().upper() or None
    if mechanism is not None:
        out["sasl.mechanism"] = mechanism
    username, password = params.pop("sasl.username", None), params.pop("sasl.password", None)
    if username is not None or password is not None:
        if "sasl.jaas.config" in params:
            raise _error("sasl.jaas.config", "set either it or kafka.sasl.username/kafka.sasl.password, not both")
        if username is None:
            raise _error("sasl.username", "needed with kafka.sasl.password")
        if password is None:
            raise _error("sasl.password", "needed with kafka.sasl.username")
        if mechanism is None:
            raise _error("sasl.mechanism", "needed with kafka.sasl.username (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; "
                                           "both clients would otherwise try GSSAPI)")
        out["sasl.jaas.config"] = jaas_config(mechanism, username, password)
    elif (protocol or "").startswith("SASL") and mechanism not in (None, "GSSAPI") and "sasl.jaas.config" not in params:
        raise _error("sasl.username", f"needed for SASL {mechanism} (with kafka.sasl.password)")

    ca_location, ca_pem = params.pop("ssl.ca.location", None), params.pop("ssl.ca.pem", None)
    if ca_location is not None or ca_pem is not None:
        if ca_location is not None and ca_pem is not None:
            raise _error("ssl.ca.pem", "set either it or ssl.ca.location, not both")
        if "ssl.truststore.location" in params or "ssl.truststore.certificates" in params:
            raise _error("ssl.ca.location", "set either it or Java's ssl.truststore.*, not both")
        out["ssl.truststore.type"] = "PEM"
        if ca_location is not None:
            if ca_location.strip().lower() == "probe":
                raise _error("ssl.ca.location", "'probe' (the system's CA store) has no Java counterpart: leave it out "
                                                "(the JVM trusts its own cacerts) or name a PEM file")
            if os.path.isdir(os.path.expanduser(ca_location)):
                raise _error("ssl.ca.location", "is a directory; Java's PEM truststore is one file of certificates")
            out["ssl.truststore.location"] = ca_location
        else:
            out["ssl.truststore.certificates"] = ca_pem or ""
    _keystore(params, out)
    if "ssl.keystore.location" in params and "ssl.keystore.type" not in params:
        out["ssl.keystore.type"] = "PKCS12"  # librdkafka's keystore is always PKCS#12
    verify = params.pop("enable.ssl.certificate.verification", None)
    if verify is not None and verify.strip().lower() not in ("true", "1"):
        raise _error("enable.ssl.certificate.verification", "switching certificate verification off has no Java "
                                                            "client setting: trust the broker's CA instead "
                                                            "(kafka.ssl.ca.location)")
    algorithm = params.pop("ssl.endpoint.identification.algorithm", None)
    if algorithm is not None:
        algorithm = algorithm.strip().lower()
        if algorithm not in ("https", "none", ""):
            raise _error("ssl.endpoint.identification.algorithm", "expected https or none")
        out["ssl.endpoint.identification.algorithm"] = "https" if algorithm == "https" else ""
    return {**params, **out}


def librdkafka_settings(kafka: Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings for Java-style security settings in ``kafka``; others unchanged (see the module's doc).

    Translated: a PLAIN/SCRAM ``sasl.jaas.config``, PEM truststores (``ssl.truststore.location`` /
    ``.certificates`` with ``ssl.truststore.type=PEM``), PEM keystores (inline, or one file holding the key
    and the chain), PKCS#12 keystores, and an empty ``ssl.endpoint.identification.algorithm``.

    Raises:
        SourceOptionError: a Java setting librdkafka cannot honour (a JKS store, another login module), or
            conflicting settings.
    """
    params = {str(k).strip().lower(): str(v) for k, v in kafka.items()}
    out: dict[str, str] = {}
    jaas = params.pop("sasl.jaas.config", None)
    if jaas is not None:
        if "sasl.username" in params or "sasl.password" in params:
            raise _error("sasl.jaas.config", "set either it or kafka.sasl.username/kafka.sasl.password, not both")
        module, options = parse_jaas(jaas)
        if module not in JAAS_MODULES.values():
            raise _error("sasl.jaas.config", f"the login module {module} is not translated for librdkafka (translated: "
                                             "PlainLoginModule, ScramLoginModule); use sasl.username/sasl.password")
        if "username" not in options or "password" not in options:
            raise _error("sasl.jaas.config", "needs both username and password")
        out["sasl.username"], out["sasl.password"] = options["username"], options["password"]

    store_type = params.pop("ssl.truststore.type", None)
    location, certificates = params.pop("ssl.truststore.location", None), params.pop("ssl.truststore.certificates", None)
    password = params.pop("ssl.truststore.password", None)
    if location is not None or certificates is not None:
        if (store_type or "JKS").strip().upper() != "PEM":
            raise _error("ssl.truststore.type", f"librdkafka reads PEM CA certificates only, not "
                                                f"{(store_type or 'JKS (the default)').strip()}: export them "
                                                "(`keytool -exportcert -rfc`) and set kafka.ssl.ca.location")
        if "ssl.ca.location" in params or "ssl.ca.pem" in params:
            raise _error("ssl.truststore.location", "set either it or ssl.ca.location, not both")
        if location is not None:
            out["ssl.ca.location"] = location
        else:
            out["ssl.ca.pem"] = certificates or ""
    elif password is not None:
        raise _error("ssl.truststore.password", "without a truststore")

    key_type = params.get("ssl.keystore.type", "").strip().upper()
    if key_type:
        params.pop("ssl.keystore.type")
        if key_type == "PEM":
            chain, key = params.pop("ssl.keystore.certificate.chain", None), params.pop("ssl.keystore.key", None)
            store = params.pop("ssl.keystore.location", None)
            if store is not None:  # one file holding the key and the chain: librdkafka reads each from it
                out["ssl.certificate.location"] = out["ssl.key.location"] = store
            elif chain is not None and key is not None:
                out["ssl.certificate.pem"], out["ssl.key.pem"] = chain, key
            else:
                raise _error("ssl.keystore.key", "a PEM keystore needs ssl.keystore.location, or both "
                                                 "ssl.keystore.key and ssl.keystore.certificate.chain")
        elif key_type != "PKCS12":
            raise _error("ssl.keystore.type", f"librdkafka reads PKCS12 or PEM keystores, not {key_type}")
    algorithm = params.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None and not algorithm.strip():
        params["ssl.endpoint.identification.algorithm"] = "none"
    return {**params, **out}


def jvm_source_options(options: Mapping[str, str]) -> dict[str, str]:
    """Source options for Spark's JVM ``kafka`` source: the ``kafka.*`` ones through :func:`java_settings`."""
    kafka = {str(k)[len("kafka."):]: v for k, v in options.items() if str(k).lower().startswith("kafka.")}
    rest = {k: v for k, v in options.items() if not str(k).lower().startswith("kafka.")}
    return {**rest, **{f"kafka.{k}": v for k, v in java_settings(kafka).items()}}
