-- The stored state of a token bucket key: "level:last:d", or "level:last:d:version:cancels:epoch"
-- once acquire() reserved on the key (see reservations/cancel.lua). Tokens are counted in units
-- of 1/d token; a reservation may leave the level negative (a debt). Needs exact.lua and
-- frac_time.lua (NO_BOOK). C++ twin: src/algorithms/token_bucket.cpp.

-- The most debt a level may carry: keeps every value exact.
local function max_debt(full)
  return MAX_EXACT - full
end

-- The level at max(now, last) after refilling, that time, and the reservation bookkeeping
-- {version, cancels, epoch}.
local function load_tokens(key, now, p, d, full)
  local level, last, book = full, now, NO_BOOK
  local stored = redis.call('GET', key)
  if stored then
    local den, version, cancels, epoch
    level, last, den, version, cancels, epoch = split_value(stored)
    if version then book = {version, cancels or 0, epoch or 0} end
    -- A level counted in another unit keeps its whole tokens (or its whole debt, rounded up).
    if den ~= d then
      if level >= 0 then
        local tokens = idiv(level, den)
        if tokens * d >= full then level = full else level = tokens * d end
      else
        local debt = ceil_div(-level, den)
        if debt > idiv(max_debt(full), d) then level = -max_debt(full) else level = -debt * d end
      end
    end
    if level > full then level = full end
  end
  local t = now
  if last > t then t = last end
  local missing = full - level
  if missing > 0 then
    local elapsed = t - last
    if elapsed >= ceil_div(missing, p) then level = full else level = level + elapsed * p end
  end
  return level, t, book
end

local function tokens_value(level, t, d, book)
  if book[1] > 0 then
    return string.format('%d:%d:%d:%d:%d:%d', level, t, d, book[1], book[2], book[3])
  end
  return string.format('%d:%d:%d', level, t, d)
end
