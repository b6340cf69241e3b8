-- Fixed window: a counter per window of `period` us. Aligned windows start at multiples of the
-- period since the epoch; anchored windows start at the first request after the previous one
-- ended. The key holds "start:count"; time is max(TIME, start), so a clock step backwards
-- stays in the stored window. Model: src/algorithms/fixed_window.cpp.
--
-- lua/decide_fixed_window.lua is this algorithm inlined into a script of its own (try_acquire on a
-- single fixed_window limit): a change here goes there too. The differential test runs both.

local function fixed_window(key, now, n, limit, period, anchored)
  local t = now
  local stored_start, stored_count
  local stored = redis.call('GET', key)
  if stored then
    stored_start, stored_count = split_value(stored)
    if stored_start > t then t = stored_start end
  end
  local start, count = t, 0
  if anchored == 1 then
    if stored and t < stored_start + period then start, count = stored_start, stored_count end
  else
    start = idiv(t, period) * period
    -- A stored window that began inside this one (the period grew) still counts.
    if stored and stored_start >= start then count = stored_count end
  end
  local reset = start + period - now  -- from now, also after a clock step back
  if count + n <= limit then
    local value = string.format('%d:%d', start, count + n)
    return true, limit, limit - count - n, 0, reset, t, function() store(key, value, reset) end
  end
  local remaining = limit - count
  if remaining < 0 then remaining = 0 end
  return false, limit, remaining, reset, reset, t
end

ALGORITHMS['fixed_window'] = fixed_window
