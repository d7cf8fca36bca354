"""Exactly-once forwarding (``--exactly-once``): SIGKILLed and zombie forwarders, and a read_committed reader
that sees every delayed message once.

Each run of a delay partition is one Kafka transaction with the partition's offset; a new owner
fences the partition's transactional id before it reads the offset (rocketkafka.ordering.consumers.transactions).
On a broker whose read_committed readers see aborted records (Tansu), ``exactly_once`` is refused.

``ROCKETKAFKA_TEST_EXACTLY_ONCE_OFF=1`` runs the nemesis tests with the transactional path switched off
(at-least-once forwarders): they must then fail on duplicates, which is how a run shows they can fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from rocketkafka.delay.forwarder import DelayForwarder
from rocketkafka.errors import ConfigError
from rocketkafka.testing.capabilities import Capability
from rocketkafka.tools.forwarder_cli import forwarder_environment
from tests.delay.conftest import FAST, wait_until
from tests.delay.streams import Stream, check_forwarded

pytestmark = [pytest.mark.integration]

EXACTLY_ONCE = os.environ.get("ROCKETKAFKA_TEST_EXACTLY_ONCE_OFF") != "1"


def _assert_each_once(counts, ids: list[str], what: str) -> None:
    twice = {m: counts[m] for m in ids if counts[m] > 1}
    assert twice == {}, f"{what}: {len(twice)} message(s) reached the real topic more than once (read_committed)"


def test_exactly_once_is_refused_on_a_broker_whose_readers_see_aborted_records(rk_backend, rk_settings):
    reason = rk_backend.missing(Capability.HIDE_ABORTED)
    if reason is None:
        pytest.skip(f"the broker at {rk_settings.bootstrap_servers} hides aborted records: exactly_once may start")
    forwarder = DelayForwarder(rk_settings, consumer_options=FAST, exactly_once=True)
    with pytest.raises(ConfigError, match="exactly_once=True needs a broker whose read_committed readers skip "
                                          "aborted records.*see aborted records.*without exactly_once"):
        forwarder.start()
    forwarder.close()  # a refused start left nothing to close


def test_the_command_refuses_exactly_once_with_one_line(rk_backend, rk_settings):
    if rk_backend.missing(Capability.HIDE_ABORTED) is None:
        pytest.skip(f"the broker at {rk_settings.bootstrap_servers} hides aborted records: exactly_once may start")
    done = subprocess.run([sys.executable, "-m", "rocketkafka.tools.cli", "delay-forwarder", "--exactly-once"],
                          env=forwarder_environment(rk_settings, FAST), capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        f"Error: delay forwarder of group delay-forwarder: exactly_once=True needs a broker whose read_committed "
        f"readers skip aborted records, and the broker at {rk_settings.bootstrap_servers} does not: its "
        "read_committed readers see aborted records. Start it without exactly_once (at-least-once)"]


@pytest.mark.nemesis
@pytest.mark.multi_broker  # and again on the 3-node cluster
@pytest.mark.slow
@pytest.mark.rk_needs("hide-aborted")
def test_sigkilled_forwarders_forward_each_message_once(rk_settings, rk_topic, delay_config, forwarder_process,
                                                        receiver):
    """Three forwarders in a row, the first two SIGKILLed mid-stream, under 600 msg/s."""
    topic = rk_topic(partitions=4)
    seen = receiver({topic: 4})
    count = 6000  # 10 s of sending: the second forwarder still has a stream to be killed in
    stream = Stream(rk_settings, topic, count=count, rate=600)
    kills = []
    for name in ("first", "second"):
        proc = forwarder_process(name, exactly_once=EXACTLY_ONCE)
        more = min(len(seen.ids()) + 300, count)
        assert wait_until(lambda: len(seen.ids()) >= more, 60), f"the {name} forwarder never got going"
        time.sleep(0.5)  # mid-batch: records are in flight
        proc.kill()
        kills.append(len(seen.ids()))
    last = forwarder_process("last", exactly_once=EXACTLY_ONCE)
    ids = stream.join()
    counts = check_forwarded(rk_settings, delay_config, seen, stream, f"two SIGKILLs (after {kills} delivered)")
    assert last.alive()
    _assert_each_once(counts, ids, "SIGKILL")


@pytest.mark.nemesis
@pytest.mark.multi_broker  # and again on the 3-node cluster
@pytest.mark.slow
@pytest.mark.rk_needs("hide-aborted")
def test_a_zombie_forwarder_woken_after_its_locks_expired_writes_nothing(rk_settings, rk_topic, delay_config,
                                                                         forwarder_process, receiver):
    """SIGSTOP a forwarder mid-stream past its lock lease: another takes its partitions over. Woken
    with SIGCONT, the zombie still holds open transactions and records it had fetched; the new owner
    fenced them, so none of its writes becomes visible."""
    topic = rk_topic(partitions=4)
    seen = receiver({topic: 4})
    zombie = forwarder_process("zombie", exactly_once=EXACTLY_ONCE)
    stream = Stream(rk_settings, topic, count=3000, rate=600)
    assert wait_until(lambda: len(seen.ids()) >= 300, 60), "the forwarder never got going"
    zombie.pause()
    heir = forwarder_process("heir", exactly_once=EXACTLY_ONCE)
    lease_s = FAST["lock_lease_ms"] / 1000
    assert wait_until(lambda: " took " in heir.output(), 30 + lease_s), "the heir took nothing over"
    time.sleep(2.0)  # the heir forwards what the zombie had fetched
    zombie.resume()
    ids = stream.join()
    counts = check_forwarded(rk_settings, delay_config, seen, stream, "SIGSTOP past the lease, then SIGCONT")
    assert heir.alive()
    _assert_each_once(counts, ids, "zombie")
