-- Loads a token bucket key `key`: the level at t = max(t, last) after refilling (statements, as
-- lib/load_frac_time.lua). Needs full = burst * d and t (the time so far, now).
--
-- The stored value: "level:last:d", or "level:last:d:version:cancels:epoch" once acquire()
-- reserved on the key (see reservations/cancel.lua), written by lib/tokens_value.lua. Tokens
-- are counted in units of 1/d token; a reservation may leave the level negative (a debt).
-- C++ twin: src/algorithms/token_bucket.cpp.
--
-- Leaves level (in 1/d token), last, version, cancels and epoch, and moves t.
local level, last = full, now
local version, cancels, epoch = 0, 0, 0
local stored = redis.call('GET', key)
if stored then
  --!include split.lua
  local den = fields[3]
  level, last = fields[1], fields[2]
  if fields[4] then version, cancels, epoch = fields[4], fields[5] or 0, fields[6] or 0 end
  -- A level counted in another unit keeps its whole tokens (or its whole debt, rounded up).
  if den ~= d then
    if level >= 0 then
      local tokens = IDIV(level, den)
      if tokens * d >= full then level = full else level = tokens * d end
    else
      local debt = CEIL_DIV(-level, den)
      local max_debt = MAX_EXACT - full  -- the most debt a level may carry
      local most = IDIV(max_debt, d)
      if debt > most then level = -max_debt else level = -debt * d end
    end
  end
  if level > full then level = full end
end
if last > t then t = last end
local missing = full - level
if missing > 0 then
  local refill = CEIL_DIV(missing, p)  -- full again after this many us
  if t - last >= refill then level = full else level = level + (t - last) * p end
end
