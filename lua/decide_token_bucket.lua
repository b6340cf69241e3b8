-- decide_token_bucket: lua/decide.lua for try_acquire on a policy of one token_bucket limit,
-- with the same decision and the same stored state (lua/algorithms/token_bucket.lua, stored as
-- lib/tokens.lua describes). Model: src/algorithms/token_bucket.cpp.
--
-- Why a script of its own: as lua/decide_gcra.lua explains, EVALSHA runs a script's whole body
-- on every call; this one defines no function and builds no table but the stored value's fields.
--
-- Arguments as lib/lean_arguments.lua describes; the limit's fields:
-- ARGV[3]  p, ARGV[4] d (the rate in lowest terms: p tokens every d us), ARGV[5] burst
--
-- Returns, as decide_gcra does, "allowed (0/1) now_us limit remaining retry_after_us
-- reset_after_us", where now_us is the time the decision used: max(now, the stored last).
--
-- Every floor(a / b) below is the double quotient corrected by one either way (idiv in
-- lib/exact.lua), and ceil(a / b) is floor((a + b - 1) / b).

local lean_script, lean_fields = 'decide_token_bucket', 'p >= 1, d >= 1, burst >= 0'
--!include lib/lean_arguments.lua
local p, d, burst = field1, field2, field3

-- The level at t = max(now, last) after refilling (load_tokens in lib/tokens.lua). The stored
-- value is "level:last:d" or "level:last:d:version:cancels:epoch"; tokens count in 1/d token.
local key = KEYS[1]
local full = burst * d
local level, last = full, now
local version, cancels, epoch = 0, 0, 0
local stored = redis.call('GET', key)
if stored then
--!include lib/lean_split.lua
  local den = fields[3]
  level, last = fields[1], fields[2]
  if fields[4] then version, cancels, epoch = fields[4], fields[5] or 0, fields[6] or 0 end
  -- A level counted in another unit keeps its whole tokens (or its whole debt, rounded up).
  if den ~= d then
    if level >= 0 then
      local tokens = floor(level / den)
      if tokens * den > level then tokens = tokens - 1
      elseif (tokens + 1) * den <= level then tokens = tokens + 1 end
      if tokens * d >= full then level = full else level = tokens * d end
    else
      local owed = -level + den - 1
      local debt = floor(owed / den)
      if debt * den > owed then debt = debt - 1
      elseif (debt + 1) * den <= owed then debt = debt + 1 end
      local max_debt = MAX_EXACT - full  -- the most debt a level may carry
      local most = floor(max_debt / d)
      if most * d > max_debt then most = most - 1
      elseif (most + 1) * d <= max_debt then most = most + 1 end
      if debt > most then level = -max_debt else level = -debt * d end
    end
  end
  if level > full then level = full end
end
local t = now
if last > t then t = last end
local missing = full - level
if missing > 0 then
  -- Full again after ceil(missing / p) us.
  local x = missing + p - 1
  local refill = floor(x / p)
  if refill * p > x then refill = refill - 1
  elseif (refill + 1) * p <= x then refill = refill + 1 end
  local elapsed = t - last
  if elapsed >= refill then level = full else level = level + elapsed * p end
end

local cost = n * d
local lag = t - now  -- after a clock step back, times count from now, not from t
if level >= cost then
  local left = level - cost
  local remaining = floor(left / d)
  if remaining * d > left then remaining = remaining - 1
  elseif (remaining + 1) * d <= left then remaining = remaining + 1 end
  -- Full again after ceil((full - left) / p) us.
  local x = full - left + p - 1
  local reset = floor(x / p)
  if reset * p > x then reset = reset - 1 elseif (reset + 1) * p <= x then reset = reset + 1 end
  reset = reset + lag
  local value
  if version > 0 then
    value = string.format('%d:%d:%d:%d:%d:%d', left, t, d, version, cancels, epoch)
  else
    value = string.format('%d:%d:%d', left, t, d)
  end
  -- The TTL in whole milliseconds, rounded up: ceil(reset / 1000).
  local ms = floor((reset + 999) / 1000)
  if ms * 1000 > reset + 999 then ms = ms - 1
  elseif (ms + 1) * 1000 <= reset + 999 then ms = ms + 1 end
  redis.call('SET', key, value, 'PX', string.format('%d', ms + ttl_extra_ms))
  return string.format('1 %d %d %d 0 %d', t, burst, remaining, reset)
end
local remaining = 0
if level > 0 then
  remaining = floor(level / d)
  if remaining * d > level then remaining = remaining - 1
  elseif (remaining + 1) * d <= level then remaining = remaining + 1 end
end
-- Denied: enough tokens after ceil((cost - level) / p) us, full after ceil((full - level) / p).
local x = cost - level + p - 1
local retry = floor(x / p)
if retry * p > x then retry = retry - 1 elseif (retry + 1) * p <= x then retry = retry + 1 end
x = full - level + p - 1
local reset = floor(x / p)
if reset * p > x then reset = reset - 1 elseif (reset + 1) * p <= x then reset = reset + 1 end
return string.format('0 %d %d %d %d %d', t, burst, remaining, retry + lag, reset + lag)
