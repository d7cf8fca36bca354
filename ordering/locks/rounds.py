"""The rounds of one owner's lock table: its requests as scripts on every node, and what the answers grant.

Apart from the table (:mod:`~rocketkafka.ordering.locks.table`), which decides from votes and
clocks what is held, because this is the part that knows the scripts' arguments
(:mod:`~rocketkafka.ordering.locks.scripts`): the owner's session and its stamp, which node
gets a renewal and which a full claim, and which nodes hold each lock for us.
"""

from __future__ import annotations

import functools
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rocketkafka.names import RedisKeys
from rocketkafka.ordering.locks.nodes import LockNode, LockNodes
from rocketkafka.ordering.locks.settings import Held, grants

_RENEWED = "renewed"  # a node's answer to a renewal that extended every lock it holds for us

Progress = tuple[int, int] | None


@dataclass
class Lease:
    """Private state of one held lock: the public view plus its random token, key names and progress."""

    held: Held
    token: str
    lock_key: str
    fence_key: str
    renewed_at: float = 0.0
    delivered: int | None = None
    acked: int | None = None
    written: tuple[int, int] | None = None  # progress a quorum has stored
    granted: int = 0  # the nodes that hold it for us, as their last answer said (bit j: node j)

    def set_fence(self, fence: int) -> None:
        self.held.fencing_token = fence

    def progress(self) -> Progress:
        """Progress to write in the next round: recorded and not yet stored by a quorum."""
        if self.delivered is None or self.acked is None or (self.delivered, self.acked) == self.written:
            return None
        return (self.delivered, self.acked)

    def claim_args(self, progress: Progress) -> tuple[str, str, str, str]:
        """The four CLAIM arguments of this lock: token, fence, delivered, acked ("" = unchanged)."""
        if progress is None:
            return (self.token, str(self.held.fencing_token), "", "")
        return (self.token, str(self.held.fencing_token), str(progress[0]), str(progress[1]))


