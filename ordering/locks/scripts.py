"""The Lua scripts of the lock table (:mod:`rocketkafka.ordering.locks`), one atomic round trip per node each.

Every script serves a whole batch of locks, so ``lockBatchMQ`` of a thousand
partitions is one command per node. Each sits under a comment naming its
``KEYS``, ``ARGV`` and return value, and checks owner and token inside the
script, never in a read-then-write from the client.

**Session leases.** Locks do not expire one by one. Each owner has a *session* hash
per node, :meth:`RedisKeys.session <rocketkafka.names.RedisKeys.session>`, which
lists the locks the owner holds on that node (field = lock key, value = token) and
expires ``lease_ms`` after the owner's last round on that node. A lock entry is
*live* while its owner's session lists it with the entry's token; an entry whose
owner's session is gone (the owner crashed, or stalled past its lease) is free to
take, exactly as an expired entry was. So a renewal extends one key per node
(:data:`RENEW`), whatever the number of locks: a thousand locks cost what one does.

The session also carries a *stamp* (field ``~``), which the owner changes with every
round (claim, renew, fence, release), and which a node takes only when it already carried
the previous one (a full claim sets it whatever the node carried). A node that missed a round, or
restarted empty, or came back from an older snapshot, carries another stamp (or
none); :data:`RENEW` then answers ``0`` and the owner claims all its locks on that
node again (:data:`CLAIM` with ``full``), which rewrites what the node lost: renewals
still heal nodes. What a stamp cannot show is one key of the lock table removed behind its back
while the session stays (a hand-deleted entry, a ``maxmemory-policy`` that evicts keys one by one):
its owner does not notice while its session lives, and another member may take the lock there.
Run the lock nodes with ``maxmemory-policy noeviction``, as any Redlock store. The scripts read
another owner's session, a key not passed in ``KEYS``: plain Redis allows it; a key-routing
proxy or a store that enforces declared keys does not.

A member of the version before sessions never takes a partition whose entry a member of this
version wrote (such an entry has no TTL): in a rolling upgrade the old members wait, and a
rollback needs the lock keys of the group deleted once every new member has stopped.

The lock entry of one (group, topic, partition) is a hash at
:meth:`RedisKeys.lock <rocketkafka.names.RedisKeys.lock>` with the fields

=========  ===================================================================
owner      the owner id (RocketMQ's client id), unique per consumer instance
token      random per acquisition (``secrets``); release and fencing check it
fence      the fencing token issued to this acquisition (``0`` while issuing)
delivered  the owner's delivered offset (DeFiBus transition state)
acked      the owner's acked offset
=========  ===================================================================

and no expiry of its own: a released entry is deleted, a dead owner's entry stays
until the next owner overwrites it (one small hash per partition, as the fence
counter). An entry written before sessions existed carries a TTL and counts as live
while it has one, so members of the two versions never hold a partition at once
during a rolling upgrade. The fencing sequence of the lock is a plain counter at
:meth:`RedisKeys.fence <rocketkafka.names.RedisKeys.fence>` without expiry: it must
outlive every lease.

Per-lock arguments are flat ``ARGV`` runs (``ARGV[7 + 4(i-1)]`` ... for lock ``i``): cheaper
to build and to read than a JSON array through ``cjson``, which matters at a thousand
locks per call.
"""

from __future__ import annotations

# Whether the entry at `lock`, held by `holder` with `token`, is live: its holder's session lists
# it with that token (`sessions` .. holder is the session key), or it was leased the old way.
_LIVE = """
local function live(lock, holder, token, sessions)
  if redis.call('PTTL', lock) > 0 then return true end
  return token ~= false and redis.call('HGET', sessions .. holder, lock) == token
end
"""

