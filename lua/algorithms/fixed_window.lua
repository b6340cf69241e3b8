-- Fixed window: a counter per window of `period` us. Aligned windows start at multiples of the
-- period since the epoch; anchored windows start at the first request after the previous one
-- ended. The key holds "start:count:limit:period:anchored:pv" (the stamp: the parameters and
-- policy version it was written under, or for pv 0 the reset tag; a value of the previous
-- release, "start:count", has none). A value the stamp rule restamps (lib/stamp_rule.lua: other
-- parameters, another version of a store, or a reset due) or without a stamp is carried over
-- with the carry the rule leaves: its window's count holds in the new window holding now when
-- the two overlap (anchored: the kept window, or one starting now while the stored one is open),
-- as `carry` says, and it is written back under the new stamp also when denied. A stored window
-- that started after the change's since was started by an old-version write, which dropped the
-- count of the window that held since: that lost window counts as full (the old limit) as well,
-- where it meets the new window holding now (stricter than its count, never looser).
-- When the Redis clock steps back: no window is ever written starting after the now it was
-- decided at, so a stored window starting after now is a clock step. It is taken as a window
-- starting now, with its count (as the window holding now, when aligned): the permits used stay
-- counted, and it is written back, also when denied, so the key is locked for at most one
-- period, not the whole step.
-- Model: src/algorithms/fixed_window.cpp.
--!params limit, period, anchored
--!checks limit >= 1, period >= 1, anchored >= 0

--!section decide
local stored_start, stored_count
local old_limit, old_period, old_anchored = limit, period, anchored
local params = string.format(':%d:%d:%d:', limit, period, anchored)  -- the stamp less its pv
local spv, other = nil, false  -- the stored stamp's version, and whether its parameters differ
local stored = redis.call('GET', key)
if stored then
  local first = string.find(stored, ':', 1, true)
  local second = string.find(stored, ':', first + 1, true)
  stored_start = tonumber(string.sub(stored, 1, first - 1))
  if second then
    stored_count = tonumber(string.sub(stored, first + 1, second - 1))
    if string.sub(stored, second, second + #params - 1) == params then
      spv = tonumber(string.sub(stored, second + #params))
    else
      --!include ../lib/split.lua
      old_limit, old_period, old_anchored = fields[3], fields[4], fields[5]
      spv, other = fields[6], true
    end
  else
    -- The previous release's format: read under the current parameters, then stamped.
    stored_count = tonumber(string.sub(stored, first + 1))
  end
  if stored_start > now then
    stored_start = now
    rewrite = true
  end
end
--!include ../lib/stamp_rule.lua
local stamped = restamp  -- a stamp other than the one written: converted
local converting = stamped or (stored and spv == nil)
local stamp = params .. string.format('%d', stamp_pv)
local start, count = now, 0
if anchored == 1 then
  if stored and now < stored_start + period then
    start, count = stored_start, stored_count
  elseif converting and now < stored_start + old_period then
    count = stored_count  -- the period shrank: the open stored window carries into one at now
  end
else
  -- The aligned window holding now, and the stored window's count if the two overlap.
  local q = IDIV(now, period)
  start = q * period
  if stored and stored_start < start + period and start < stored_start + old_period then
    count = stored_count
  end
end
-- A stored window that started after since was started by an old-version write (a process that
-- had not heard of the change yet), and the count of the old window that held since went with
-- it. That window was admitted before since: it counts as full (the old limit) where it meets
-- the new window holding now. Its start: aligned, the old period's multiple; anchored, the
-- latest it can have been, as it ended by the stored window's start. Its length: the old
-- period; in an anchored window, the new period (an anchored carry keeps a window's start).
if stamped and stored_start > since then
  local from = since
  if old_anchored == 1 then
    if stored_start - old_period < from then from = stored_start - old_period end
  else
    from = IDIV(since, old_period)
    from = from * old_period
  end
  local length = old_period
  if anchored == 1 then length = period end
  if from < start + period and start < from + length then
    count = count + old_limit
    if count > MAX_EXACT then count = MAX_EXACT end
  end
end
if converting then
  --!include ../lib/carried_count.lua
  rewrite = true
end
reset = start + period - now
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
redis.call('SET', key, string.format('%d:%d', start, count + taken) .. stamp, 'PX',
           string.format('%d', ms + TTL_EXTRA_MS))

--!section adjust
-- refund: n permits back to the window holding now, which must hold them (a past window's
-- permits cannot be given back); give_back: the take at taken_at's permits, if that window holds
-- it; penalize: n permits more in it, beyond the limit if so. block
-- is refused: one window's count cannot deny until an arbitrary time (the caller says so first).
--!use decide
if op == 'give_back' then
  -- The window holding now holds the take only if it began by then; else it went with its
  -- window, and nothing comes back.
  if start <= taken_at and taken_at <= now and not rewrite then
    local back = n
    if back > count then back = count end
    apply = function()
      local taken = -back
      --!use write
    end
  end
elseif op == 'block' then
  refused = 'a fixed_window limit cannot block'
elseif op == 'refund' and count < n then
  refused = string.format('the current window holds %d permits, fewer than the %d refunded ' ..
                          '(permits of a past window cannot be given back)', count, n)
else
  local delta = n
  if op == 'refund' then delta = -n end
  apply = function()
    local taken = delta
    --!use write
  end
end
