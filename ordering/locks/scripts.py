"""The Lua scripts of the lock table (:mod:`rocketkafka.ordering.locks`), one atomic round trip per node each.

Every script serves a whole batch of locks, so ``lockBatchMQ`` of a thousand
partitions is one command per node. Each sits under a comment naming its
``KEYS``, ``ARGV`` and return value, and checks owner and token inside the
script, never in a read-then-write from the client.

The lock entry of one (group, topic, partition) is a hash at
:meth:`RedisKeys.lock <rocketkafka.names.RedisKeys.lock>` with the fields

=========  ===================================================================
owner      the owner id (RocketMQ's client id), unique per consumer instance
token      random per acquisition (``secrets``); release and fencing check it
fence      the fencing token issued to this acquisition (``0`` while issuing)
delivered  the owner's delivered offset (DeFiBus transition state)
acked      the owner's acked offset
=========  ===================================================================

and expires ``lease_ms`` after the last renewal. The fencing sequence of the lock
is a plain counter at :meth:`RedisKeys.fence <rocketkafka.names.RedisKeys.fence>`
without expiry: it must outlive every lease.

Per-lock arguments are flat ``ARGV`` runs (``ARGV[3 + 4(i-1)]`` ... for lock ``i``): cheaper
to build and to read than a JSON array through ``cjson``, which matters at a thousand
locks per call. A renewal that finds its entry as it left it costs two commands per
lock (``HMGET`` and ``PEXPIRE``).
"""

from __future__ import annotations

# CLAIM: take or renew a batch of locks on one node (RocketMQ lockBatchMQ).
# KEYS[2i-1]  lock hash of lock i
# KEYS[2i]    fence counter of lock i
# ARGV[1]     owner id
# ARGV[2]     lease (ms): PEXPIRE of every lock hash this call takes or renews
# ARGV[4i-1 .. 4i+2], four per lock i:
#             token      random token of this acquisition
#             fence      fencing token already issued to it; "0" while acquiring (then the
#                        node reports the highest fence it knows, see below)
#             delivered  "" = leave the progress fields as they are
#             acked
# Returns {flags, fences}:
#   flags   one character per lock: "1" the lock is ours on this node now (it was free, or
#           held by this owner: re-entrant), "0" another owner holds it
#   fences  space-separated, one number per lock whose fence is "0", in lock order:
#           max(counter, entry fence), the highest fencing token this node knows for the lock
#           (taken or refused)
# A renewal finding its entry as it left it (token and fence) only extends it and writes
# new progress. Finding anything else -- no entry (the node restarted empty, or was down
# when we acquired), an older entry of ours, an entry that missed the FENCE step -- it
# writes the entry whole and raises the counter to the fence: renewals heal nodes.
CLAIM = """
local owner, lease = ARGV[1], ARGV[2]
local flags, fences = {}, {}
for i = 1, #KEYS / 2 do
  local lock, counter = KEYS[2 * i - 1], KEYS[2 * i]
  local a = 4 * i - 1
  local token, fence, delivered, acked = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local cur = redis.call('HMGET', lock, 'token', 'fence')
  if cur[1] == token and cur[2] == fence then
    flags[i] = '1'
    if delivered ~= '' then redis.call('HSET', lock, 'delivered', delivered, 'acked', acked) end
    redis.call('PEXPIRE', lock, lease)
  else
    local known = redis.call('GET', counter) or '0'
    if fence == '0' then
      if cur[2] and tonumber(cur[2]) > tonumber(known) then fences[#fences + 1] = cur[2]
      else fences[#fences + 1] = known end
    end
    local holder = redis.call('HGET', lock, 'owner')
    if holder and holder ~= owner then
      flags[i] = '0'
    else
      flags[i] = '1'
      redis.call('HSET', lock, 'owner', owner, 'token', token, 'fence', fence)
      if delivered ~= '' then redis.call('HSET', lock, 'delivered', delivered, 'acked', acked) end
      redis.call('PEXPIRE', lock, lease)
      if tonumber(fence) > tonumber(known) then redis.call('SET', counter, fence) end
    end
  end
end
return {table.concat(flags), table.concat(fences, ' ')}
"""

# FENCE: record the fencing tokens just issued to a batch of acquisitions (second step).
# KEYS[2i-1]  lock hash of lock i
# KEYS[2i]    fence counter of lock i
# ARGV[1]     owner id
# ARGV[2i], ARGV[2i+1]: token and issued fence of lock i
# Returns a string with one character per lock: "1" the entry is ours with this token and
#   now carries the fence, "0" it is not (then only the counter moved).
# The counter is raised to max(counter, fence) on every node that answers, ours or not:
# raising it never hurts, and it makes the token durable where it is known.
FENCE = """
local owner = ARGV[1]
local flags = {}
for i = 1, #KEYS / 2 do
  local lock, counter = KEYS[2 * i - 1], KEYS[2 * i]
  local token, fence = ARGV[2 * i], ARGV[2 * i + 1]
  local c = redis.call('GET', counter)
  if (not c) or tonumber(c) < tonumber(fence) then redis.call('SET', counter, fence) end
  local cur = redis.call('HMGET', lock, 'owner', 'token')
  if cur[1] == owner and cur[2] == token then
    redis.call('HSET', lock, 'fence', fence)
    flags[i] = '1'
  else
    flags[i] = '0'
  end
end
return table.concat(flags)
"""

# RELEASE: delete a batch of lock entries, each only if it is still ours.
# KEYS[i]     lock hash of lock i
# ARGV[1]     owner id
# ARGV[i+1]   token of lock i
# Returns the number of entries deleted.
# The fence counters stay: the next owner's token must exceed ours.
RELEASE = """
local owner = ARGV[1]
local deleted = 0
for i = 1, #KEYS do
  local cur = redis.call('HMGET', KEYS[i], 'owner', 'token')
  if cur[1] == owner and cur[2] == ARGV[i + 1] then
    redis.call('DEL', KEYS[i])
    deleted = deleted + 1
  end
end
return deleted
"""

# DESCRIBE: read one lock entry as this node sees it.
# KEYS[1]     lock hash
# KEYS[2]     fence counter
# ARGV        none
# Returns {owner, token, fence, delivered, acked, pttl, counter}: missing fields are nil,
#   pttl is -2 when there is no entry, counter is nil when the node never issued a token.
DESCRIBE = """
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token', 'fence', 'delivered', 'acked')
return {cur[1], cur[2], cur[3], cur[4], cur[5], redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}
"""
