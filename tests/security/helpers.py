"""Helpers of the security tests: a TCP forwarder (a broker reached by a name its certificate lacks), client
settings that the secured stack refuses, and counting what a refusal wrote to the log."""

from __future__ import annotations

import logging
import socket
import threading
from pathlib import Path

from rocketkafka.config import Settings
from rocketkafka.testing.secure import TlsFiles

#: The loopback address the forwarder listens on: Linux routes all of 127/8 to lo, and the broker's
#: certificate names only 127.0.0.1 and localhost.
OTHER_LOOPBACK = "127.0.0.2"
#: Log lines a refusal may write while it is found and raised (the librdkafka line once, our error once).
LINES_PER_REFUSAL = 4


class TcpForwarder:
    """Listens on ``host`` (a free port) and pipes every connection to ``target``; a context manager."""

    def __init__(self, target: tuple[str, int], host: str = OTHER_LOOPBACK) -> None:
        self.target = target
        self._server = socket.create_server((host, 0))
        self._server.settimeout(0.1)  # accept() wakes up to see the forwarder closed
        self.address = f"{host}:{self._server.getsockname()[1]}"
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="tcp-forwarder", daemon=True)

    def __enter__(self) -> TcpForwarder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed.set()
        self._server.close()
        self._thread.join(5)

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
                client.settimeout(None)
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def broker_address(settings: Settings) -> tuple[str, int]:
    host, _, port = settings.bootstrap_servers.split(",")[0].rpartition(":")
    return host, int(port)


def refused_settings(case: str, admin: Settings, tmp_path: Path, forwarder_address: str | None = None) -> Settings:
    """The super user's settings, changed the way ``case`` says (Redis stays the super user's)."""
    kafka = dict(admin.kafka)
    servers = admin.bootstrap_servers
    if case == "unauthenticated":
        kafka = {}  # PLAINTEXT, no SASL: the broker has no such listener
    elif case == "wrong password":
        kafka["sasl.password"] = "not-the-Secret-7"
    elif case == "untrusted CA":
        kafka["ssl.ca.location"] = str(TlsFiles.make(tmp_path / "other-ca").ca)
    elif case == "hostname mismatch":
        assert forwarder_address is not None
        servers = forwarder_address
    else:
        raise ValueError(case)
    return admin.model_copy(update={"kafka": kafka, "bootstrap_servers": servers})


def rdkafka_lines(records: list[logging.LogRecord]) -> list[str]:
    """What librdkafka's logger and our refusal loggers wrote."""
    return [r.getMessage() for r in records if r.name.startswith("rocketkafka") and r.levelno >= logging.WARNING]


# -- taking a permission away mid-run, and giving it back ---------------------------------------------------
#: Seconds an ACL change may take to show in the broker's authorizer (a single KRaft node applies it from its
#: metadata log; measured within a second): waited for as a condition.
ACL_APPLIES_S = 30.0


def _deny_binding(principal: str, acl: tuple[str, str, str, str]):
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    resource, name, pattern, operation = acl
    return AclBinding(ResourceType[resource], name, ResourcePatternType[pattern], principal, "*",
                      AclOperation[operation], AclPermissionType.DENY)


def _filter(binding):
    from confluent_kafka.admin import AclBindingFilter

    return AclBindingFilter(binding.restype, binding.name, binding.resource_pattern_type, binding.principal,
                            binding.host, binding.operation, binding.permission_type)


def _applied(admin, binding, present: bool) -> None:
    """Wait until the broker's authorizer lists ``binding`` (or no longer does): DescribeAcls is answered from
    the same ACL cache authorization reads."""
    from rocketkafka.testing.waiting import wait_for

    def listed() -> bool:
        return bool(admin.describe_acls(_filter(binding), request_timeout=10).result(10)) == present
    assert wait_for(listed, ACL_APPLIES_S, 0.1), f"the broker never {'applied' if present else 'dropped'} {binding}"


def deny(admin, principal: str, acl: tuple[str, str, str, str]) -> None:
    """A DENY ACL (it wins over any ALLOW, prefixed or literal: exactly this permission is lost), once applied."""
    binding = _deny_binding(principal, acl)
    for future in admin.create_acls([binding], request_timeout=30).values():
        future.result()
    _applied(admin, binding, True)


def undeny(admin, principal: str, acl: tuple[str, str, str, str]) -> None:
    """The DENY ACL :func:`deny` made, deleted (the permission is back), once applied."""
    binding = _deny_binding(principal, acl)
    for future in admin.delete_acls([_filter(binding)], request_timeout=30).values():
        future.result()
    _applied(admin, binding, False)


def msg_id_of(record) -> str | None:
    from rocketkafka.names import Header

    for name, value in record.headers() or ():
        if name == Header.MSG_ID and value is not None:
            return value.decode()
    return None


def judged(records, expected: list[str], id_of=msg_id_of):
    """The history checker's report over what a topic holds (each record a handler call of one reader), of the
    records whose id (``id_of``) is expected."""
    from rocketkafka.testing.history import HandlerCall, check

    wanted = set(expected)
    calls = [HandlerCall("reader", r.topic(), r.partition(), r.offset(), id_of(r) or "", None, 0.0, 0.0)
             for r in records if id_of(r) in wanted]
    return check(calls, expected, order_by=None, serial_by=None)


def read_topics(settings, topics: list[str], timeout: float = 30.0) -> list:
    """Every record of those of ``topics`` that exist, from the beginning to the high watermarks seen with the
    fetches, read by one plain confluent-kafka consumer of ``settings``' principal (the test oracle: one client for
    many topics, where ``read_all`` makes one per topic)."""
    import time
    import uuid

    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    config = settings.kafka_config()
    listed = AdminClient(config).list_topics(timeout=10).topics
    partitions = [TopicPartition(t, p, OFFSET_BEGINNING) for t in dict.fromkeys(topics) if t in listed
                  for p in listed[t].partitions]
    if not partitions:
        return []
    consumer = Consumer({**config, "group.id": f"oracle-{uuid.uuid4().hex}", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign(partitions)
    records, pending = [], {(tp.topic, tp.partition) for tp in partitions}
    deadline = time.monotonic() + timeout
    try:
        while pending and time.monotonic() < deadline:
            for record in consumer.consume(1000, 0.2):
                err = record.error()
                if err is None:
                    records.append(record)
                    pending.add((record.topic(), record.partition()))
                elif err.code() == KafkaError._PARTITION_EOF:
                    pending.discard((record.topic(), record.partition()))
    finally:
        consumer.close()
    if pending:
        raise TimeoutError(f"reading {sorted(pending)[:3]} did not reach the end in {timeout} s")
    return records
