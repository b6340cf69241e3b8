-- Token bucket: tokens refill continuously at p per d us up to `burst`; a request for n permits
-- takes n tokens. Tokens are counted in units of 1/d token so that refill is exact. The key
-- holds the level as lib/tokens.lua describes. Time is max(now, the last refill).
-- Model: src/algorithms/token_bucket.cpp.
--!params p, d, burst
--!checks p >= 1, d >= 1, burst >= 0

--!section decide
local full = burst * d
--!include ../lib/load_tokens.lua
local cost = n * d
local lag = t - now  -- after a clock step back, times count from now, not from t
allowed = level >= cost
capacity = burst
local left = level
if allowed then left = level - cost end
if left > 0 then
  remaining = IDIV(left, d)
end
-- Full again after ceil((full - left) / p) us; when denied, enough tokens after
-- ceil((cost - level) / p).
reset = CEIL_DIV(full - left, p)
reset = reset + lag
if not allowed then
  retry = CEIL_DIV(cost - level, p)
  retry = retry + lag
end

--!section idle
reset = CEIL_DIV(full - level, p)
reset = reset + lag

--!section write
--!include ../lib/tokens_value.lua
local ms = CEIL_DIV(reset, 1000)  -- the TTL in whole milliseconds, rounded up
redis.call('SET', key, value, 'PX', string.format('%d', ms + TTL_EXTRA_MS))
