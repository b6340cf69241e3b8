-- decide_sliding_window_counter: lua/decide.lua for try_acquire on a policy of one
-- sliding_window_counter limit, with the same decision and the same stored state
-- "start:current:previous" (lua/algorithms/sliding_window_counter.lua).
-- Model: src/algorithms/sliding_window_counter.cpp.
--
-- Why a script of its own: as lua/decide_gcra.lua explains, EVALSHA runs a script's whole body
-- on every call; this one defines one function (muldiv) and builds no table on the common path.
--
-- Arguments as lib/lean_arguments.lua describes; the limit's fields:
-- ARGV[3]  limit (permits per window), ARGV[4] period in us, ARGV[5] 0 (unused, checked as
--          decide.lua checks it)
--
-- Returns, as decide_gcra does, "allowed (0/1) now_us limit remaining retry_after_us
-- reset_after_us", where now_us is the time the decision used: max(now, the stored start).

local lean_script, lean_fields = 'decide_sliding_window_counter', 'limit >= 1, period >= 1, 0'
--!include lib/lean_arguments.lua
local limit, period = field1, field2  -- field3 is 0, unused

-- floor(a * b / c) and the remainder (muldiv in lib/exact.lua, which explains it).
-- Why a function, the only one: it is needed up to three times, and its digit loop (taken only
-- when a * b would pass 2^52) is too long to repeat; one closure per call costs little.
local function muldiv(a, b, c)
  if b == 0 or a <= MAX_EXACT / b then
    local x = a * b
    local q = floor(x / c)
    if q * c > x then q = q - 1 elseif (q + 1) * c <= x then q = q + 1 end
    return q, x - q * c
  end
  local qa = floor(a / c)
  if qa * c > a then qa = qa - 1 elseif (qa + 1) * c <= a then qa = qa + 1 end
  local ra = a - qa * c
  local digits, count, rest = {}, 0, b
  while rest > 0 do
    local high = floor(rest / 32)
    if high * 32 > rest then high = high - 1 elseif (high + 1) * 32 <= rest then high = high + 1 end
    count = count + 1
    digits[count] = rest - high * 32
    rest = high
  end
  local q, r = 0, 0
  for i = count, 1, -1 do
    r = r * 32 + ra * digits[i]
    local k = floor(r / c)
    if k * c > r then k = k - 1 elseif (k + 1) * c <= r then k = k + 1 end
    q = q * 32 + k
    r = r - k * c
  end
  return qa * b + q, r
end

-- Time is max(now, stored start), so a clock step backwards stays in the stored windows.
local key = KEYS[1]
local t = now
local s_start, s_current, s_previous
local stored = redis.call('GET', key)
if stored then
  local first = string.find(stored, ':', 1, true)
  local second = string.find(stored, ':', first + 1, true)
  s_start = tonumber(string.sub(stored, 1, first - 1))
  s_current = tonumber(string.sub(stored, first + 1, second - 1))
  s_previous = tonumber(string.sub(stored, second + 1))
  if s_start > t then t = s_start end
end
-- The aligned window holding t: floor(t / period) * period.
local q = floor(t / period)
if q * period > t then q = q - 1 elseif (q + 1) * period <= t then q = q + 1 end
local start = q * period
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
  -- The TTL in whole milliseconds, rounded up: ceil(reset / 1000).
  local ms = floor((reset + 999) / 1000)
  if ms * 1000 > reset + 999 then ms = ms - 1
  elseif (ms + 1) * 1000 <= reset + 999 then ms = ms + 1 end
  redis.call('SET', key, string.format('%d:%d:%d', start, current + n, previous), 'PX',
             string.format('%d', ms + ttl_extra_ms))
  return string.format('1 %d %d %d 0 %d', t, limit, limit - used - n, reset)
end
local remaining = limit - used
if remaining < 0 then remaining = 0 end
-- Later in this window, as the previous window's weight decays: the first e after the window
-- start with previous - floor(previous * e / period) <= room, ceil((previous - room) * period /
-- previous) (decayed_enough_at in lua/algorithms/sliding_window_counter.lua)...
local retry = 0
local room = limit - current - n
if room >= 0 then
  local at, r = muldiv(previous - room, period, previous)
  if r > 0 then at = at + 1 end
  if at < period then retry = at - elapsed end
end
-- ...or in the next window, where this window's count is the one that decays.
if retry == 0 then
  local room_next = limit - n
  if current <= room_next then
    retry = period - elapsed
  else
    local at, r = muldiv(current - room_next, period, current)
    if r > 0 then at = at + 1 end
    if at < period then retry = period - elapsed + at else retry = 2 * period - elapsed end
  end
end
local reset = 0
if current > 0 then reset = 2 * period - elapsed
elseif previous > 0 then reset = period - elapsed end
return string.format('0 %d %d %d %d %d', t, limit, remaining, retry + lag, reset + lag)
