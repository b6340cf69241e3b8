-- Fixed window: a counter per window of `period` us. Aligned windows start at multiples of the
-- period since the epoch; anchored windows start at the first request after the previous one
-- ended. The key holds "start:count"; time is max(now, start), so a clock step backwards stays
-- in the stored window. Model: src/algorithms/fixed_window.cpp.
--!params limit, period, anchored
--!checks limit >= 1, period >= 1, anchored >= 0

--!section decide
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
  -- The aligned window holding t.
  local q = IDIV(t, period)
  start = q * period
  -- A stored window that began inside this one (the period grew) still counts.
  if stored and stored_start >= start then count = stored_count end
end
reset = start + period - now  -- from now, also after a clock step back
allowed = count + n <= limit
capacity = limit
if allowed then
  remaining = limit - count - n
else
  remaining = limit - count
  if remaining < 0 then remaining = 0 end
  retry = reset
end

--!section idle
if count == 0 then reset = 0 end

--!section write
local ms = CEIL_DIV(reset, 1000)  -- the TTL in whole milliseconds, rounded up
redis.call('SET', key, string.format('%d:%d', start, count + taken), 'PX',
           string.format('%d', ms + TTL_EXTRA_MS))