# CLAIM: take, renew or rewrite a batch of locks on one node (RocketMQ lockBatchMQ).
# KEYS[1]     the session hash of this owner
# KEYS[2i]    lock hash of lock i
# KEYS[2i+1]  fence counter of lock i
# ARGV[1]     owner id
# ARGV[2]     lease (ms): PEXPIRE of the session
# ARGV[3]     session key prefix (a holder's session key is this .. holder)
# ARGV[4]     the stamp the session carries if the node saw every earlier round ("" before any)
# ARGV[5]     the stamp to carry after this round
# ARGV[6]     "1": these are all the locks the owner holds (the session is rebuilt from them
#             and takes the new stamp whatever it carried), "" otherwise
# ARGV[4i+3 .. 4i+6], four per lock i:
#             token      random token of this acquisition
#             fence      fencing token already issued to it; "0" while acquiring (then the
#                        node reports the highest fence it knows, see below)
#             delivered  "" = leave the progress fields as they are
#             acked
# Returns {flags, fences}:
#   flags   one character per lock: "1" the lock is ours on this node now (it was free, or
#           held by this owner: re-entrant), "0" another owner holds it (a live entry)
#   fences  space-separated, one number per lock whose fence is "0", in lock order:
#           max(counter, entry fence), the highest fencing token this node knows for the lock
#           (taken or refused)
# An entry found as we left it (token and fence) only gets new progress. Finding anything
# else -- no entry (the node restarted empty, or was down when we acquired), an older entry
# of ours, an entry that missed the FENCE step, a dead owner's -- it writes the entry whole
# and raises the counter to the fence.
CLAIM = _LIVE + """
local session = KEYS[1]
local owner, lease, sessions, prev, stamp, full = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local synced = full == '1' or (redis.call('HGET', session, '~') or '') == prev
if full == '1' then redis.call('DEL', session) end
local flags, fences = {}, {}
for i = 1, (#KEYS - 1) / 2 do
  local lock, counter = KEYS[2 * i], KEYS[2 * i + 1]
  local a = 4 * i + 3
  local token, fence, delivered, acked = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local cur = redis.call('HMGET', lock, 'owner', 'token', 'fence')
  local known = redis.call('GET', counter) or '0'
  if fence == '0' then  -- also when a retried call finds its own first run's entry
    if cur[3] and tonumber(cur[3]) > tonumber(known) then fences[#fences + 1] = cur[3]
    else fences[#fences + 1] = known end
  end
  if cur[1] == owner and cur[2] == token and cur[3] == fence then
    flags[i] = '1'
    if delivered ~= '' then redis.call('HSET', lock, 'delivered', delivered, 'acked', acked) end
  else
    if cur[1] and cur[1] ~= owner and live(lock, cur[1], cur[2], sessions) then
      flags[i] = '0'
    else
      flags[i] = '1'
      redis.call('HSET', lock, 'owner', owner, 'token', token, 'fence', fence)
      if delivered ~= '' then redis.call('HSET', lock, 'delivered', delivered, 'acked', acked) end
      if tonumber(fence) > tonumber(known) then redis.call('SET', counter, fence) end
    end
  end
  if flags[i] == '1' then redis.call('HSET', session, lock, token) end
end
if synced then redis.call('HSET', session, '~', stamp) end
redis.call('PEXPIRE', session, lease)
return {table.concat(flags), table.concat(fences, ' ')}
"""

