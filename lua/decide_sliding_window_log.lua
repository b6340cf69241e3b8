-- decide_sliding_window_log: lua/decide.lua for try_acquire on a policy of one
-- sliding_window_log limit, with the same decision and the same sorted set (members
-- "<time>:<k>" scored by their time, lua/algorithms/sliding_window_log.lua).
-- Model: src/algorithms/sliding_window_log.cpp.
--
-- Why a script of its own: as lua/decide_gcra.lua explains, EVALSHA runs a script's whole body
-- on every call; this one defines no function and builds one table (ZADD's arguments) only
-- when it admits.
--
-- Arguments as lib/lean_arguments.lua describes (KEYS[1] is a sorted set); the limit's fields:
-- ARGV[3]  limit (permits per window), ARGV[4] window in us, ARGV[5] 0 (unused, checked as
--          decide.lua checks it)
--
-- Returns, as decide_gcra does, "allowed (0/1) now_us limit remaining retry_after_us
-- reset_after_us", where now_us is the time the decision used: max(now, the newest member).

local lean_script, lean_fields = 'decide_sliding_window_log', 'limit >= 1, window >= 1, 0'
--!include lib/lean_arguments.lua
local limit, window = field1, field2  -- field3 is 0, unused

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
