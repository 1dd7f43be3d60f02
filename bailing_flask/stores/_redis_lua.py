"""The Lua scripts of :class:`~bailing_flask.stores.RedisStore`, one per mutation.

Each runs atomically on the server, so the check of state and token and the
write are one step whatever the number of hosts. ``KEYS[1]`` is the entry's
hash (or the signature's string, the approval's hash); ``ARGV[1]`` is the
store's clock, as every rule of :mod:`bailing_flask.stores.base` uses it.
"""

from __future__ import annotations

# Times travel as Python ``repr(float)`` strings; Lua compares them as
# numbers. A key is *live* while now < expires_at (same rule as base.py).

_RESERVE = """
local now = tonumber(ARGV[1])
local exp = redis.call('HGET', KEYS[1], 'expires_at')
if exp and tonumber(exp) > now then
  local fields = redis.call('HMGET', KEYS[1], 'state', 'token')
  local own = fields[1] == 'in_progress' and fields[2] == ARGV[2]
  return {own and 1 or 0, redis.call('HGETALL', KEYS[1])}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'in_progress', 'token', ARGV[2],
  'created_at', ARGV[1], 'lease_expires_at', ARGV[3], 'expires_at', ARGV[4], 'meta', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {1, redis.call('HGETALL', KEYS[1])}
"""

# The request path's version of _RESERVE: 1 when the key was claimed for ARGV[2] now,
# 2 when ARGV[2] already held it, else the live entry (HGETALL); a new key costs no reply
# to parse and no DEL.
_CLAIM = """
local now = tonumber(ARGV[1])
local exp = redis.call('HGET', KEYS[1], 'expires_at')
if exp then
  if tonumber(exp) > now then
    local fields = redis.call('HMGET', KEYS[1], 'state', 'token')
    if fields[1] == 'in_progress' and fields[2] == ARGV[2] then return 2 end
    return redis.call('HGETALL', KEYS[1])
  end
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], 'state', 'in_progress', 'token', ARGV[2],
  'created_at', ARGV[1], 'lease_expires_at', ARGV[3], 'expires_at', ARGV[4], 'meta', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
"""

_TAKE_OVER = """
local now = tonumber(ARGV[1])
local f = redis.call('HMGET', KEYS[1], 'state', 'token', 'expires_at')
if f[1] ~= 'in_progress' or tonumber(f[3]) <= now then return 0 end
if f[2] == ARGV[3] then return 1 end
if f[2] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'token', ARGV[3], 'lease_expires_at', ARGV[4])
if tonumber(ARGV[4]) > tonumber(f[3]) then
  redis.call('HSET', KEYS[1], 'expires_at', ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
end
return 1
"""

_COMPLETE = """
local now = tonumber(ARGV[1])
local f = redis.call('HMGET', KEYS[1], 'state', 'token', 'expires_at')
if not f[1] or tonumber(f[3]) <= now or f[2] ~= ARGV[2] then return 0 end
if f[1] == 'completed' then return 1 end
redis.call('HSET', KEYS[1], 'state', 'completed', 'expires_at', ARGV[3],
  'status', ARGV[5], 'headers', ARGV[6], 'body', ARGV[7])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
"""

_MARK_UNCERTAIN = """
local now = tonumber(ARGV[1])
local f = redis.call('HMGET', KEYS[1], 'state', 'token', 'expires_at', 'lease_expires_at')
if f[1] ~= 'in_progress' or f[2] ~= ARGV[2] or tonumber(f[3]) <= now then return 0 end
if tonumber(f[4]) > now then redis.call('HSET', KEYS[1], 'lease_expires_at', ARGV[1]) end
redis.call('HSET', KEYS[1], 'note', ARGV[3])
return 1
"""

_RELEASE = """
local f = redis.call('HMGET', KEYS[1], 'state', 'token', 'expires_at')
if f[1] ~= 'in_progress' or f[2] ~= ARGV[2] or tonumber(f[3]) <= tonumber(ARGV[1]) then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
"""

# ARGV: now, 'delete' or 'complete', the state and token the entry must still have ('' and
# '': any), then for 'complete' the token, expires_at, TTL in ms, status, headers, body, note.
_RESOLVE = """
local f = redis.call('HMGET', KEYS[1], 'expires_at', 'state', 'token')
if not f[1] or tonumber(f[1]) <= tonumber(ARGV[1]) then return 0 end
if ARGV[3] ~= '' and (f[2] ~= ARGV[3] or f[3] ~= ARGV[4]) then return 0 end
if ARGV[2] == 'delete' then
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('HSET', KEYS[1], 'state', 'completed', 'token', ARGV[5], 'expires_at', ARGV[6],
  'status', ARGV[8], 'headers', ARGV[9], 'body', ARGV[10], 'note', ARGV[11])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
return 1
"""

