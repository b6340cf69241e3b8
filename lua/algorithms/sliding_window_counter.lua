-- Sliding window counter: counts of the current aligned window and of the previous one; the
-- previous count is weighted by the part of it still inside the trailing window:
-- used = previous - floor(previous * elapsed / period) + current. Cheap for any limit, but an
-- estimate (see docs/algorithms.md for its error bound). The key holds "start:current:previous".
-- Model: src/algorithms/sliding_window_counter.cpp.
--
-- lua/decide_sliding_window_counter.lua is this algorithm inlined into a script of its own
-- (try_acquire on a single sliding_window_counter limit): a change here goes there too. The
-- differential test runs both.

-- The first time after a window start at which count - floor(count * e / period) <= room,
-- for count > room >= 0.
local function decayed_enough_at(count, room, period)
  return muldiv_ceil(count - room, period, count)
end

local function sliding_window_counter(key, now, n, limit, period)
  local t = now
  local s_start, s_current, s_previous
  local stored = redis.call('GET', key)
  if stored then
    s_start, s_current, s_previous = split_value(stored)
    if s_start > t then t = s_start end
  end
  local start = idiv(t, period) * period
  local current, previous = 0, 0
  if stored then
    if s_start == start then
      current, previous = s_current, s_previous
    elseif s_start > start then
      current = s_current + s_previous  -- the period grew: count all of it as current
    elseif s_start == start - period then
      previous = s_current
    elseif s_start > start - period then
      previous = s_current + s_previous  -- the period changed
    end
  end
  local elapsed = t - start
  local lag = t - now  -- after a clock step back, times count from now, not from t
  local used = previous - muldiv(previous, elapsed, period) + current
  if used + n <= limit then
    local reset = 2 * period - elapsed + lag
    local value = string.format('%d:%d:%d', start, current + n, previous)
    return true, limit, limit - used - n, 0, reset, t, function() store(key, value, reset) end
  end
  local remaining = limit - used
  if remaining < 0 then remaining = 0 end
  -- Later in this window, as the previous window's weight decays...
  local retry = 0
  local room = limit - current - n
  if room >= 0 then
    local at = decayed_enough_at(previous, room, period)
    if at < period then retry = at - elapsed end
  end
  -- ...or in the next window, where this window's count is the one that decays.
  if retry == 0 then
    local room_next = limit - n
    if current <= room_next then
      retry = period - elapsed
    else
      local at = decayed_enough_at(current, room_next, period)
      if at < period then retry = period - elapsed + at else retry = 2 * period - elapsed end
    end
  end
  local reset = 0
  if current > 0 then reset = 2 * period - elapsed elseif previous > 0 then reset = period - elapsed end
  return false, limit, remaining, retry + lag, reset + lag, t
end

ALGORITHMS['sliding_window_counter'] = sliding_window_counter
