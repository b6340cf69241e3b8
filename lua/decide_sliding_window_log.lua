-- decide_sliding_window_log: lua/decide.lua for try_acquire on a policy of one
-- sliding_window_log limit, with the same decision and the same sorted set (members
-- "<time>:<k>" scored by their time, lua/algorithms/sliding_window_log.lua).
-- Model: src/algorithms/sliding_window_log.cpp.
--
-- Why a script of its own: as lua/decide_gcra.lua explains, EVALSHA runs a script's whole body
-- on every call; this one defines no function and builds one table (ZADD's arguments) only
-- when it admits.
--
-- KEYS[1]  the state key (a sorted set)
-- ARGV[1]  permits requested
-- ARGV[2]  now in microseconds, for tests only, or '' to use the server's TIME (with an
--          injected time, the key lives an hour longer, as in decide.lua)
-- ARGV[3]  limit (permits per window), ARGV[4] window in us, ARGV[5] 0 (unused, checked as
--          decide.lua checks it)
--
-- Returns, as decide_gcra does, "allowed (0/1) now_us limit remaining retry_after_us
-- reset_after_us", where now_us is the time the decision used: max(now, the newest member).

local MAX_EXACT = 4503599627370496  -- 2^52
local floor = math.floor

-- Every argument is checked before the first write.
local n, limit, window, unused =
    tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if #KEYS ~= 1 or #ARGV ~= 5 or
    not (n and limit and window and unused and n == floor(n) and limit == floor(limit) and
         window == floor(window) and unused == floor(unused) and n >= 1 and n <= MAX_EXACT and
         limit >= 1 and limit <= MAX_EXACT and window >= 1 and window <= MAX_EXACT and
         unused >= 0 and unused <= MAX_EXACT) then
  error('redlimit: decide_sliding_window_log expects 1 key and 5 integer arguments ' ..
        '(permits >= 1, limit >= 1, window >= 1, 0, all at most 2^52), got ' ..
        tostring(#KEYS) .. ' keys and ' .. table.concat(ARGV, ' '))
end
local now
local ttl_extra_ms = 0
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[2])
  if not now or now ~= floor(now) or now < 0 or now > MAX_EXACT then
    error('redlimit: argument now must be an integer in [0, 2^52], got ' .. tostring(ARGV[2]))
  end
  ttl_extra_ms = 3600000
end

-- Time is max(now, newest member), so a clock step backwards keeps the log in order.
local key = KEYS[1]
local t = now
local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
if newest[2] then
  local last = tonumber(newest[2])
  if last > t then t = last end
end
local outside = string.format('%d', t - window)  -- permits at or before this have left
local count = redis.call('ZCOUNT', key, '(' .. outside, '+inf')
local lag = t - now  -- after a clock step back, times count from now, not from t
if count + n <= limit then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', outside)
  local stamp = string.format('%d', t)
  local at_t = redis.call('ZCOUNT', key, stamp, stamp)
  local members, size = {}, 0
  for i = 1, n do
    members[size + 1] = stamp
    members[size + 2] = stamp .. ':' .. string.format('%d', at_t + i - 1)
    size = size + 2
    if size == 2000 or i == n then  -- bounded ZADD calls (Lua's unpack limit)
      redis.call('ZADD', key, unpack(members, 1, size))
      members, size = {}, 0
    end
  end
  local reset = window + lag
  -- The TTL in whole milliseconds, rounded up: ceil(reset / 1000).
  local ms = floor((reset + 999) / 1000)
  if ms * 1000 > reset + 999 then ms = ms - 1
  elseif (ms + 1) * 1000 <= reset + 999 then ms = ms + 1 end
  redis.call('PEXPIRE', key, string.format('%d', ms + ttl_extra_ms))
  return string.format('1 %d %d %d 0 %d', t, limit, limit - count - n, reset)
end
-- The request fits once the (count + n - limit)-th oldest permit in the window has left.
local must_leave = count + n - limit
local oldest = redis.call('ZRANGEBYSCORE', key, '(' .. outside, '+inf', 'WITHSCORES', 'LIMIT',
                          must_leave - 1, 1)
local remaining = limit - count
if remaining < 0 then remaining = 0 end
return string.format('0 %d %d %d %d %d', t, limit, remaining,
                     tonumber(oldest[2]) + window - now, tonumber(newest[2]) + window - now)
