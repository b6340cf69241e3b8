-- decide_fixed_window: lua/decide.lua for try_acquire on a policy of one fixed_window limit,
-- with the same decision and the same stored state "start:count"
-- (lua/algorithms/fixed_window.lua). Model: src/algorithms/fixed_window.cpp.
--
-- Why a script of its own: as lua/decide_gcra.lua explains, EVALSHA runs a script's whole body
-- on every call; this one defines no function and builds no table.
--
-- Arguments as lib/lean_arguments.lua describes; the limit's fields:
-- ARGV[3]  limit (permits per window), ARGV[4] period in us, ARGV[5] anchored (0 or 1)
--
-- Returns, as decide_gcra does, "allowed (0/1) now_us limit remaining retry_after_us
-- reset_after_us", where now_us is the time the decision used: max(now, the stored start).

local lean_script, lean_fields =
    'decide_fixed_window', 'limit >= 1, period >= 1, anchored >= 0'
--!include lib/lean_arguments.lua
local limit, period, anchored = field1, field2, field3

-- Time is max(now, stored start), so a clock step backwards stays in the stored window.
local key = KEYS[1]
local t = now
local stored_start, stored_count
local stored = redis.call('GET', key)
if stored then
  local colon = string.find(stored, ':', 1, true)
  stored_start = tonumber(string.sub(stored, 1, colon - 1))
  stored_count = tonumber(string.sub(stored, colon + 1))
  if stored_start > t then t = stored_start end
end
local start, count = t, 0
if anchored == 1 then
  if stored and t < stored_start + period then start, count = stored_start, stored_count end
else
  -- The aligned window holding t: floor(t / period) * period.
  local q = floor(t / period)
  if q * period > t then q = q - 1 elseif (q + 1) * period <= t then q = q + 1 end
  start = q * period
  -- A stored window that began inside this one (the period grew) still counts.
  if stored and stored_start >= start then count = stored_count end
end
local reset = start + period - now  -- from now, also after a clock step back
if count + n <= limit then
  -- The TTL in whole milliseconds, rounded up: ceil(reset / 1000).
  local ms = floor((reset + 999) / 1000)
  if ms * 1000 > reset + 999 then ms = ms - 1
  elseif (ms + 1) * 1000 <= reset + 999 then ms = ms + 1 end
  redis.call('SET', key, string.format('%d:%d', start, count + n), 'PX',
             string.format('%d', ms + ttl_extra_ms))
  return string.format('1 %d %d %d 0 %d', t, limit, limit - count - n, reset)
end
local remaining = limit - count
if remaining < 0 then remaining = 0 end
return string.format('0 %d %d %d %d %d', t, limit, remaining, reset, reset)
