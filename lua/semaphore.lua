-- semaphore: a concurrency limit with leases. The key is a sorted set with one member per held
-- permit, "<lease id>:<i>", scored by the lease's expiry (server microseconds). A permit is free
-- once its lease is released or expired, so a holder that crashes frees its permits at expiry.
-- The key lives until the latest expiry. Model of the rules: src/limiter/semaphore_leases.cpp
-- (LeaseTable), held to the same answers by SemaphoreTest.TheScriptAndTheInProcessModelAnswerAlike.
--
-- KEYS[1]   the semaphore's key
-- KEYS[2]   its voided leases, KEYS[1] .. ':voided': a sorted set of the lease ids released
--           while they held no permit, scored by the end of their time to live. Why: a release
--           sent after a grant timed out may reach Redis before the grant itself (on another
--           connection); the grant, voided, then grants nothing.
-- ARGV[1]   'acquire', 'renew' or 'release'
-- ARGV[2]   now in microseconds for tests, or '' to use the server's TIME
-- ARGV[3]   the semaphore's capacity (permits held at once)
-- ARGV[4]   permits of this lease
-- ARGV[5]   the lease id (made by the client: retrying an acquire is idempotent)
-- ARGV[6]   the lease's time to live in microseconds (acquire, renew)
--
-- acquire returns {granted (0/1), now, expiry_us, held_after} when granted (or when the lease
-- already holds its permits), else {0, now, free_at_us, held}: free_at is when enough leases
-- expire for this request if nobody releases earlier (for a voided lease, when it stops being
-- void). renew returns {1, now, expiry} or
-- {0, now, 0} when the lease has expired or is unknown. release returns {removed, now}, where
-- removed counts the permits the lease still held (not expired), and, when it removed some,
-- publishes "<removed>" on KEYS[1] .. ':released'.

local TTL_EXTRA_MS = 0
--!include lib/exact.lua

local key, voided, op = KEYS[1], KEYS[2], ARGV[1]
if #KEYS ~= 2 or #ARGV ~= 6 then error('redlimit: semaphore takes two keys and 6 arguments') end
local now_arg = ARGV[2]
--!include lib/now.lua
local capacity = integer_arg(ARGV[3], 'capacity', 1, 100000)
local permits = integer_arg(ARGV[4], 'permits', 1, capacity)
local id = ARGV[5]
local ttl = integer_arg(ARGV[6], 'ttl', 1, 1099511627776)
local live = '(' .. string.format('%d', now)

local function member(i)
  return id .. ':' .. string.format('%d', i)
end

-- Why: unpack() gives a command at most about 8,000 arguments, and a lease holds up to 100,000
-- permits: its members go to ZADD and ZREM in chunks, all inside this one atomic script.
local CHUNK = 1000

-- The lease's members first .. first + CHUNK - 1 (up to `permits`), each preceded by `score`
-- when one is given: the arguments of one ZADD or ZREM.
local function chunk_of_members(first, score)
  local args = {}
  for i = first, math.min(first + CHUNK - 1, permits) do
    if score then args[#args + 1] = score end
    args[#args + 1] = member(i)
  end
  return args
end

-- A sorted set scored by expiry lives until its latest member expires.
local function expire_with_latest(set)
  local latest = redis.call('ZRANGE', set, -1, -1, 'WITHSCORES')
  if latest[2] then
    redis.call('PEXPIRE', set, ceil_div(tonumber(latest[2]) - now, 1000) + TTL_EXTRA_MS)
  end
end

local function expiry_of_lease()
  local score = redis.call('ZSCORE', key, member(1))
  if score then return tonumber(score) end
end

if op == 'acquire' then
  local held = redis.call('ZCOUNT', key, live, '+inf')
  local void_until = redis.call('ZSCORE', voided, id)
  if void_until and tonumber(void_until) > now then return {0, now, tonumber(void_until), held} end
  local existing = expiry_of_lease()
  if existing and existing > now then return {1, now, existing, held} end  -- a retried acquire
  if held + permits > capacity then
    local must_expire = held + permits - capacity
    local frees = redis.call('ZRANGEBYSCORE', key, live, '+inf', 'WITHSCORES', 'LIMIT',
                             must_expire - 1, 1)
    return {0, now, tonumber(frees[2]), held}
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local expiry = now + ttl
  for first = 1, permits, CHUNK do
    redis.call('ZADD', key, unpack(chunk_of_members(first, expiry)))
  end
  expire_with_latest(key)
  return {1, now, expiry, held + permits}
elseif op == 'renew' then
  local existing = expiry_of_lease()
  if not existing or existing <= now then return {0, now, 0} end
  local expiry = now + ttl
  for first = 1, permits, CHUNK do
    redis.call('ZADD', key, 'XX', unpack(chunk_of_members(first, expiry)))
  end
  expire_with_latest(key)
  return {1, now, expiry}
elseif op == 'release' then
  -- Only permits that were still held count: an expired lease gave its permits back already.
  local held_before = redis.call('ZCOUNT', key, live, '+inf')
  for first = 1, permits, CHUNK do redis.call('ZREM', key, unpack(chunk_of_members(first))) end
  local removed = held_before - redis.call('ZCOUNT', key, live, '+inf')
  if removed > 0 then
    expire_with_latest(key)
    redis.call('PUBLISH', key .. ':released', string.format('%d', removed))
  else
    redis.call('ZREMRANGEBYSCORE', voided, '-inf', now)
    redis.call('ZADD', voided, now + ttl, id)
    expire_with_latest(voided)
  end
  return {removed, now}
end
error('redlimit: operation must be acquire, renew or release, got ' .. tostring(op))