# RENEW: extend every lock of this owner on one node at once, when the node saw every round.
# KEYS[1]     the session hash of this owner
# KEYS[1+i]   lock hash of lock i, for the locks with progress to write
# ARGV[1]     the stamp the session carries if the node saw every round
# ARGV[2]     the stamp to carry after this round (every round moves it, so a copy of the node
#             taken before any round never matches again)
# ARGV[3]     lease (ms)
# ARGV[3i+1], ARGV[3i+2], ARGV[3i+3]: token, delivered and acked of lock i
# Returns 1: the session is extended (every lock it lists is renewed), the progress written and
#   the stamp moved; 0: the node carries another stamp, or a lock with progress is not ours
#   there -- the session is not extended (some progress may be written), and the owner claims
#   all its locks there again (CLAIM with full).
RENEW = """
if redis.call('HGET', KEYS[1], '~') ~= ARGV[1] then return 0 end
for i = 2, #KEYS do
  local a = 3 * (i - 1) + 1
  if redis.call('HGET', KEYS[i], 'token') ~= ARGV[a] then return 0 end
  redis.call('HSET', KEYS[i], 'delivered', ARGV[a + 1], 'acked', ARGV[a + 2])
end
redis.call('HSET', KEYS[1], '~', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""

# FENCE: record the fencing tokens just issued to a batch of acquisitions (second step).
# KEYS[1]     the session hash of this owner
# KEYS[2i]    lock hash of lock i
# KEYS[2i+1]  fence counter of lock i
# ARGV[1]     owner id
# ARGV[2], ARGV[3]: the stamp before and after this round (as in CLAIM)
# ARGV[2i+2], ARGV[2i+3]: token and issued fence of lock i
# Returns a string with one character per lock: "1" the entry is ours with this token, our
#   session lists it, and it now carries the fence; "0" it is not (then only the counter moved).
# The counter is raised to max(counter, fence) on every node that answers, ours or not:
# raising it never hurts, and it makes the token durable where it is known.
FENCE = """
local session, owner = KEYS[1], ARGV[1]
local synced = (redis.call('HGET', session, '~') or '') == ARGV[2]
local flags = {}
for i = 1, (#KEYS - 1) / 2 do
  local lock, counter = KEYS[2 * i], KEYS[2 * i + 1]
  local token, fence = ARGV[2 * i + 2], ARGV[2 * i + 3]
  local c = redis.call('GET', counter)
  if (not c) or tonumber(c) < tonumber(fence) then redis.call('SET', counter, fence) end
  local cur = redis.call('HMGET', lock, 'owner', 'token')
  if cur[1] == owner and cur[2] == token and redis.call('HGET', session, lock) == token then
    redis.call('HSET', lock, 'fence', fence)
    flags[i] = '1'
  else
    flags[i] = '0'
  end
end
if synced then redis.call('HSET', session, '~', ARGV[3]) end
return table.concat(flags)
"""

# RELEASE: delete a batch of lock entries, each only if it is still ours.
# KEYS[1]     the session hash of this owner
# KEYS[1+i]   lock hash of lock i
# ARGV[1]     owner id
# ARGV[2], ARGV[3]: the stamp before and after this round (as in CLAIM)
# ARGV[3+i]   token of lock i
# Returns the number of entries deleted.
# The fence counters stay: the next owner's token must exceed ours.
RELEASE = """
local session, owner = KEYS[1], ARGV[1]
local synced = (redis.call('HGET', session, '~') or '') == ARGV[2]
local deleted = 0
for i = 2, #KEYS do
  local cur = redis.call('HMGET', KEYS[i], 'owner', 'token')
  if cur[1] == owner and cur[2] == ARGV[i + 2] then
    redis.call('DEL', KEYS[i])
    deleted = deleted + 1
  end
  if redis.call('HGET', session, KEYS[i]) == ARGV[i + 2] then redis.call('HDEL', session, KEYS[i]) end
end
if synced then redis.call('HSET', session, '~', ARGV[3]) end
return deleted
"""

# DESCRIBE: read one lock entry as this node sees it.
# KEYS[1]     lock hash
# KEYS[2]     fence counter
# ARGV[1]     session key prefix (as in CLAIM)
# Returns {owner, token, fence, delivered, acked, pttl, counter}: missing fields are nil, and so
#   is everything but the counter when the entry is not live; pttl is how long the entry stays
#   live (its owner's session, or its own TTL when leased the old way), -2 when not live;
#   counter is nil when the node never issued a token.
DESCRIBE = _LIVE + """
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token', 'fence', 'delivered', 'acked')
local counter = redis.call('GET', KEYS[2])
if not cur[1] or not live(KEYS[1], cur[1], cur[2], ARGV[1]) then
  return {false, false, false, false, false, -2, counter}
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then pttl = redis.call('PTTL', ARGV[1] .. cur[1]) end
return {cur[1], cur[2], cur[3], cur[4], cur[5], pttl, counter}
"""
