"""The knobs of one chaos run, with defaults that finish a 5-minute run on a 2-core machine."""

from __future__ import annotations

import enum
import uuid

from pydantic import BaseModel, Field


class Kind(str, enum.Enum):
    """The kinds of traffic; each has its own topic and consumer group."""

    ORDERLY = "orderly"  # partition-ordered (RocketMQ MessageListenerOrderly)
    KEYED = "keyed"  # key-ordered (DDMQ): same key serial, other keys concurrent
    DELAYED = "delayed"  # deliver-at times through the delay forwarders
    TXN = "txn"  # transactional: COMMIT, ROLLBACK, and UNKNOWN resolved by check-back
    # consume -> produce in Kafka transactions (PushConsumer(exactly_once=True), orderly): judged on the output
    # topic as a read_committed reader sees it; only on a broker that hides aborted records
    EXACTLY_ONCE = "exactly-once"


class Fault(str, enum.Enum):
    """What the nemesis does; ``faults`` of the plan picks them round robin."""

    KILL_CONSUMER = "kill-consumer"  # SIGKILL a consumer process, start a new one
    PAUSE_CONSUMER = "pause-consumer"  # SIGSTOP a consumer past its lock expiry, then SIGCONT
    KILL_FORWARDER = "kill-forwarder"  # SIGKILL a delay forwarder, start a new one
    PAUSE_FORWARDER = "pause-forwarder"  # SIGSTOP a delay forwarder past its lock expiry, then SIGCONT
    KILL_CHECKER = "kill-checker"  # SIGKILL the transaction checker, start a new one
    PAUSE_CHECKER = "pause-checker"  # SIGSTOP the transaction checker past its lock expiry, then SIGCONT
    REDIS_DOWN = "redis-down"  # stop one of the Redis nodes, start it again later
    PAUSE_BROKER = "pause-broker"  # SIGSTOP the broker (~10 s), then SIGCONT: every client waits on it
    KILL_BROKER = "kill-broker"  # SIGKILL a broker node (log kept on disk), start it again: Apache Kafka only
    PAUSE_REDIS_QUORUM = "pause-redis-quorum"  # SIGSTOP a majority (2 of 3) of the Redis nodes: the quorum is lost
    SLOW_HANDLER = "slow-handler"  # one handler call of a consumer takes longer than the lock lease
    CLOCK_JUMP = "clock-jump"  # a consumer's wall clock jumps (an hour ahead or behind), then back
    ADD_PARTITIONS = "add-partitions"  # grow the delayed traffic's topic while it is consumed (broker permitting)


class ChaosPlan(BaseModel):
    """One run. Durations in seconds, rates in messages per second, timings of the parts in ms."""

    duration: float = Field(300.0, gt=0, description="seconds of traffic and faults (longer "
                            "while a planned fault has not run yet)")
    # 4 s: the default 5-minute run injects more than 50 faults (a fault that takes longer delays the next)
    fault_interval: float = Field(4.0, gt=0, description="seconds between the starts of two faults")
    faults: list[Fault] = Field(default_factory=lambda: list(Fault))
    seed: int = 1
    run_id: str = Field(default_factory=lambda: uuid.uuid4().hex[:8])
    rates: dict[Kind, float] = Field(default_factory=lambda: {Kind.ORDERLY: 100.0, Kind.KEYED: 100.0,
                                                              Kind.DELAYED: 40.0, Kind.TXN: 20.0,
                                                              Kind.EXACTLY_ONCE: 40.0})
    kinds: list[Kind] = Field(default_factory=lambda: [k for k in Kind if k is not Kind.EXACTLY_ONCE],
                              description="the kinds of traffic run; the exactly-once kind only when asked for "
                                          "(--exactly-once), and dropped, saying why, on a broker whose readers see "
                                          "aborted records")
    sharding_keys: int = Field(32, ge=1, description="order keys of the orderly and key-ordered traffic")
    partitions: int = Field(8, ge=1)
    consumers_per_kind: int = Field(2, ge=1)
    forwarders: int = Field(2, ge=1)
    delay_levels: str = "1s 2s 5s 10s"
    delays_s: list[float] = Field(default_factory=lambda: [1.0, 2.0, 3.7, 5.0, 0.4],
                                  description="deliver-at distances: levels and arbitrary times")
    pause_s: float = Field(3.0, gt=0, description="how long a SIGSTOPped service stays stopped (past its 2 s "
                                                   "lock expiry)")
    restart_after_s: float = Field(0.5, ge=0, description="how long a killed process stays dead")
    redis_down_s: float = Field(3.5, gt=0, description="how long one stopped Redis node stays down")
    broker_pause_s: float = Field(10.0, gt=0, description="how long the broker stays SIGSTOPped")
    broker_down_s: float = Field(3.0, ge=0, description="how long a killed broker node stays dead")
    redis_quorum_pause_s: float = Field(5.0, gt=0, description="how long a majority of Redis nodes stays "
                                                               "SIGSTOPped (past the lock expiry)")
    slow_handler_ms: float = Field(4000.0, gt=0, description="one slow handler call (longer than the lock lease, "
                                                             "shorter than consuming_ttl_ms)")
    clock_jump_s: float = Field(3600.0, description="how far a consumer's wall clock jumps (alternately ahead "
                                                    "and behind)")
    clock_hold_s: float = Field(4.0, gt=0, description="how long the jumped clock stays off before it is set back")
    partitions_added: int = Field(2, ge=1, description="partitions each add-partitions fault adds")
    drain_timeout: float = Field(120.0, gt=0, description="seconds to wait for the last messages after traffic")
    # Short timings so a fault heals within the fault interval (RocketMQ's are 60 s / 20 s / 30 s).
    lock_lease_ms: int = 3000
    lock_renew_interval_ms: int = 1000
    lock_client_expiry_ms: int = 2000
    heartbeat_interval_ms: int = 200
    member_timeout_ms: int = 2000
    rebalance_interval_ms: int = 2000
    consuming_ttl_ms: int = Field(8000, description="idempotent helper: longer than pause_s, so a stalled "
                                                    "handler and its re-delivery never both run")
    txn_timeout_ms: int = 2000
    txn_check_interval_ms: int = 1000

    def topic(self, kind: Kind) -> str:
        return f"chaos-{self.run_id}-{kind.value}"

    @property
    def output_topic(self) -> str:
        """Where the exactly-once consumers send what they consume."""
        return f"chaos-{self.run_id}-{Kind.EXACTLY_ONCE.value}-out"

    def group(self, kind: Kind) -> str:
        return f"chaos-{self.run_id}-{kind.value}-consumers"

    @property
    def producer_group(self) -> str:
        return f"chaos-{self.run_id}-txn-producers"

    def consumer_options(self) -> dict[str, int]:
        """ConsumerOptions fields shared by consumers and forwarders."""
        return dict(lock_lease_ms=self.lock_lease_ms, lock_renew_interval_ms=self.lock_renew_interval_ms,
                    lock_client_expiry_ms=self.lock_client_expiry_ms, heartbeat_interval_ms=self.heartbeat_interval_ms,
                    member_timeout_ms=self.member_timeout_ms, rebalance_interval_ms=self.rebalance_interval_ms,
                    commit_interval_ms=200)
