-- decide_fixed_window: lua/decide.lua for try_acquire on a policy of one fixed_window limit,
-- with the same decision and the same stored state "start:count"
-- (lua/algorithms/fixed_window.lua). Model: src/algorithms/fixed_window.cpp.
--
-- Why a script of its own: as lua/decide_gcra.lua explains, EVALSHA runs a script's whole body
-- on every call; this one defines no function and builds no table.
--
-- KEYS[1]  the state key
-- ARGV[1]  permits requested
-- ARGV[2]  now in microseconds, for tests only, or '' to use the server's TIME (with an
--          injected time, the key lives an hour longer, as in decide.lua)
-- ARGV[3]  limit (permits per window), ARGV[4] period in us, ARGV[5] anchored (0 or 1)
--
-- Returns, as decide_gcra does, "allowed (0/1) now_us limit remaining retry_after_us
-- reset_after_us", where now_us is the time the decision used: max(now, the stored start).

local MAX_EXACT = 4503599627370496  -- 2^52
local floor = math.floor

-- Every argument is checked before the first write.
local n, limit, period, anchored =
    tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if #KEYS ~= 1 or #ARGV ~= 5 or
    not (n and limit and period and anchored and n == floor(n) and limit == floor(limit) and
         period == floor(period) and anchored == floor(anchored) and n >= 1 and
         n <= MAX_EXACT and limit >= 1 and limit <= MAX_EXACT and period >= 1 and
         period <= MAX_EXACT and anchored >= 0 and anchored <= MAX_EXACT) then
  error('redlimit: decide_fixed_window expects 1 key and 5 integer arguments (permits >= 1, ' ..
        'limit >= 1, period >= 1, anchored >= 0, all at most 2^52), got ' .. tostring(#KEYS) ..
        ' keys and ' .. table.concat(ARGV, ' '))
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