_REMEMBER_SIGNATURE = """
local exp = redis.call('GET', KEYS[1])
if exp and tonumber(exp) > tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
"""

# KEYS: candidates found by SCAN (entry hashes and signature strings).
# ARGV: now, how many may still be deleted.
_CLEANUP = """
local now = tonumber(ARGV[1])
local budget = tonumber(ARGV[2])
local removed = 0
for _, key in ipairs(KEYS) do
  if removed >= budget then break end
  local kind = redis.call('TYPE', key)['ok']
  local exp = nil
  if kind == 'hash' then
    exp = redis.call('HGET', key, 'expires_at')
  elseif kind == 'string' then
    exp = redis.call('GET', key)
  end
  if exp and tonumber(exp) and tonumber(exp) <= now then
    redis.call('DEL', key)
    removed = removed + 1
  end
end
return removed
"""


# Approval records: a hash per approval id, and a set of ids per job.
# KEYS: record, job index. ARGV: now, expires_at, ttl ms, job_id, tool, request, id.
_ADD_APPROVAL = """
local exp = redis.call('HGET', KEYS[1], 'expires_at')
if exp and tonumber(exp) > tonumber(ARGV[1]) then return redis.call('HGETALL', KEYS[1]) end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'job_id', ARGV[4], 'tool', ARGV[5], 'status', 'pending',
  'received_at', ARGV[1], 'expires_at', ARGV[2], 'request', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('SADD', KEYS[2], ARGV[7])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
return redis.call('HGETALL', KEYS[1])
"""

# KEYS: record. ARGV: now, status, decision_id, approver, expires_at, ttl ms, job index prefix.
_RECORD_DECISION = """
local f = redis.call('HMGET', KEYS[1], 'expires_at', 'status', 'job_id')
if not f[1] or tonumber(f[1]) <= tonumber(ARGV[1]) then return {} end
if f[2] == 'pending' then
  redis.call('HSET', KEYS[1], 'status', ARGV[2], 'decision_id', ARGV[3], 'approver', ARGV[4],
    'decided_at', ARGV[1])
  if tonumber(ARGV[5]) > tonumber(f[1]) then
    redis.call('HSET', KEYS[1], 'expires_at', ARGV[5])
    redis.call('PEXPIRE', KEYS[1], ARGV[6])
    local index = ARGV[7] .. f[3]
    if redis.call('PTTL', index) < tonumber(ARGV[6]) then redis.call('PEXPIRE', index, ARGV[6]) end
  end
end
return redis.call('HGETALL', KEYS[1])
"""

# Spend one approval on one call and reserve the call, in one step.
# KEYS: the entry, then the candidate approval records in order.
# ARGV: now, token, lease end, expires_at, ttl ms, meta, the call's key, reserve ('1' or '0').
# Replies: {1, i} reserved with the i-th candidate (0: none names the key), {0, HGETALL} the
# live entry that answers instead, {2} every live approved candidate is spent, {3} none is one.
_CLAIM_APPROVED = """
local now = tonumber(ARGV[1])
local reserve = ARGV[8] == '1'
if reserve then
  local exp = redis.call('HGET', KEYS[1], 'expires_at')
  if exp and tonumber(exp) > now then
    local f = redis.call('HMGET', KEYS[1], 'state', 'token')
    if f[1] == 'in_progress' and f[2] == ARGV[2] then
      for i = 2, #KEYS do
        if redis.call('HGET', KEYS[i], 'used_by') == ARGV[7] then return {1, i - 1} end
      end
      return {1, 0}
    end
    return {0, redis.call('HGETALL', KEYS[1])}
  end
end
local used = false
for i = 2, #KEYS do
  local a = redis.call('HMGET', KEYS[i], 'expires_at', 'status', 'used_by')
  if a[1] and tonumber(a[1]) > now and a[2] == 'approved' then
    if not a[3] then
      redis.call('HSET', KEYS[i], 'used_by', ARGV[7], 'used_at', ARGV[1])
      if reserve then
        redis.call('DEL', KEYS[1])
        redis.call('HSET', KEYS[1], 'state', 'in_progress', 'token', ARGV[2],
          'created_at', ARGV[1], 'lease_expires_at', ARGV[3], 'expires_at', ARGV[4], 'meta', ARGV[6])
        redis.call('PEXPIRE', KEYS[1], ARGV[5])
      end
      return {1, i - 1}
    end
    used = true
  end
end
if used then return {2} end
return {3}
"""
