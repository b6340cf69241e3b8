-- The stored state of a token bucket key, as functions for lua/reserve.lua: "level:last:d", or
-- "level:last:d:version:cancels:epoch" once acquire() reserved on the key (see
-- reservations/cancel.lua). Tokens are counted in units of 1/d token; a reservation may leave
-- the level negative (a debt). Needs exact.lua. C++ twin: src/algorithms/token_bucket.cpp.

-- The most debt a level may carry: keeps every value exact.
local function max_debt(full)
  return MAX_EXACT - full
end

-- The level at max(now, last) after refilling, that time, and the reservation bookkeeping
-- {version, cancels, epoch}.
local function load_tokens(key, now, p, d, full)
  local t = now
  --!include load_tokens.lua
  return level, t, {version, cancels, epoch}
end

local function tokens_value(left, t, d, book)
  local version, cancels, epoch = book[1], book[2], book[3]
  --!include tokens_value.lua
  return value
end
