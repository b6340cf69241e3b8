-- Sliding window counter: counts of the current aligned window and of the previous one; the
-- previous count is weighted by the part of it still inside the trailing window:
-- used = previous - floor(previous * elapsed / period) + current. Cheap for any limit, but an
-- estimate (see docs/algorithms.md for its error bound). The key holds
-- "start:current:previous:limit:period:pv" (the stamp: the parameters and policy version it was
-- written under, or for pv 0 the reset tag; a value of the previous release,
-- "start:current:previous", has none). A value the stamp rule restamps (lib/stamp_rule.lua:
-- other parameters, another version of a store, or a reset due) or without a stamp is carried
-- over with the carry the rule leaves: its current and previous windows' counts each land in the
-- newest new window (current or previous) they overlap, as `carry` says, and it is written back
-- under the new stamp also when denied. When its current window started after the change's
-- since, an old-version write rolled the counters on after since and dropped the windows the
-- state held then (the one holding since, and the one before) that it rolled past: each of those
-- counts as full (the old limit) and lands the same way (stricter than their counts, never
-- looser).
-- When the Redis clock steps back: no window is ever written starting after the now it was
-- decided at, so a stored window starting after now is a clock step. It is taken as the window
-- (of its period) holding now, with both its counts: the permits used stay counted, and it is
-- written back, also when denied, so the key is locked for at most two periods (its current
-- count then decays through the next window), not the whole step.
-- Model: src/algorithms/sliding_window_counter.cpp.
--!params limit, period, unused
--!checks limit >= 1, period >= 1, 0
--!needs ../lib/muldiv.lua

--!section decide
local s_start, s_current, s_previous
local old_limit, old_period = limit, period
local params = string.format(':%d:%d:', limit, period)  -- the stamp less its pv
local spv, other = nil, false  -- the stored stamp's version, and whether its parameters differ
local stored = redis.call('GET', key)
if stored then
  local first = string.find(stored, ':', 1, true)
  local second = string.find(stored, ':', first + 1, true)
  local third = string.find(stored, ':', second + 1, true)
  s_start = tonumber(string.sub(stored, 1, first - 1))
  s_current = tonumber(string.sub(stored, first + 1, second - 1))
  if third then
    s_previous = tonumber(string.sub(stored, second + 1, third - 1))
    if string.sub(stored, third, third + #params - 1) == params then
      spv = tonumber(string.sub(stored, third + #params))
    else
      --!include ../lib/split.lua
      old_limit, old_period = fields[4], fields[5]
      spv, other = fields[6], true
    end
  else
    -- The previous release's format: read under the current parameters, then stamped.
    s_previous = tonumber(string.sub(stored, second + 1))
  end
  if s_start > now then
    s_start = IDIV(now, old_period)
    s_start = s_start * old_period
    rewrite = true
  end
end
--!include ../lib/stamp_rule.lua
local stamped = restamp  -- a stamp other than the one written: converted
local converting = stamped or (stored and spv == nil)
local stamp = params .. string.format('%d', stamp_pv)
-- The aligned window holding now.
local start = IDIV(now, period)
start = start * period
local current, previous = 0, 0
if stored and not converting then
  if s_start == start then
    current, previous = s_current, s_previous
  elseif s_start == start - period then
    previous = s_current
  end
elseif stored then
  -- Each stored window lands in the newest new window it overlaps: this one or the one before.
  -- The state held two windows at since, the old one holding it and the one before; a stored
  -- window that started after since was started by an old-version write, which rolled the
  -- counters past one or both of them: each window lost so counts as full (the old limit) and
  -- lands the same way (windows 3 and 4; nothing when not lost).
  local held = IDIV(since, old_period)
  held = held * old_period
  local lost_before, lost_held = 0, 0
  if stamped and s_start > since then lost_before = old_limit end
  if stamped and s_start - old_period > since then lost_held = old_limit end
  for i = 1, 4 do
    local from, count = s_start, s_current
    if i == 2 then from, count = s_start - old_period, s_previous end
    if i == 3 then from, count = held - old_period, lost_before end
    if i == 4 then from, count = held, lost_held end
    --!include ../lib/carried_count.lua
    if from < start + period and start < from + old_period then
      current = current + count
    elseif from < start and start - period < from + old_period then
      previous = previous + count
    end
  end
  if current > MAX_EXACT then current = MAX_EXACT end
  if previous > MAX_EXACT then previous = MAX_EXACT end
  rewrite = true
end
local elapsed = now - start
local used = previous - muldiv(previous, elapsed, period) + current
allowed = used + n <= limit
capacity = limit
if allowed then
  remaining = limit - used - n
  reset = 2 * period - elapsed
else
  remaining = limit - used
  if remaining < 0 then remaining = 0 end
  -- Later in this window, as the previous window's weight decays: the first e after the window
  -- start with previous - floor(previous * e / period) <= room is
  -- ceil((previous - room) * period / previous)...
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
  if current > 0 then reset = 2 * period - elapsed
  elseif previous > 0 then reset = period - elapsed end
end

--!section idle
reset = 0
if current > 0 then reset = 2 * period - elapsed
elseif previous > 0 then reset = period - elapsed end

--!section write
local ms = CEIL_DIV(reset, 1000)  -- the TTL in whole milliseconds, rounded up
redis.call('SET', key, string.format('%d:%d:%d', start, current + taken, previous) .. stamp, 'PX',
           string.format('%d', ms + TTL_EXTRA_MS))

--!section adjust
-- refund: n permits back to the window holding now, which must hold them (a past window's
-- permits cannot be given back); give_back: the take at taken_at's permits, from the window
-- that holds them (this one or the one before); penalize: n permits more in it, beyond the
-- limit if so. block
-- is refused: the counters cannot deny until an arbitrary time (the caller says so first).
--!use decide
if op == 'give_back' then
  -- The take counts in the window that held taken_at: this one, or the one before, whose
  -- weight still decays; an older one is gone.
  local delta = 0
  if taken_at > now or rewrite then
    delta = 0  -- a clock step back or a policy change since: nothing is known to come back
  elseif start <= taken_at then
    delta = -n
    if current < n then delta = -current end
  elseif start - period <= taken_at then
    previous = previous - n
    if previous < 0 then previous = 0 end
  end
  reset = 2 * period - elapsed
  apply = function()
    local taken = delta
    --!use write
  end
elseif op == 'block' then
  refused = 'a sliding_window_counter limit cannot block'
elseif op == 'refund' and current < n then
  refused = string.format('the current window holds %d permits, fewer than the %d refunded ' ..
                          '(permits of a past window cannot be given back)', current, n)
else
  local delta = n
  if op == 'refund' then delta = -n end
  reset = 2 * period - elapsed
  apply = function()
    local taken = delta
    --!use write
  end
end