class LockRounds:
    """One owner's rounds over the nodes; the table runs one at a time (its round lock).

    Parameters:
        nodes: the table's nodes.
        group, owner, keys: whose session and which key names.
        lease_ms: how long a node keeps the session after a round.
        state: the table's lock over lease fields (progress and grants change under it).
    """

    def __init__(self, nodes: LockNodes, group: str, owner: str, keys: RedisKeys, lease_ms: int,
                 state: threading.Lock) -> None:
        self.nodes, self.owner, self.lease_ms, self._state = nodes, owner, str(lease_ms), state
        self.session = keys.session(group, owner)  # our session hash on every node (scripts.py)
        self.sessions = keys.session(group, "")  # + an owner id: that owner's session
        self._sid = secrets.token_hex(6)
        self._stamp, self._stamped = "", 0  # the stamp every node that saw each round carries; rounds made

    def claim(self, leases: Sequence[Lease]) -> tuple[list[Any], list[int], list[Progress]]:
        """CLAIM round: (per node results, the nodes granting each lease in this round, the progress sent per
        lease); grants are recorded."""
        sent = self._progress(leases)
        results = self.nodes.round("CLAIM", *self._claim_args(leases, sent, full=False))
        return results, self.record_grants(leases, results), sent

    def renew(self, leases: Sequence[Lease]) -> tuple[list[int], list[Progress]]:
        """Renewal round over all we hold: (votes per lease, the progress sent per lease).

        RENEW where the node holds every lease for us (it extends them all, or answers 0 when it
        missed a round); CLAIM of them all where it does not, or answered 0.
        """
        sent = self._progress(leases)
        changed = [(lease, progress) for lease, progress in zip(leases, sent) if progress is not None]
        previous, stamp = self._next_stamp()
        renew = self.nodes.pack("RENEW", [self.session, *(lease.lock_key for lease, _ in changed)],
                                [previous, stamp, self.lease_ms,
                                 *(a for lease, (d, k) in changed for a in (lease.token, str(d), str(k)))])
        holding_all = functools.reduce(int.__and__, (lease.granted for lease in leases))
        claimed_all: set[int] = set()  # nodes sent a full claim (set.add: atomic under the GIL)

        @functools.cache
        def claim_all() -> list[bytes]:  # packed by the first node that needs it: rare
            return self.nodes.pack("CLAIM", *self._claim_args(leases, sent, full=True))

        def on_node(index: int, node: LockNode, deadline: float) -> Any:
            if holding_all >> index & 1 and node.call("RENEW", renew, deadline) == 1:
                return _RENEWED
            claimed_all.add(index)
            return node.call("CLAIM", claim_all(), deadline)

        answers = self.nodes.run("RENEW", on_node)
        renewed = sum(1 << index for index, answer in enumerate(answers) if answer is _RENEWED)
        masks = self.record_grants(leases, [None if answer is _RENEWED else answer for answer in answers])
        # a full claim that ran without its answer reaching us rebuilt the session from what it found: what the
        # node said before no longer holds, so it is claimed in full again next time
        unsure = sum(1 << index for index in claimed_all if answers[index] is None)
        with self._state:
            for lease in leases:
                lease.granted &= ~unsure
        return [(mask | lease.granted & renewed).bit_count() for lease, mask in zip(leases, masks)], sent

    def fence(self, leases: Sequence[Lease]) -> list[int]:
        """Second acquisition step: store the issued tokens; returns per lock how many nodes confirmed."""
        keys = [self.session, *(k for lease in leases for k in (lease.lock_key, lease.fence_key))]
        previous, stamp = self._next_stamp()
        args = [self.owner, previous, stamp,
                *(a for lease in leases for a in (lease.token, str(lease.held.fencing_token)))]
        masks = grants(self.nodes.round("FENCE", keys, args), len(leases))
        with self._state:
            for lease, mask in zip(leases, masks):
                lease.granted = mask
        return [mask.bit_count() for mask in masks]

    def release(self, leases: Sequence[Lease]) -> None:
        """Delete the entries where they are still ours, and take them off our session."""
        if not leases:
            return
        previous, stamp = self._next_stamp()
        self.nodes.round("RELEASE", [self.session, *(lease.lock_key for lease in leases)],
                         [self.owner, previous, stamp, *(lease.token for lease in leases)])

    def describe(self, lock_key: str, fence_key: str) -> list[Any]:
        """DESCRIBE of one lock on every node."""
        return self.nodes.round("DESCRIBE", [lock_key, fence_key], [self.sessions])

    def record_grants(self, leases: Sequence[Lease], results: Sequence[Any]) -> list[int]:
        """Per lease, the nodes whose CLAIM answer holds it for us; each lease remembers them (nodes that did
        not answer keep what they said before)."""
        masks = grants([r[0] if r else None for r in results], len(leases))
        answered = sum(1 << index for index, r in enumerate(results) if r is not None)
        with self._state:
            for lease, mask in zip(leases, masks):
                lease.granted = (lease.granted & ~answered) | mask
        return masks

    def _next_stamp(self) -> tuple[str, str]:
        """(the stamp nodes carry now, the one they take in this round): every round moves it."""
        self._stamped += 1
        previous, self._stamp = self._stamp, f"{self._sid}:{self._stamped}"
        return previous, self._stamp

    def _claim_args(self, leases: Sequence[Lease], sent: Sequence[Progress], full: bool) -> tuple[list[str], list[str]]:
        """CLAIM's keys and arguments; ``sent``: the progress each lease writes. ``full``: ``leases`` are all we
        hold (a node rebuilds our session from them and takes the round's stamp, already moved by the renewal)."""
        previous, stamp = (self._stamp, self._stamp) if full else self._next_stamp()
        keys = [self.session, *(k for lease in leases for k in (lease.lock_key, lease.fence_key))]
        return keys, [self.owner, self.lease_ms, self.sessions, previous, stamp, "1" if full else "",
                      *(a for lease, progress in zip(leases, sent) for a in lease.claim_args(progress))]

    def _progress(self, leases: Sequence[Lease]) -> list[Progress]:
        with self._state:  # progress may change under us
            return [lease.progress() for lease in leases]
